"""Modelwright's task families as a verifiers (0.4, `verifiers.v1`) taskset.

Every rollout is one episode on Modelwright's OpenEnv server (`modelwright envs serve`,
reached over loopback): the task's setup resets it (a fresh jailed worker), the model's tool
calls go to it through `ModelwrightToolset` (the task's own tools and schemas), and the
rubric's one reward, `modelwright`, is the trusted verifier's, which the server gives on the
step that ends the episode. Nothing is scored on this side.

    vf-eval modelwright-env --env.taskset.task-ids '["requests:1:110000"]' \
        --env.taskset.task.server-url http://127.0.0.1:8000 ...
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.envs.single_agent import SingleAgentEnv
from verifiers.v1.mcp import SharedToolsetConfig, Toolset
from verifiers.v1.runtimes import Runtime
from verifiers.v1.task import Task, TaskConfig, TaskData
from verifiers.v1.taskset import Taskset, TasksetConfig
from verifiers.v1.trace import Trace
from verifiers.v1.utils.decorators import reward

from .toolset import ModelwrightState, ModelwrightToolset

DEFAULT_URL = "http://127.0.0.1:8000"


class ModelwrightTaskConfig(TaskConfig):
    server_url: str = DEFAULT_URL
    """The Modelwright OpenEnv server (`modelwright envs serve --port N`)."""
    request_timeout: float = Field(900.0, gt=0)
    """Seconds per request (a step runs a tool in a worker; the last one scores)."""


class ModelwrightConfig(TasksetConfig):
    task_ids: list[str] = Field(default_factory=list)
    """Task ids (`family:level:seed`, `modelwright tasks list`); or draw with the fields below."""
    families: list[str] = Field(default_factory=list)
    """Families to draw from when no task ids are given (default: the server's)."""
    levels: list[int] = Field(default_factory=lambda: [1])
    split: str = "train"
    num_tasks: int = Field(4, ge=1)
    """How many tasks to draw (each drawn by the server from its seed: the same every run)."""
    seed: int = 0
    tools: SharedToolsetConfig = SharedToolsetConfig()
    task: ModelwrightTaskConfig = ModelwrightTaskConfig()


class ModelwrightData(TaskData):
    reset: dict[str, Any]
    """What the server's `reset` is given: a task id, or a family, level, split and seed."""


class ModelwrightTask(Task[ModelwrightData, ModelwrightState, ModelwrightTaskConfig]):
    async def setup(self, trace: Trace, runtime: Runtime) -> None:
        state = trace.state
        state.server_url = self.config.server_url.rstrip("/")
        state.request_timeout = self.config.request_timeout
        state.episode_id = f"vf-{uuid.uuid4().hex[:16]}"
        out = await state.post("reset", {**self.data.reset, "episode_id": state.episode_id})
        obs = out["observation"]
        state.task_id, state.first, state.tools = obs["task_id"], obs["text"], obs["tools"]
        trace.info["modelwright_task"] = state.task_id

    @reward(weight=1.0)
    async def modelwright(self, trace: Trace) -> float:
        """The verifier's reward: the episode ends here if the model's last reply had no call."""
        state = trace.state
        if not state.episode_id:
            return 0.0
        if not state.done:
            await state.step([], trace.root_reply if isinstance(trace.root_reply, str) else None)
        record = state.record
        trace.record_metric("success", float(bool(record.get("success"))))
        for name, value in (record.get("components") or {}).items():
            trace.record_metric(name, float(value))
        trace.info["modelwright_record"] = record
        return float(state.reward or 0.0)


class ModelwrightTaskset(Taskset[ModelwrightTask, ModelwrightConfig]):
    @classmethod
    def toolsets(cls, config: ModelwrightConfig) -> list[Toolset]:
        return [ModelwrightToolset(config.tools)]

    def load(self) -> Iterator[ModelwrightTask]:
        config = self.config
        system = _system_prompt(config.task.server_url)
        if config.task_ids:
            resets = [{"task_id": t} for t in config.task_ids]
        else:
            families = config.families or [None]
            resets = []
            for i in range(config.num_tasks):
                reset = {"level": config.levels[i % len(config.levels)], "split": config.split,
                         "seed": config.seed + i}  # fmt: skip
                if families[i % len(families)]:
                    reset["family"] = families[i % len(families)]
                resets.append(reset)
        for reset in resets:
            name = reset.get("task_id") or ":".join(str(reset.get(k, "*")) for k in ("family", "level", "seed"))
            yield ModelwrightTask(ModelwrightData(name=name, prompt=None, system_prompt=system,
                                                  reset=reset), config.task)  # fmt: skip


class ModelwrightEnv(SingleAgentEnv):
    """The episode's first observation (the goal and the start scene, known once the server
    has reset it) opens the exchange; the model then calls tools until it answers without
    one, which ends the episode."""

    async def run(self, task: Task, agents: Any) -> None:
        async with agents.agent.interaction(task) as interaction:
            await interaction.turn(interaction.trace.state.first)


def _system_prompt(url: str) -> str | None:
    """The product's system prompt, as the server says it (None: the harness's own)."""
    try:
        return httpx.get(f"{url.rstrip('/')}/metadata", timeout=30).json().get("system_prompt")
    except (httpx.HTTPError, ValueError):
        return None


def load_environment(**kwargs: Any) -> vf.Env:
    """verifiers' entry-point convention: the environment over Modelwright's tasks, its
    taskset configured by `kwargs` (`task_ids`, `families`, `levels`, `split`,
    `num_tasks`, `seed`, `task={"server_url": ...}`)."""
    from verifiers.v1.utils.loaders import load_environment as load
    from verifiers.v1.utils.loaders import resolve_env_config

    return load(resolve_env_config({"taskset": {"id": "modelwright-env", **kwargs}}))
