"""Modelwright's tasks as a TRL environment: `GRPOTrainer(environment_factory=...)`.

    from training.envs.trl_env import environment, task_dataset
    Env = environment(families=["requests"], levels=[1])
    trainer = GRPOTrainer(model, args=GRPOConfig(...), train_dataset=task_dataset(Env, 64),
                          environment_factory=Env)

TRL (1.16) makes one instance per rollout, calls `reset(**row)` with the dataset row (its
`task_id` says which task; the rollouts of a group share a row, so they share a task), exposes
the class's public methods as the model's tools, calls them with the parsed arguments, and
asks `get_reward()` once a rollout is over. Each method here is one Modelwright tool with its
schema; its call goes through `EpisodeEnv` (training/envs/core.py), the product's episode loop
on a fresh jailed worker, and `get_reward` is the trusted verifier's reward for the episode,
the same number `modelwright eval` gives for the same calls.

Light: TRL, torch and datasets are imported only by `task_dataset` and the example.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from training.envs.core import EpisodeEnv

JSON_TYPES = {"string": str, "number": float, "integer": int, "boolean": bool, "object": dict}


def _annotation(schema: dict) -> Any:
    kind = schema.get("type")
    if kind == "array":
        return list[_annotation(schema.get("items", {}))]
    if isinstance(kind, list):  # ["number", "null"] and the like: the first real type
        kind = next((k for k in kind if k != "null"), "string")
    return JSON_TYPES.get(kind, str)


def _describe(arg: str, schema: dict) -> str:
    """One docstring line for an argument: its description, bounds and default (TRL's
    schema reader keeps only type, description and `(choices: [...])`)."""
    words = [schema.get("description", "").strip()]
    if schema.get("type") == "array" and schema.get("minItems") == schema.get("maxItems") and schema.get("minItems"):
        words.append(f"{schema['minItems']} values")
    if "pattern" in schema:
        words.append(f"matching {schema['pattern']}")
    if "default" in schema:
        words.append(f"default {json.dumps(schema['default'])}")
    text = ", ".join(w for w in words if w) or arg.replace("_", " ")
    if "enum" in schema:
        text += f" (choices: {json.dumps(schema['enum'])})"
    return text


def tool_method(spec: dict) -> Any:
    """A method `name(self, **arguments)` whose signature, type hints and docstring say the
    tool's schema, as TRL and transformers read a tool from a Python function."""
    fn = spec["function"] if "function" in spec else spec
    name, params = fn["name"], fn.get("parameters", {})
    props, required = params.get("properties", {}), set(params.get("required", []))

    def method(self, **arguments: Any) -> str:
        return self._call(name, arguments)

    ordered = sorted(props, key=lambda p: p not in required)  # required first, as Python wants
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    for p in ordered:
        ann = _annotation(props[p])
        annotations[p] = ann if p in required else ann | None
        parameters.append(inspect.Parameter(
            p, inspect.Parameter.KEYWORD_ONLY, annotation=annotations[p],
            default=inspect.Parameter.empty if p in required else None))  # fmt: skip
    annotations["return"] = str
    lines = [fn.get("description", name).strip() or name, "", "Args:"]
    lines += [f"    {p}: {_describe(p, props[p])}" for p in ordered]
    lines += ["", "Returns:", "    The tool's result and the scene after it."]
    method.__name__ = method.__qualname__ = name
    method.__doc__ = "\n".join(lines)
    method.__annotations__ = annotations
    method.__signature__ = inspect.Signature(parameters, return_annotation=str)
    return method


class ModelwrightEnvBase:
    """The methods TRL looks for besides the tools: `reset` and `get_reward`. A class made
    by `environment()` adds one method per tool and the task choice (families, levels)."""

    families: tuple[str, ...] = ()
    levels: tuple[int, ...] = (1,)
    split: str = "train"
    max_steps: int = 8
    store: Any = None

    def __init__(self) -> None:
        self._env = EpisodeEnv(store=self.store, max_steps=self.max_steps, name="trl")
        self.observations: list[str] = []

    def reset(self, task_id: str | None = None, **row: Any) -> str:
        """Start the row's task (`task_id`; the class's first task when the row has none):
        the goal and the start scene, appended to the row's prompt."""
        task_id = task_id or task_ids(type(self), 1)[0]
        obs = self._env.reset(task_id)
        self.observations = [obs.text]
        return obs.text

    def get_reward(self) -> float:
        """The verifier's reward of the episode (0 for a rollout that never started)."""
        if self._env.task_id is None:
            return 0.0
        return self._env.reward()

    @property
    def record(self) -> dict | None:
        """The finished episode's eval record (after `get_reward`)."""
        return self._env.record

    def _call(self, name: str, arguments: dict) -> str:
        if self._env.record is not None:
            return "The episode has ended (its step budget is spent): answer without a tool call."
        obs = self._env.step({"name": name, "arguments": arguments})
        text = obs.text if not obs.done else "The episode has ended (its step budget is spent)."
        self.observations.append(text)
        return text

    def __del__(self) -> None:
        try:
            self._env.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def environment(families: list[str], levels: list[int] = (1,), split: str = "train", *,
                tools: list[str] | None = None, max_steps: int = 8, store: Any = None,
                name: str = "ModelwrightEnv") -> type:  # fmt: skip
    """A TRL environment class over these families' tasks. Its tools: `tools`, or the union
    of the families' declared toolboxes (what their prompts show in the product)."""
    from tools import TOOLS
    from training.tasks import FAMILIES
    from training.tasks.base import family_tools

    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown families {unknown}; `modelwright tasks list` names them")
    names = list(tools) if tools else list(dict.fromkeys(t for f in families for t in family_tools(f)))
    missing = [t for t in names if t not in TOOLS]
    if missing:
        raise ValueError(f"unknown tools {missing}")
    attrs: dict[str, Any] = {t: tool_method(TOOLS[t].to_openai()) for t in names}
    attrs.update(families=tuple(families), levels=tuple(levels), split=split,
                 max_steps=max_steps, store=store, tool_names=tuple(names))  # fmt: skip
    attrs["__doc__"] = f"Modelwright's {', '.join(families)} tasks (levels {list(levels)}) as a TRL environment."
    return type(name, (ModelwrightEnvBase,), attrs)


def task_ids(env_class: type, n: int, seed: int = 0) -> list[str]:
    """`n` task ids of the class's families and levels on its split, drawn as the product's
    own trainer draws them (the same sampler, seeded)."""
    import random

    from training.tasks.sampling import TaskSampler

    sampler = TaskSampler(list(env_class.families), list(env_class.levels), env_class.split, {}, {})
    per = -(-n // max(1, len(sampler.families)))
    ids = sampler.plan(per)
    random.Random(seed).shuffle(ids)
    return ids[:n]


def task_dataset(env_class: type, n: int, seed: int = 0, system: str | None = None) -> Any:
    """A `datasets.Dataset` of `n` rows, one task each: `prompt` (the product's system
    prompt and an empty user turn the env's `reset` fills) and `task_id`."""
    from datasets import Dataset

    from agents import DEFAULT_SYSTEM

    ids = task_ids(env_class, n, seed)
    sys_msg = {"role": "system", "content": system or DEFAULT_SYSTEM}
    return Dataset.from_dict({
        "prompt": [[sys_msg, {"role": "user", "content": ""}] for _ in ids],
        "task_id": ids,
    })
