"""A queue of episodes over a pool of tool workers: for `eval`, batch runs and RL rollouts.

`workers` threads take jobs from a shared priority queue (higher priority first, then
submission order). One worker, one episode: every job (every attempt of it) opens its own
ToolSession, a sandboxed worker process no other job has touched, and closes it when the
job ends, which kills the worker with its scratch (tools/runtime/supervisor.py WorkerPool). Whatever
an episode's code did to its interpreter (a monkeypatched kernel, a thread, a file) cannot
move the next episode's reward. The scheduler's own pool keeps `workers` spares booting in
the background, so a job waits for a start only when jobs end faster than workers boot.

A job that fails for infrastructure reasons (`InfrastructureError`: its worker died while the
start state was being built, or the pool could not give a session) is put back and retried on
a fresh session, up to `max_retries`; a job the policy failed is a result like any other and
is never retried. Outcomes come back in submission order and each job gets a seed fixed at
submission, so the results do not depend on the number of workers.
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

from agents.loop.episode_loop import InfrastructureError
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


class Scheduler:
    """Runs submitted jobs, `workers` at a time, each on a fresh session; `run()` blocks
    until all are done."""

    def __init__(
        self,
        workers: int = 1,
        session_factory: Callable[[], Any] | None = None,
        *,
        max_retries: int = 2,
        seed: int = 0,
        retry_backoff_s: float = 0.2,
        deadline_s: float | None = None,  # per tool call, for sessions of the scheduler's own pool
        spares: int | None = None,  # workers its own pool keeps booted (default: workers + 1)
        preload_cad: bool | None = None,  # whether they import CadQuery first (WorkerPool's)
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers
        self._own_pool = None
        if session_factory is None:
            from tools import ToolSession, WorkerPool

            # The next episodes' workers boot while these run: a spare per slot and one more,
            # for episodes that end together would otherwise wait for a start (bench_trust.py).
            size = workers + 1 if spares is None else spares
            pool = self._own_pool = WorkerPool(size=size, preload_cad=preload_cad)
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
        # The running run()'s cancel event. A job may hand it to its episode's loop (which
        # checks it between turns and calls, and while the policy thinks), so a long episode
        # stops at once on Ctrl-C instead of running to its end (GRPO's rollouts).
        self.stopping = threading.Event()

    def submit(self, key: str, fn: JobFn, *, priority: int = 0, seed: int | None = None) -> int:
        """Queue `fn(session, seed)`; returns the job's index in the outcome list."""
        index = next(self._count)
        job_seed = seed if seed is not None else (self.seed * 1_000_003 + index) % 2**31
        with self._lock:
            heapq.heappush(self._heap, _Queued((-priority, index), index, key, fn, job_seed))
        return index

    def run(
        self,
        progress: Callable[[JobOutcome, int, int], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> list[JobOutcome]:
        """Run every queued job; outcomes in submission order. `progress(outcome, done, total)`
        is called from the worker threads as jobs finish."""
        cancel = self.stopping = cancel or threading.Event()
        total = len(self._heap)
        done = [0]
        threads = [
            threading.Thread(
                target=self._work,
                args=(w, progress, cancel, done, total),
                name=f"episode-worker-{w}",
            )
            for w in range(min(self.workers, max(total, 1)))
        ]
        for t in threads:
            t.start()
        try:
            # Timed joins: a signal that lands on another thread (the kernel may hand a
            # process's SIGTERM to any of them) only flags the main thread, which runs its
            # handler when it next wakes; a plain join would wake when the last episode ends.
            for t in threads:
                while t.is_alive():
                    t.join(0.2)
        except BaseException:  # Ctrl-C (or SIGTERM turned into an exception) in this thread:
            cancel.set()  # the workers finish the episode they are in and take no other
            for t in threads:
                t.join()
            with self._lock:
                self._heap.clear()  # what did not start is dropped, not left for a next run
            self._outcomes = {}
            raise
        outcomes = [self._outcomes[i] for i in sorted(self._outcomes)]
        self._outcomes = {}
        return outcomes

    def wait_warm(self, timeout_s: float = 120.0) -> bool:
        """Wait until the scheduler's own pool holds all its spares (a run's first jobs then
        start at once, as later ones do); False if they were not up in time."""
        end = time.monotonic() + timeout_s
        while self._own_pool is not None and self._own_pool.spares < self._own_pool.size:
            if time.monotonic() > end:
                return False
            time.sleep(0.05)
        return True

    def close(self) -> None:
        if self._own_pool is not None:
            self._own_pool.close()
            self._own_pool = None

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- worker threads --------------------------------------------------------------------

    def _next(self) -> _Queued | None:
        with self._lock:
            return heapq.heappop(self._heap) if self._heap else None

    def _work(
        self, worker: int, progress, cancel: threading.Event, done: list[int], total: int
    ) -> None:
        while not cancel.is_set():
            job = self._next()
            if job is None:
                return
            job.attempts += 1
            try:
                session = self.session_factory()
            except Exception as exc:  # the pool failed: retry the job later
                self._retry_or_fail(
                    job, worker, f"no tool session: {exc}", 0.0, progress, done, total
                )
                continue
            start = time.perf_counter()
            try:
                result, failure = job.fn(session, job.seed), None
            except Exception as exc:
                result, failure = None, exc
            wall = (time.perf_counter() - start) * 1e3
            _close(session)  # one worker, one episode: it dies with its scratch
            if isinstance(failure, InfrastructureError):
                self._retry_or_fail(job, worker, str(failure), wall, progress, done, total)
                continue
            if failure is not None:  # a bug or a policy that raised: not retried
                log.error("job %s failed", job.key, exc_info=failure)
                error = f"{type(failure).__name__}: {failure}"
            else:
                error = None
            self._settle(
                JobOutcome(job.key, job.seed, result=result, error=error, attempts=job.attempts,
                           worker=worker, wall_ms=wall),
                job.index, progress, done, total,
            )  # fmt: skip

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
