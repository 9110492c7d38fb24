"""Rewards the policy cannot forge: checkers run in a worker that never ran the policy's code.

`verify(task, session, calls)` is the one way a task is scored (`Task.evaluate` calls it, so
eval, `run`, replays, the GRPO environment, `tasks try`/`verify` and the studio's live reward
all go through it). Nothing the policy's worker says is evidence: the episode is rebuilt from
the session's ledger (the trusted side's own record of each call) in a clean worker
(tools/runtime/verifier.py), every call's validity is what that rebuild established, and the
checkers measure the clean session. A policy that monkeypatches CadQuery, bpy or the tool
runtime's own handlers, forges its replies' `ok` flags or plants commits in its scratch
changes nothing the checker reads (docs/SECURITY.md, "Where each reward component comes from").

The clean workers live in their own warm pool (`MODELWRIGHT_VERIFIER_POOL_SIZE`, default 1),
apart from the pools whose workers run policies; `Verifier.stats` counts what it costs.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from tools import Session
from training.rewards import RewardBreakdown


@dataclass
class VerifierStats:
    episodes: int = 0
    seconds: float = 0.0  # copy + load + checkers, summed

    @property
    def mean_s(self) -> float:
        return self.seconds / self.episodes if self.episodes else 0.0


class Verifier:
    """Scores tasks in clean sessions; `pool_size` workers are kept warm for it."""

    def __init__(self, pool_size: int = 1, pool: Any = None, room: Any = None):
        from tools.runtime.verifier import CleanRoom

        self.room = room or CleanRoom(size=pool_size, pool=pool)
        self.stats = VerifierStats()
        self._lock = threading.Lock()

    def verify(self, task: Any, session: Session, calls: list[dict[str, Any]]) -> RewardBreakdown:
        """The reward of the episode `calls` belong to, rebuilt from `session`'s ledger in a
        clean worker (tools/runtime/verifier.py). Each call's `ok` is what the rebuild established
        for the ledger entry its `seq` names; a call without one (or naming another tool)
        did not run on this session and counts as failed. A history the trusted side refuses
        to rebuild (a vaulted commit that does not load or match its digest, a ledger that
        overflowed) scores as an invalid result, with the reason in `details["verifier"]`."""
        from tools.trust.confined import ConfinedPathError
        from training.tasks.checks.verdict import evaluate_task

        t0 = time.perf_counter()
        ledger = getattr(session, "ledger", None)
        try:
            if ledger is None:
                raise ConfinedPathError("the session keeps no ledger of its calls")
            if ledger.broken:
                raise ConfinedPathError(ledger.broken)
            base, entries = ledger.snapshot()
            wanted = {c["seq"] for c in calls if isinstance(c.get("seq"), int)}
            with self.room.rebuild(base, entries, wanted) as (clean, done):
                trusted = established(calls, entries, done.valid, _changed(calls, done))
                verdict = evaluate_task(task, clean, trusted)
                verdict.details["calls"] = _record(trusted, entries, done.why)
                verdict.details["rebuild"] = {"calls": done.calls, "reruns": done.reruns,
                                              "overturned": done.overturned,
                                              **({"retried": done.retried} if done.retried else {})}
        except ConfinedPathError as e:
            verdict = refused(task, calls, e.message)
            known = ledger.snapshot()[1] if ledger is not None else []
            verdict.details["calls"] = _record(established(calls, known, {}), known)
        with self._lock:
            self.stats.episodes += 1
            self.stats.seconds += time.perf_counter() - t0
        return verdict

    def reserve(self, episodes: int) -> None:
        """Keep clean workers warm for `episodes` scored at once: one each, and one more. A
        clean worker serves one verification and is killed, so with short episodes its start
        paces the run; two spares booting side by side use the core generation leaves
        (60 oracle episodes: 0.80 -> 0.59 s each; a third spare gained nothing)."""
        from training.tasks.checker import default_pool

        default_pool().reserve(episodes)  # and a geometry checker ready for each
        pool = self.room.pool
        if episodes + 1 > pool.size:
            pool.size = episodes + 1
            pool.warm()

    def close(self) -> None:
        self.room.close()


def established(calls: list[dict[str, Any]], entries: list[Any], valid: dict[int, bool],
                changed: set[int] = frozenset()) -> list[dict[str, Any]]:
    """`calls` with each `ok` replaced by what the rebuild established (see `verify`), and
    `changed` by whether the call changed the rebuilt scene. A look the loop answered itself
    (`recall_step`: it reads the episode's own history, never the scene) is left out: it
    neither fails nor counts toward validity."""
    from agents.loop.context import RECALL_TOOL

    tools_by_seq = {e.seq: e.tool for e in entries}
    out = []
    for c in calls:
        if c.get("tool") == RECALL_TOOL and c.get("seq") is None:
            continue
        seq = c.get("seq")
        ok = isinstance(seq, int) and tools_by_seq.get(seq) == c.get("tool") and valid.get(seq, False)
        out.append(dict(c, ok=bool(ok), reported_ok=bool(c.get("ok")),
                        changed=bool(ok) and seq in changed))
    return out


def _changed(calls: list[dict[str, Any]], done: Any) -> set[int]:
    """The seqs of the episode's calls that changed the rebuilt scene; none when the episode
    ends on the scene it started from (a thing added, then deleted, re-states the start)."""
    seqs = [c["seq"] for c in calls if isinstance(c.get("seq"), int) and c["seq"] in done.before]
    if seqs and done.before[min(seqs)] == done.scene_hash:
        return set()
    return set(done.changed)


def _record(trusted: list[dict[str, Any]], entries: list[Any],
            why: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """The established calls as a report lists them: each call's place in the ledger, its
    tool, whether the rebuild ran it, and what the supervisor saw of it (`outcome`: refused,
    timeout, crash, answered; `unrecorded`: no ledger entry matches it); a code call that
    failed when run again says why (`rerun`)."""
    outcomes = {e.seq: e.outcome for e in entries}
    why = why or {}
    return [{"seq": c.get("seq"), "tool": c.get("tool"), "ok": c["ok"],
             "outcome": outcomes.get(c.get("seq"), "unrecorded"),
             **({"rerun": why[c["seq"]]} if c.get("seq") in why else {})} for c in trusted]


def refused(task: Any, calls: list[dict[str, Any]], reason: str) -> RewardBreakdown:
    from training import rewards

    details = {"verifier": f"refused: {reason}", "steps": len(calls)}
    return rewards.combine({"validity": 0.0}, task.weights, False, False, details)


_default: Verifier | None = None
_default_lock = threading.Lock()


def default_verifier() -> Verifier:
    global _default
    with _default_lock:
        if _default is None:
            _default = Verifier(int(os.environ.get("MODELWRIGHT_VERIFIER_POOL_SIZE", "1")))
        return _default


def boot_for_one_episode() -> None:
    """Start the default verifier's clean worker now, beside the policy's, for a command that
    scores one episode (`run`): its start overlaps the episode instead of following it, and
    no spare is booted after it."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Verifier(0)
        _default.room.pool.boot()


def verify(task: Any, session: Session, calls: list[dict[str, Any]]) -> RewardBreakdown:
    """The task's reward for `session`'s committed scene, measured in a clean worker."""
    return default_verifier().verify(task, session, calls)
