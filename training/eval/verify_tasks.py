"""`tasks verify`: every oracle, every applicable perturbation and the empty plan, in real workers.

`verify(ids, jobs)` runs `perturb.verify_task` for each task id on the eval scheduler, `jobs`
tasks at once, each on a fresh sandboxed worker (scored by the verifier's clean workers, as
every reward is). A task whose generator raises or whose check crashes is a problem too, so
a family being written never stops the sweep of the others. The ids come from
`training.tasks.registry.verify_ids` (seeds of each family's own split).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from training.tasks import get_task


@dataclass
class VerifyReport:
    families: list[str] = field(default_factory=list)
    levels: int = 0  # (family, level) pairs
    tasks: int = 0
    attempts: int = 0
    problems: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # e.g. "f has no level 5"
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"families": len(self.families), "levels": self.levels, "tasks": self.tasks,
                "attempts": self.attempts, "problems": self.problems, "skipped": self.skipped,
                "elapsed_s": round(self.seconds, 1), "family_names": self.families}  # fmt: skip


def applicable_perturbations(oracle: list[dict[str, Any]]) -> list[str]:
    from training.tasks.perturb import PERTURBATIONS

    out = []
    for name, change in PERTURBATIONS.items():
        try:
            plan = change(oracle)
        except (ValueError, KeyError, TypeError, IndexError):  # as verify_task would raise
            plan = oracle
        if plan is not None and plan != oracle:
            out.append(name)
    return out


def verify(ids: list[str], jobs: int = 1, perturb: bool = True,
           on_problem: Callable[[str], None] | None = None,
           on_done: Callable[[str, list[str], int, int], None] | None = None) -> VerifyReport:  # fmt: skip
    """Check each task's checker in a fresh worker (`perturb.verify_task`), `jobs` at a time:
    the oracle succeeds, the empty plan fails, every applicable perturbation is caught. A task
    that cannot be generated, or whose check crashes, is a problem too."""
    from training.eval.harness import episode_scheduler
    from training.tasks.perturb import verify_task

    started = time.monotonic()
    report = VerifyReport()
    report.families = list(dict.fromkeys(i.split(":")[0] for i in ids))
    report.levels = len({i.rsplit(":", 1)[0] for i in ids})
    report.tasks = len(ids)

    lock = threading.Lock()  # `done` runs on the scheduler's threads

    def found(lines: list[str]) -> None:
        with lock:
            report.problems.extend(lines)
            for line in lines:
                if on_problem is not None:
                    on_problem(line)

    tasks = {}
    for task_id in ids:
        try:
            tasks[task_id] = get_task(task_id)
        except Exception as exc:  # noqa: BLE001 - a generator that raises is a problem
            found([f"{task_id}: the generator fails: {type(exc).__name__}: {exc}".splitlines()[0]])

    def job(task):
        def run(session: Any, _seed: int) -> list[str]:
            return verify_task(task, session, perturb)

        return run

    def done(outcome: Any, n: int, total: int) -> None:
        task = tasks[outcome.key]
        if outcome.ok:
            problems = list(outcome.result)
        else:
            problems = [f"{outcome.key}: the check crashed: {outcome.error}".splitlines()[0]]
        oracle_failed = any(p.startswith(f"{task.id}: oracle fails") for p in problems)
        attempts = 1 if oracle_failed or not outcome.ok else (
            2 + len(applicable_perturbations(task.oracle)) * perturb)
        with lock:
            report.attempts += attempts
        found(problems)
        if on_done is not None:
            on_done(outcome.key, problems, n, total)

    if tasks:
        with episode_scheduler(jobs, scored=True, deadline_s=60) as scheduler:
            for task_id, task in tasks.items():
                scheduler.submit(task_id, job(task))
            scheduler.run(progress=done)
    report.seconds = time.monotonic() - started
    return report
