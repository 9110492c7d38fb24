"""The worker slots GRPO rollouts run on: the eval scheduler's pool, shared by a batch's rollouts.

`RolloutRuntime` holds an `agents.scheduler.Scheduler` with kept sessions
(`grpo.rollout_workers` slots); rollout i of a batch runs on slot i mod N. Several rollouts
share a slot by parking whole states on it (`ToolSession.switch`: scene, undo history and
snapshots move together, so a rollout never undoes into, or restores, another's state). Per
batch, `prepare` builds every task's start state on the slots that need it in parallel (one
pinned job per slot) and renders each first observation once; `verdicts` computes a batch's
rewards on all slots at once. The environments (`training/grpo_env.py`) call the tools.
"""

from __future__ import annotations

import hashlib
import io
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from agents.context import RECALL_SPEC, ContextConfig, compact_scene
from agents.loop import InfrastructureError, openai_tools

log = logging.getLogger(__name__)


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
                session.switch(park=self.park_key(w), take=None)
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
                if session_dead(session):
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

    def park_key(self, w: int) -> str | None:
        """The key to park slot `w`'s live state under before another state is taken there:
        its rollout's key (marking that rollout parked), or None when no rollout needs it."""
        key = self.live.get(w)
        if key is not None and key in self.by_key:
            self.by_key[key]._parked = True
            return key
        return None

    def verdicts(self, environments: list[Any]) -> list[Any]:
        """Every rollout's RewardBreakdown, computed on their slots in parallel."""
        from training.tasks.verifier import default_verifier

        default_verifier().reserve(self.workers)  # rewards are scored in clean workers
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


def session_dead(session: Any) -> bool:
    try:
        session.status()
        return False
    except Exception:  # noqa: BLE001 - any failure means this session is unusable
        return True
