"""The seam between what runs episodes and where they run (docs/DESIGN_SCALE.md).

An episode is named by data, never by a closure: an `EpisodeRequest` (task id, seed, policy
spec, loop config, store fields, an episode id the head fixed) can be rebuilt on any machine,
because the task registry is pure Python. An `EpisodeBackend` takes a batch of requests and
gives back one `EpisodeOutcome` per request, in submission order, so results never depend on
the backend:

- `local` (`LocalBackend`): today's `agents.Scheduler` over a pool of jailed workers on this
  machine; episodes record into the store as they run. No Ray import.
- `ray` (`training/eval/cluster.py`, the `cluster` extra): one actor per node owns that node's
  worker pool; finished records come back and the head commits them, idempotently by id.

`run_request` is what both run for one request on one fresh tool session: `task_spec` +
`run_spec`, the one function that runs an episode everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from training.eval.requests import (
    BackendStatus,
    EpisodeOutcome,
    EpisodeRequest,
    forget_partial,
    run_request,
)


class LocalBackend:
    """`agents.Scheduler` over this machine's worker pool, behind the backend interface.

    `policy_for(request, seed)`: builds the policy instead of `request.policy` (an in-process
    model, a wrapper that counts calls); `spec_for(request)`: the EpisodeSpec instead of
    `task_spec(request.task_id)` (a benchmark case). Both stay on this machine.
    `stop_episodes`: Ctrl-C stops the episodes under way too, at their next check (the
    scheduler's cancel goes into each loop), not only the ones not started: for episodes that
    run for minutes (GRPO's in-process rollouts); their records are then of no use."""

    name = "local"

    def __init__(
        self,
        workers: int = 1,
        session_factory: Callable[[], Any] | None = None,
        *,
        store: Any = None,
        scored: bool = True,
        seed: int = 0,
        policy_for: Callable[[EpisodeRequest, int], Any] | None = None,
        spec_for: Callable[[EpisodeRequest], Any] | None = None,
        scheduler: Any = None,
        stop_episodes: bool = False,
        **options: Any,
    ) -> None:
        from training.eval.spec import episode_scheduler

        self.workers = workers
        self.store = store
        self.policy_for = policy_for
        self.spec_for = spec_for
        self.stop_episodes = stop_episodes
        self._own = scheduler is None
        self.scheduler = scheduler or episode_scheduler(
            workers, session_factory, scored=scored, seed=seed, **options
        )
        self._queued = self._running = self._done = self._retried = 0

    def submit(self, requests, progress=None) -> Iterator[EpisodeOutcome]:
        store = self.store

        def job(request: EpisodeRequest):
            def run(session: Any, seed: int) -> dict:
                forget_partial(store, request.episode_id)  # a retry after a dead worker
                policy = self.policy_for(request, seed) if self.policy_for else None
                spec = self.spec_for(request) if self.spec_for else None
                cancel = self.scheduler.stopping if self.stop_episodes else None
                return run_request(request, session, policy=policy, store=store, spec=spec,
                                   cancel=cancel)  # fmt: skip

            return run

        by_index = {}
        for request in requests:
            by_index[self.scheduler.submit(request.key, job(request), seed=request.seed)] = request
        first = min(by_index, default=0)
        self._queued += len(requests)

        def convert(o: Any, index: int) -> EpisodeOutcome:
            request = by_index[index]
            record = result = None
            if o.ok:
                record = {k: v for k, v in o.result.items() if k != "_result"}
                result = o.result.get("_result")
            return EpisodeOutcome(request, record, result, o.error, o.infrastructure,
                                  o.attempts, o.attempts > 1, "local", o.wall_ms)  # fmt: skip

        def on_done(o: Any, done: int, total: int) -> None:
            self._done += 1
            if progress is not None:
                index = next(i for i, r in by_index.items() if r.key == o.key and r.seed == o.seed)
                progress(convert(o, index), done, total)

        outcomes = self.scheduler.run(progress=on_done)
        self._queued -= len(requests)
        converted = [convert(o, first + i) for i, o in enumerate(outcomes)]
        self._retried += sum(1 for o in converted if o.retried)
        return iter(converted)

    @property
    def retries(self) -> int:
        return self.scheduler.retries

    def status(self) -> BackendStatus:
        node = {"node": "local", "address": "127.0.0.1", "slots": self.workers, "alive": True,
                "running": 0, "done": self._done}  # fmt: skip
        return BackendStatus("local", [node], self.workers, self._queued, 0, self._done,
                             self._retried)  # fmt: skip

    def close(self) -> None:
        if self._own:
            self.scheduler.close()

    def __enter__(self) -> LocalBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_backend(kind: str = "local", *, cluster: str | None = None, **options: Any) -> Any:
    """`local`, or `ray` (also when `cluster` is given: `auto` or a head's ADDRESS). Ray is
    imported only here, only for `ray`."""
    if cluster is not None or kind == "ray":
        try:
            from training.eval.cluster import RayBackend
        except ImportError as exc:
            raise ValueError(
                f"the ray backend needs Ray ({exc}); install the extra: pip install "
                "'modelwright[cluster]'"
            ) from None
        ray_options = {k: v for k, v in options.items()
                       if k in ("store", "slots", "policy_for", "max_retries")}  # fmt: skip
        return RayBackend(address=cluster or "auto", **ray_options)
    if kind != "local":
        raise ValueError(f"unknown rollouts backend {kind!r}; choose local or ray")
    return LocalBackend(**options)
