"""The RL environment TRL's `GRPOTrainer` drives: one task and one tool session per rollout.

`make_environment_class(runtime)` builds a class whose public methods are our tools, one per
catalogue entry (typed signature and a docstring generated from the tool's JSON schema), plus
`reset` and the reward hook. `reset(slot=...)` draws the slot's task from the curriculum, builds
its start state and returns the first observation exactly as the episode loop shows it (goal,
montage, compact scene); every tool returns the loop's result text, the new montage as an image
part and the compact scene. The reward is the task's `RewardBreakdown`.

Rollouts share a few sandboxed workers (`RolloutRuntime.sessions`): a rollout that finds its
worker last used by another rollout rebuilds its own state there (reset, task setup, replay of
its calls) before acting; tools are deterministic, so the state is the same. A worker that
crashes under a call is restarted by the runtime; the rollout replays onto it, retries the call
once, and the event is logged and counted (`runtime.crash_retries`).
"""

from __future__ import annotations

import inspect
import io
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from agents.context import RECALL_SPEC, RECALL_TOOL, ContextConfig, compact_scene
from agents.episode import CallOutcome
from agents.loop import DEFAULT_SYSTEM, openai_tools
from agents.policy import ToolCall

log = logging.getLogger(__name__)

_PY_TYPES = {
    "string": str,
    "number": float,
    "integer": int,
    "boolean": bool,
    "array": list,
    "object": dict,
}


@dataclass
class RolloutRuntime:
    """What all environments of a run share: workers, the curriculum, the tool list, counters."""

    sessions: list[Any]
    curriculum: Any
    catalogue: list[dict]
    render_size: int = 256
    shown: list[str] | None = (
        None  # tools shown in the prompt (None: all), as the hf policy's `tools`
    )
    context: ContextConfig = field(default_factory=ContextConfig)
    owners: dict[int, Any] = field(default_factory=dict)
    crash_retries: int = 0
    tool_seconds: float = 0.0
    created: int = 0

    @property
    def tools(self) -> list[dict]:
        """The OpenAI tool list, as the episode loop shows it (catalogue + recall_step)."""
        from agents.policies.hf_policy import shown_tools

        return shown_tools(openai_tools(self.catalogue) + [RECALL_SPEC], self.shown)

    def close(self) -> None:
        for s in self.sessions:
            s.close()


def pil_part(png: bytes) -> dict:
    from PIL import Image

    return {"type": "image", "image": Image.open(io.BytesIO(png)).convert("RGB")}


class ToolEnvironmentBase:
    """Shared behaviour; the tool methods are added by `make_environment_class`."""

    runtime: RolloutRuntime

    def __init__(self) -> None:
        rt = self.runtime
        self._index = rt.created
        rt.created += 1
        self.task: Any = None
        self.outcomes: list[CallOutcome] = []
        self._verdict: Any = None

    @property
    def _session(self) -> Any:
        # Looked up each time: a worker replaced after a crash is seen by every rollout on it.
        return self.runtime.sessions[self._index % len(self.runtime.sessions)]

    # -- TRL hooks ----------------------------------------------------------------------------

    def reset(self, slot: int = 0, **_: Any) -> list[dict]:
        """Start the slot's task; returns the first observation (goal, montage, scene)."""
        from training.tasks import get_task

        start = time.perf_counter()
        try:
            self.task = get_task(self.runtime.curriculum.task_for(int(slot)))
            self.outcomes = []
            self._verdict = None
            self._rebuild()
            return [{"type": "text", "text": f"Goal: {self.task.prompt}"}, *self._observe()]
        finally:
            self.runtime.tool_seconds += time.perf_counter() - start

    def verdict(self) -> Any:
        """The task's RewardBreakdown for the final scene (computed once per rollout)."""
        if self._verdict is None:
            self._ensure_owner()
            calls = [o.for_checker() for o in self.outcomes if not o.local]
            self._verdict = self.task.evaluate(self._session, calls)
        return self._verdict

    # -- plumbing -----------------------------------------------------------------------------

    def _rebuild(self) -> None:
        s = self._session
        s.reset()
        self.task.setup(s)
        for o in self.outcomes:
            if not o.local:
                s.call(o.call.name, o.call.arguments)
        self.runtime.owners[id(s)] = self

    def _ensure_owner(self) -> None:
        if self.runtime.owners.get(id(self._session)) is not self:
            self._rebuild()

    def _observe(self) -> list[dict]:
        s = self._session
        parts: list[dict] = []
        render = s.render(size=self.runtime.render_size)
        if getattr(render, "ok", True) and render.images:
            parts.append(pil_part(render.images[0]))
        scene = compact_scene(s.scene(), self.runtime.context.scene_objects)
        parts.append({"type": "text", "text": "Scene: " + scene})
        return parts

    def _run(self, name: str, arguments: dict) -> list[dict]:
        start = time.perf_counter()
        call = ToolCall(id=f"r{len(self.outcomes)}", name=name, arguments=arguments)
        try:
            if name == RECALL_TOOL:
                outcome = self._recall(call)
                return [{"type": "text", "text": outcome.text}]
            try:
                self._ensure_owner()
                result = self._session.call(name, arguments)
            except (
                Exception
            ) as exc:  # the runtime itself failed (e.g. a worker that cannot restart)
                result = _Crashed(str(exc))
            if _crashed(result):
                self.runtime.crash_retries += 1
                log.warning(
                    "tool worker crashed under %s in %s (%s); replaying and retrying once",
                    name,
                    self.task.id,
                    getattr(result.error, "message", result.error),
                )
                self._replace_session_if_dead()
                self.runtime.owners.pop(id(self._session), None)
                self._ensure_owner()
                result = self._session.call(name, arguments)
            outcome = CallOutcome.from_result(call, result, (time.perf_counter() - start) * 1e3)
            self.outcomes.append(outcome)
            return [{"type": "text", "text": outcome.text}, *self._observe()]
        finally:
            self.runtime.tool_seconds += time.perf_counter() - start

    def _replace_session_if_dead(self) -> None:
        """The runtime restarts a crashed worker itself; if even that failed, open a new one."""
        try:
            self._session.status()
            return
        except Exception:  # noqa: BLE001 - any failure means this session is unusable
            pass
        from tools import ToolSession

        old = self._session
        fresh = ToolSession(deadline_s=getattr(old, "deadline_s", 30.0))
        self.runtime.sessions[self._index % len(self.runtime.sessions)] = fresh
        self.runtime.owners.pop(id(old), None)
        try:
            old.close()
        except Exception:  # noqa: BLE001 - it is already broken
            pass
        log.warning("replaced an unrecoverable tool worker in %s with a fresh one", self.task.id)

    def _recall(self, call: ToolCall) -> CallOutcome:
        index = call.arguments.get("index")
        real = [o for o in self.outcomes if not o.local]
        if not isinstance(index, int) or not 0 <= index < len(real):
            text = f"error (validation): no step {index!r}; steps so far: 0..{len(real) - 1}"
            return CallOutcome(call=call, ok=False, text=text, error_kind="validation", local=True)
        o = real[index]
        return CallOutcome(call=call, ok=True, text=f"{o.call.name}: {o.text}", local=True)


@dataclass
class _Crashed:
    """Stands in for a ToolResult when the session raised instead of returning one."""

    message: str

    @property
    def error(self) -> Any:
        from tools import ErrorKind, ToolError

        return ToolError(ErrorKind.CRASH, self.message)


def _crashed(result: Any) -> bool:
    error = getattr(result, "error", None)
    kind = getattr(getattr(error, "kind", None), "value", getattr(error, "kind", None))
    return kind == "crash"


def _tool_method(spec: dict):
    """A method named after the tool, with a typed signature and Google-style docstring."""
    name = spec["name"]
    params = spec.get("parameters", {}).get("properties", {})
    required = set(spec.get("parameters", {}).get("required", []))

    def method(self, **kwargs: Any) -> list:
        return self._run(name, kwargs)

    sig_params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    doc_args = []
    for pname, pschema in params.items():
        ptype = _PY_TYPES.get(
            pschema.get("type") if isinstance(pschema.get("type"), str) else "", Any
        )
        default = inspect.Parameter.empty if pname in required else None
        annotation = ptype if pname in required else ptype | None if ptype is not Any else Any
        sig_params.append(
            inspect.Parameter(
                pname, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
            )
        )
        annotations[pname] = annotation
        desc = (pschema.get("description") or pname).replace("\n", " ")
        doc_args.append(f"    {pname}: {desc}")
    annotations["return"] = list
    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.Signature(sig_params, return_annotation=list)
    method.__annotations__ = annotations
    description = (spec.get("description") or name).strip()
    method.__doc__ = (
        description
        + ("\n\nArgs:\n" + "\n".join(doc_args) if doc_args else "")
        + ("\n\nReturns:\n    The result text, the new render and the scene.")
    )
    return method


def make_environment_class(runtime: RolloutRuntime) -> type:
    """An environment class bound to `runtime`, with one public method per tool."""
    members: dict[str, Any] = {"runtime": runtime}
    for spec in runtime.catalogue:
        members[spec["name"]] = _tool_method(spec)
    members[RECALL_TOOL] = _tool_method(RECALL_SPEC["function"])
    return type("ModelwrightEnvironment", (ToolEnvironmentBase,), members)


def initial_prompt() -> list[dict]:
    """The conversation before `reset` adds the observation: the loop's system prompt."""
    return [{"role": "system", "content": DEFAULT_SYSTEM}, {"role": "user", "content": ""}]
