"""A queue of episodes over a pool of tool workers: for `eval`, batch runs and RL rollouts.

Each worker thread holds one ToolSession (one sandboxed worker process) and takes jobs from
a shared priority queue (higher priority first, then submission order). A job that fails
for infrastructure reasons (`InfrastructureError`: its worker died while the start state
was being built, or the pool could not give a session) is put back and retried on a fresh
session, up to `max_retries`; a job the policy failed is a result like any other and is
never retried. Outcomes come back in submission order and each job gets a seed fixed at
submission, so the results do not depend on the number of workers.

Two additions serve RL rollouts (`training/rl/rollouts.py`: a batch's episodes are jobs here):
`keep_sessions=True` keeps each worker slot's session open across `run()` calls (until
`close()`), so a run does not start workers per step, and `submit(..., worker=w)` pins a job
to slot `w`.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents.loop import InfrastructureError
from tools import Session

log = logging.getLogger(__name__)

JobFn = Callable[[Any, int], Any]  # (session, seed) -> result


@dataclass
class JobOutcome:
    key: str
    seed: int
    result: Any = None
    error: str | None = None  # why the job has no result (a bug, or retries exhausted)
    infrastructure: bool = False  # the error was the runtime's, not the policy's
    attempts: int = 0
    worker: int = -1
    wall_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(order=True)
class _Queued:
    sort_key: tuple[int, int]
    index: int = field(compare=False)
    key: str = field(compare=False)
    fn: JobFn = field(compare=False)
    seed: int = field(compare=False)
    attempts: int = field(default=0, compare=False)
    worker: int | None = field(default=None, compare=False)  # pinned to this slot


class Scheduler:
    """Runs submitted jobs on `workers` sessions; `run()` blocks until all are done."""

    def __init__(
        self,
        workers: int = 1,
        session_factory: Callable[[], Any] | None = None,
        *,
        max_retries: int = 2,
        seed: int = 0,
        retry_backoff_s: float = 0.2,
        keep_sessions: bool = False,
        deadline_s: float | None = None,  # per tool call, for sessions of the scheduler's own pool
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers
        self._own_pool = None
        if session_factory is None:
            from tools import ToolSession, WorkerPool

            # Kept sessions hold their workers for good: no spare workers to keep warm then.
            pool = self._own_pool = WorkerPool(size=0 if keep_sessions else workers)
            options = {} if deadline_s is None else {"deadline_s": deadline_s}

            def session_factory() -> Any:
                return ToolSession(pool, **options)

        self.session_factory = session_factory
        self.max_retries = max_retries
        self.seed = seed
        self.retry_backoff_s = retry_backoff_s
        self._heap: list[_Queued] = []
        self._count = itertools.count()
        self._lock = threading.Lock()
        self._outcomes: dict[int, JobOutcome] = {}
        self.retries = 0  # jobs put back after an infrastructure failure
        self.keep_sessions = keep_sessions
        self._kept: dict[int, Any] = {}  # worker slot -> its session, with keep_sessions

    def session(self, worker: int) -> Any:
        """The kept session of worker slot `worker` (opened on first use); keep_sessions only.

        For callers that drive a slot's session directly between `run()` calls, never during one.
        """
        if not self.keep_sessions:
            raise RuntimeError("Scheduler.session() needs keep_sessions=True")
        if not 0 <= worker < self.workers:
            raise ValueError(f"worker {worker} is not in 0..{self.workers - 1}")
        if worker not in self._kept:
            self._kept[worker] = self.session_factory()
        return self._kept[worker]

    def replace_session(self, worker: int) -> Any:
        """Close slot `worker`'s kept session (it is broken) and open a fresh one."""
        old = self._kept.pop(worker, None)
        if old is not None:
            _close(old)
        return self.session(worker)

    def submit(
        self,
        key: str,
        fn: JobFn,
        *,
        priority: int = 0,
        seed: int | None = None,
        worker: int | None = None,
    ) -> int:
        """Queue `fn(session, seed)`; returns the job's index in the outcome list. With
        `worker`, the job runs only on that slot (and its retries too)."""
        if worker is not None and not 0 <= worker < self.workers:
            raise ValueError(f"worker {worker} is not in 0..{self.workers - 1}")
        index = next(self._count)
        job_seed = seed if seed is not None else (self.seed * 1_000_003 + index) % 2**31
        with self._lock:
            heapq.heappush(
                self._heap, _Queued((-priority, index), index, key, fn, job_seed, worker=worker)
            )
        return index

    def run(
        self,
        progress: Callable[[JobOutcome, int, int], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> list[JobOutcome]:
        """Run every queued job; outcomes in submission order. `progress(outcome, done, total)`
        is called from the worker threads as jobs finish."""
        cancel = cancel or threading.Event()
        total = len(self._heap)
        done = [0]
        pinned = any(job.worker is not None for job in self._heap)
        slots = range(self.workers if pinned else min(self.workers, max(total, 1)))
        threads = [
            threading.Thread(
                target=self._work,
                args=(w, progress, cancel, done, total),
                name=f"episode-worker-{w}",
            )
            for w in slots
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        outcomes = [self._outcomes[i] for i in sorted(self._outcomes)]
        self._outcomes = {}
        return outcomes

    def close(self) -> None:
        for worker in list(self._kept):
            _close(self._kept.pop(worker))
        if self._own_pool is not None:
            self._own_pool.close()
            self._own_pool = None

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- worker threads --------------------------------------------------------------------

    def _next(self, worker: int) -> _Queued | None:
        """The best queued job this slot may run (unpinned, or pinned to it)."""
        with self._lock:
            skipped, found = [], None
            while self._heap:
                job = heapq.heappop(self._heap)
                if job.worker is None or job.worker == worker:
                    found = job
                    break
                skipped.append(job)
            for job in skipped:
                heapq.heappush(self._heap, job)
            return found

    def _work(
        self, worker: int, progress, cancel: threading.Event, done: list[int], total: int
    ) -> None:
        session = None
        try:
            while not cancel.is_set():
                job = self._next(worker)
                if job is None:
                    return
                if self.keep_sessions:  # a job may have replaced the slot's session
                    session = self._kept.get(worker)
                if session is None:
                    try:
                        session = self.session_factory()
                        if self.keep_sessions:
                            self._kept[worker] = session
                    except Exception as exc:  # the pool failed: retry the job later
                        job.attempts += 1
                        self._retry_or_fail(
                            job, worker, f"no tool session: {exc}", 0.0, progress, done, total
                        )
                        continue
                job.attempts += 1
                start = time.perf_counter()
                try:
                    result = job.fn(session, job.seed)
                except InfrastructureError as exc:
                    wall = (time.perf_counter() - start) * 1e3
                    _close(session)
                    session = None  # the next attempt gets a fresh worker
                    self._kept.pop(worker, None)
                    self._retry_or_fail(job, worker, str(exc), wall, progress, done, total)
                    continue
                except Exception as exc:  # a bug or a policy that raised: not retried
                    log.exception("job %s failed", job.key)
                    wall = (time.perf_counter() - start) * 1e3
                    self._settle(
                        JobOutcome(job.key, job.seed, error=f"{type(exc).__name__}: {exc}",
                                   attempts=job.attempts, worker=worker, wall_ms=wall),
                        job.index, progress, done, total,
                    )  # fmt: skip
                    continue
                wall = (time.perf_counter() - start) * 1e3
                self._settle(
                    JobOutcome(job.key, job.seed, result=result, attempts=job.attempts,
                               worker=worker, wall_ms=wall),
                    job.index, progress, done, total,
                )  # fmt: skip
        finally:
            if session is not None and not self.keep_sessions:
                _close(session)

    def _retry_or_fail(
        self, job: _Queued, worker: int, error: str, wall: float, progress, done, total
    ) -> None:
        if job.attempts <= self.max_retries:
            log.warning("job %s: infrastructure failure (%s); retrying", job.key, error)
            with self._lock:
                self.retries += 1
                heapq.heappush(self._heap, job)
            time.sleep(self.retry_backoff_s)
            return
        self._settle(
            JobOutcome(job.key, job.seed, error=f"infrastructure: {error}", infrastructure=True,
                       attempts=job.attempts, worker=worker, wall_ms=wall),
            job.index, progress, done, total,
        )  # fmt: skip

    def _settle(
        self, outcome: JobOutcome, index: int, progress, done: list[int], total: int
    ) -> None:
        with self._lock:
            self._outcomes[index] = outcome
            done[0] += 1
            n = done[0]
        if progress is not None:
            progress(outcome, n, total)


def _close(session: Session) -> None:
    try:
        session.close()
    except Exception:  # a dead worker may not close cleanly; the pool reaps it
        log.debug("closing a session failed", exc_info=True)
