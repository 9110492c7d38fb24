"""The RL environment TRL's `GRPOTrainer` drives: one task and one tool session state per rollout.

`make_environment_class(runtime)` builds a class whose public methods are our tools, one per
catalogue entry (typed signature and a docstring generated from the tool's JSON schema), plus
`reset` and the reward hook. `reset(slot=...)` draws the slot's task from the curriculum and
returns the first observation exactly as the episode loop shows it (goal, montage, compact
scene); every tool returns the loop's result text, the new montage as an image part and the
compact scene. The reward is the task's `RewardBreakdown`.

Workers: rollouts run on the eval scheduler's pool (`agents.scheduler.Scheduler` with kept
sessions; `grpo.rollout_workers` slots), rollout i on slot i mod N. Several rollouts share a
slot by parking whole states on it (`ToolSession.switch`: scene, undo history and snapshots
move together, so a rollout never undoes into, or restores, another's state). Per batch,
`RolloutRuntime.prepare` builds every task's start state on the slots that need it in
parallel (one pinned job per slot) and renders each first observation once; the rewards of a
batch are computed in parallel the same way. TRL calls the tools themselves one after another.

Failures: a worker that crashes under a call is restarted by its session on the last commit;
the call is retried once, logged and counted (`runtime.crash_retries`). A slot whose worker
cannot be restarted gets a fresh one; the rollouts whose states it held are rebuilt by replay
(task setup, then their calls: tools are deterministic), counted in `runtime.replays`.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from agents.context import RECALL_SPEC, RECALL_TOOL, ContextConfig, compact_scene
from agents.episode import CallOutcome
from agents.loop import DEFAULT_SYSTEM, InfrastructureError, openai_tools
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


def start_key(task_id: str) -> str:
    """The stash key of a task's start state on a slot."""
    return "rl_start_" + hashlib.sha1(task_id.encode()).hexdigest()[:16]


@dataclass
class RolloutRuntime:
    """What all environments of a run share: the worker slots, curriculum, tool list, counters."""

    scheduler: Any  # agents.scheduler.Scheduler(keep_sessions=True)
    curriculum: Any
    catalogue: list[dict]
    render_size: int = 256
    shown: list[str] | None = (
        None  # tools shown in the prompt (None: all), as the hf policy's `tools`
    )
    context: ContextConfig = field(default_factory=ContextConfig)
    crash_retries: int = 0
    replays: int = 0  # rollouts rebuilt by replay after their slot's worker was replaced
    switches: int = 0  # state swaps between rollouts sharing a slot
    tool_seconds: float = 0.0
    created: int = 0
    resets: int = 0  # resets since `prepare`: the n-th reset is rollout n of the batch
    live: dict[int, str | None] = field(default_factory=dict)  # slot -> key of its live state
    by_key: dict[str, Any] = field(default_factory=dict)  # rollout key -> environment
    starts: dict[int, set[str]] = field(default_factory=dict)  # slot -> prepared task ids
    observations: dict[str, list[dict]] = field(default_factory=dict)  # task -> first view

    @property
    def workers(self) -> int:
        return self.scheduler.workers

    def session(self, slot: int) -> Any:
        return self.scheduler.session(slot)

    @property
    def sessions(self) -> list[Any]:
        return [self.session(w) for w in range(self.workers)]

    @property
    def tools(self) -> list[dict]:
        """The OpenAI tool list, as the episode loop shows it (catalogue + recall_step)."""
        from agents.policies.hf_policy import shown_tools

        return shown_tools(openai_tools(self.catalogue) + [RECALL_SPEC], self.shown)

    def close(self) -> None:
        self.scheduler.close()

    # -- per batch ----------------------------------------------------------------------------

    def prepare(self, slots: list[int]) -> None:
        """Before TRL resets a batch's environments (rollout i <-> slots[i]): build each task's
        start state on every worker slot that will run it, in parallel, and render each task's
        first observation once. Old states are dropped (a reset per slot)."""
        from training.tasks import get_task

        start = time.perf_counter()
        needed: dict[int, list[str]] = {w: [] for w in range(self.workers)}
        for i, slot in enumerate(slots):
            task_id = self.curriculum.task_for(int(slot))
            if task_id not in needed[i % self.workers]:
                needed[i % self.workers].append(task_id)
        observe_on = {}
        for w, ids in needed.items():
            for task_id in ids:
                observe_on.setdefault(task_id, w)
        self.observations = {}
        self.by_key = {}
        self.resets = 0
        for w, ids in needed.items():
            job = self._start_job(w, [get_task(t) for t in ids], observe_on, fresh=True)
            self.scheduler.submit(f"prepare-slot-{w}", job, worker=w)
        for outcome in self.scheduler.run():
            if not outcome.ok:
                raise RuntimeError(f"could not build rollout start states: {outcome.error}")
        self.tool_seconds += time.perf_counter() - start

    def ensure_start(self, slot: int, task: Any) -> None:
        """A task's start state on `slot`, built now if `prepare` did not (e.g. a lone reset)."""
        if task.id in self.starts.get(slot, set()) and task.id in self.observations:
            return
        self._start_job(slot, [task], {task.id: slot}, fresh=False)(self.session(slot), 0)

    def _start_job(self, w: int, tasks: list[Any], observe_on: dict[str, int], fresh: bool):
        def job(session: Any, _seed: int) -> None:
            if fresh:
                session.reset()  # drops the last batch's stashes too
                self.starts[w] = set()
            else:  # a rollout's state may be live: park it (or drop it), start empty
                session.switch(park=self._parkable(w), take=None)
            self.live[w] = None
            for task in tasks:  # the scene is empty here: after the reset, or the last park
                task.setup(session)
                if observe_on.get(task.id) == w:
                    self.observations[task.id] = observe(session, self)
                session.switch(park=start_key(task.id), take=None)
                self.live[w] = None
                self.starts.setdefault(w, set()).add(task.id)

        def guarded(session: Any, seed: int) -> None:
            try:
                job(session, seed)
            except InfrastructureError:
                raise
            except Exception as exc:  # a worker that died under setup: retry on a fresh one
                if _session_dead(session):
                    self.crash_retries += 1
                    self.live[w] = None
                    raise InfrastructureError(f"worker slot {w} died preparing: {exc}") from exc
                raise

        return guarded

    def next_slot(self) -> int:
        """The worker slot of the next rollout reset: TRL resets a batch's rollouts in order,
        so rollout i lands on slot i mod N, where `prepare` built its start."""
        slot = self.resets % self.workers
        self.resets += 1
        return slot

    def _parkable(self, w: int) -> str | None:
        """The live state's key if a rollout still needs it (else it may be dropped)."""
        key = self.live.get(w)
        if key is not None and key in self.by_key:
            self.by_key[key]._parked = True
            return key
        return None

    def verdicts(self, environments: list[Any]) -> list[Any]:
        """Every rollout's RewardBreakdown, computed on their slots in parallel."""
        by_slot: dict[int, list[Any]] = {}
        for env in environments:
            by_slot.setdefault(env._slot, []).append(env)
        for w, envs in by_slot.items():

            def job(_session: Any, _seed: int, envs: list[Any] = envs) -> None:
                for env in envs:
                    env.verdict()

            self.scheduler.submit(f"reward-slot-{w}", job, worker=w)
        for outcome in self.scheduler.run():
            if not outcome.ok:
                log.warning("computing rewards on a slot failed (%s); retrying in turn",
                            outcome.error)  # fmt: skip
        return [env.verdict() for env in environments]


def observe(session: Any, runtime: RolloutRuntime) -> list[dict]:
    """The montage and the compact scene, as the episode loop shows them after a call."""
    parts: list[dict] = []
    render = session.render(size=runtime.render_size)
    if getattr(render, "ok", True) and render.images:
        parts.append(pil_part(render.images[0]))
    scene = compact_scene(session.scene(), runtime.context.scene_objects)
    parts.append({"type": "text", "text": "Scene: " + scene})
    return parts


def pil_part(png: bytes) -> dict:
    from PIL import Image

    return {"type": "image", "image": Image.open(io.BytesIO(png)).convert("RGB")}


def _session_dead(session: Any) -> bool:
    try:
        session.status()
        return False
    except Exception:  # noqa: BLE001 - any failure means this session is unusable
        return True


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
                s.switch(park=rt._parkable(w), take=self._key)
            else:
                s.switch(park=rt._parkable(w), take=start_key(self.task.id), fork=True)
            rt.switches += 1
        except Exception as exc:  # noqa: BLE001 - the stash is gone (a replaced worker)
            if _session_dead(s):
                raise  # the caller replaces the worker first
            log.warning("rollout %s on slot %d: %s; rebuilding it by replay", self._key, w, exc)
            self._replay()
        self._parked = False
        rt.live[w] = self._key

    def _replay(self) -> None:
        rt, s = self.runtime, self._session
        s.switch(park=rt._parkable(self._slot), take=None)
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
        if not _session_dead(self._session):
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
