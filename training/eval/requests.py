"""An episode named by data: `EpisodeRequest` (what both backends run), `EpisodeOutcome`
(what they give back), the `EpisodeBackend` protocol and `run_request`, the one call that
runs a request on a fresh tool session (docs/DESIGN_SCALE.md; backends in
training/eval/backend.py and training/eval/cluster.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from agents import LoopConfig
from agents.store.store import new_episode_id


class ClusterUnavailable(Exception):
    """No usable Ray cluster at the address a run was given (none there, or no node with tool
    slots): the user's to fix. Every command ends on it in one line, exit 3 (it is one of the
    CLI's user errors); it is no RuntimeError, so no handler of Ray's own errors rewords it."""


@dataclass(frozen=True)
class PolicySpec:
    """A policy as data: a `make_policy` spec (`oracle`, `openai`, `hf:...`) and its options.
    Built where the episode runs (an endpoint's client on a node; the in-process model only on
    the trainer's node, through a backend's `policy_for`)."""

    name: str
    options: dict = field(default_factory=dict)

    def build(self) -> Any:
        from training.eval.policies import make_policy

        return make_policy(self.name, **self.options)


@dataclass
class EpisodeRequest:
    """One episode to run, as plain data (picklable; `to_json` for logs)."""

    task_id: str
    seed: int
    policy: PolicySpec
    loop: LoopConfig | None = None
    meta: dict = field(default_factory=dict)  # store fields: model, adapter, tags
    episode_id: str = field(default_factory=new_episode_id)  # fixed by the head
    source: str = "agent"
    key: str = ""  # the caller's name for it (default: the task id)

    def __post_init__(self) -> None:
        self.key = self.key or self.task_id

    def to_json(self) -> dict:
        from dataclasses import asdict

        return asdict(self)


@dataclass
class EpisodeOutcome:
    """A request's result: `record` is run_spec's summary (no `_result`), `result` the
    EpisodeResult (steps, frames, token ids), or `error` when the episode could not run."""

    request: EpisodeRequest
    record: dict | None = None
    result: Any = None
    error: str | None = None
    infrastructure: bool = False  # the error was the runtime's, not the policy's
    attempts: int = 1
    retried: bool = False  # sent again from its start state: its node died (or its worker)
    node: str = "local"
    wall_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class BackendStatus:
    backend: str
    nodes: list[dict]  # {"node", "address", "slots", "alive", "running", "done"}
    slots: int  # worker slots over live nodes
    queued: int  # submitted, not started
    running: int
    done: int
    retried: int = 0


class EpisodeBackend(Protocol):
    name: str

    def submit(
        self,
        requests: list[EpisodeRequest],
        progress: Callable[[EpisodeOutcome, int, int], None] | None = None,
    ) -> Iterator[EpisodeOutcome]:
        """Run the requests; outcomes in submission order (`progress` as each finishes)."""
        ...

    def status(self) -> BackendStatus: ...

    def close(self) -> None: ...


def job_seed(seed: int, index: int) -> int:
    """The seed of request `index` of a batch (as `agents.Scheduler` gives its jobs)."""
    return (seed * 1_000_003 + index) % 2**31


def run_request(
    request: EpisodeRequest,
    session: Any,
    *,
    policy: Any = None,
    store: Any = None,
    spec: Any = None,
    cancel: Any = None,
) -> dict:
    """Run `request` on `session` (fresh, from its pool) and return run_spec's record, with
    `_result`. `store`: a Store (recorded as it runs) or an `agents.store.buffer.BufferSink`
    (recorded in memory, committed by the head). `spec`/`policy` override the ones the
    request names (a benchmark case; the trainer's in-process model). `cancel`: an event that
    stops the episode at the loop's next check."""
    from training.eval.spec import run_spec, task_spec

    spec = spec if spec is not None else task_spec(request.task_id)
    policy = policy if policy is not None else request.policy.build()
    meta = {**request.meta, "episode_id": request.episode_id} if store is not None else request.meta
    return run_spec(spec, policy, session, config=request.loop, store=store,
                    source=request.source, meta=meta or None, cancel=cancel)  # fmt: skip


def forget_partial(store: Any, episode_id: str) -> None:
    """Remove what an earlier attempt of an episode left in `store` (its worker died after the
    recording began), so the retry can record under the same id; a finished one stays."""
    if store is None or not hasattr(store, "episode_dir"):
        return
    with store.index() as db:
        row = db.execute("SELECT status FROM episodes WHERE id = ?", (episode_id,)).fetchone()
    if row is not None and row[0] != "finished":
        store.reap()
        store.delete([episode_id])
