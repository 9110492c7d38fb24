"""The RL environment TRL's `GRPOTrainer` drives: one task and one tool session state per rollout.

`make_environment_class(runtime)` builds a class whose public methods are our tools, one per
catalogue entry (typed signature and a docstring generated from the tool's JSON schema), plus
`reset` and the reward hook. `reset(slot=...)` draws the slot's task from the curriculum and
returns the first observation exactly as the episode loop shows it (goal, montage, compact
scene); every tool returns the loop's result text, the new montage as an image part and the
compact scene. The reward is the task's `RewardBreakdown`.

Workers: the rollouts share the worker slots of a `RolloutRuntime`
(`training/rollout_runtime.py`: the eval scheduler's pool, whole-state switches between
rollouts on a slot, start states and rewards built per batch in parallel). TRL calls the tools
themselves one after another.

Failures: a worker that crashes under a call is restarted by its session on the last commit;
the call is retried once, logged and counted (`runtime.crash_retries`). A slot whose worker
cannot be restarted gets a fresh one; the rollouts whose states it held are rebuilt by replay
(task setup, then their calls: tools are deterministic), counted in `runtime.replays`.
"""

from __future__ import annotations

import inspect
import logging
import time
from dataclasses import dataclass
from typing import Any

from agents.context import RECALL_SPEC, RECALL_TOOL
from agents.episode import CallOutcome
from agents.loop import DEFAULT_SYSTEM
from agents.policy import ToolCall
from training.rollout_runtime import RolloutRuntime, observe, session_dead, start_key

log = logging.getLogger(__name__)

_PY_TYPES = {
    "string": str,
    "number": float,
    "integer": int,
    "boolean": bool,
    "array": list,
    "object": dict,
}


class ToolEnvironmentBase:
    """Shared behaviour; the tool methods are added by `make_environment_class`."""

    runtime: RolloutRuntime

    def __init__(self) -> None:
        rt = self.runtime
        self._index = rt.created
        rt.created += 1
        self._key = f"rl_r{self._index}"
        self._slot = self._index % rt.workers  # set again by each reset
        self._parked = False  # this rollout's state is stashed on its slot
        self.task: Any = None
        self.outcomes: list[CallOutcome] = []
        self._verdict: Any = None

    @property
    def _session(self) -> Any:
        # Looked up each time: a worker replaced after a crash is seen by every rollout on it.
        return self.runtime.session(self._slot)

    # -- TRL hooks ----------------------------------------------------------------------------

    def reset(self, slot: int = 0, **_: Any) -> list[dict]:
        """Start the slot's task; returns the first observation (goal, montage, scene)."""
        from training.tasks import get_task

        start = time.perf_counter()
        rt = self.runtime
        try:
            self.task = get_task(rt.curriculum.task_for(int(slot)))
            self.outcomes = []
            self._verdict = None
            self._parked = False
            self._slot = rt.next_slot()
            for w, key in rt.live.items():
                if key == self._key:
                    rt.live[w] = None  # this rollout's last episode: stale now, may be dropped
            rt.by_key[self._key] = self
            rt.ensure_start(self._slot, self.task)
            return [{"type": "text", "text": f"Goal: {self.task.prompt}"},
                    *rt.observations[self.task.id]]  # fmt: skip
        finally:
            rt.tool_seconds += time.perf_counter() - start

    def verdict(self) -> Any:
        """The task's RewardBreakdown for the final scene (computed once per rollout)."""
        if self._verdict is None:
            self._acquire()
            calls = [o.for_checker() for o in self.outcomes if not o.local]
            self._verdict = self.task.evaluate(self._session, calls)
        return self._verdict

    # -- plumbing -----------------------------------------------------------------------------

    def _acquire(self) -> None:
        """Make this rollout's state the live one on its slot (parking the one there)."""
        rt, w = self.runtime, self._slot
        if rt.live.get(w) == self._key:
            return
        s = self._session
        try:
            if self._parked:
                s.switch(park=rt.park_key(w), take=self._key)
            else:
                s.switch(park=rt.park_key(w), take=start_key(self.task.id), fork=True)
            rt.switches += 1
        except Exception as exc:  # noqa: BLE001 - the stash is gone (a replaced worker)
            if session_dead(s):
                raise  # the caller replaces the worker first
            log.warning("rollout %s on slot %d: %s; rebuilding it by replay", self._key, w, exc)
            self._replay()
        self._parked = False
        rt.live[w] = self._key

    def _replay(self) -> None:
        rt, s = self.runtime, self._session
        s.switch(park=rt.park_key(self._slot), take=None)
        self.task.setup(s)
        for o in self.outcomes:
            if not o.local:
                s.call(o.call.name, o.call.arguments)
        rt.replays += 1

    def _run(self, name: str, arguments: dict) -> list[dict]:
        start = time.perf_counter()
        call = ToolCall(id=f"r{len(self.outcomes)}", name=name, arguments=arguments)
        try:
            if name == RECALL_TOOL:
                outcome = self._recall(call)
                return [{"type": "text", "text": outcome.text}]
            try:
                self._acquire()
                result = self._session.call(name, arguments)
            except (
                Exception
            ) as exc:  # the runtime itself failed (e.g. a worker that cannot restart)
                result = _Crashed(str(exc))
            if _crashed(result):
                self.runtime.crash_retries += 1
                log.warning(
                    "tool worker crashed under %s in %s (%s); retrying once",
                    name,
                    self.task.id,
                    getattr(result.error, "message", result.error),
                )
                self._replace_session_if_dead()
                self._acquire()
                result = self._session.call(name, arguments)
            outcome = CallOutcome.from_result(call, result, (time.perf_counter() - start) * 1e3)
            self.outcomes.append(outcome)
            return [{"type": "text", "text": outcome.text}, *observe(self._session, self.runtime)]
        finally:
            self.runtime.tool_seconds += time.perf_counter() - start

    def _replace_session_if_dead(self) -> None:
        """A session restarts a crashed worker itself (on its last commit: this rollout's state
        before the call); if even that failed, the slot gets a fresh worker and every state it
        held is rebuilt by replay when next needed."""
        rt, w = self.runtime, self._slot
        if not session_dead(self._session):
            return
        rt.scheduler.replace_session(w)
        rt.live[w] = None
        rt.starts[w] = set()
        log.warning("replaced an unrecoverable tool worker on slot %d (%s)", w, self.task.id)

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
