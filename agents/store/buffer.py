"""An episode recorded in memory, to be committed by the store's one writer elsewhere.

On a cluster (training/eval/cluster.py) an episode runs on a node that does not hold the
store: the loop records into a `BufferedEpisode` there (the same calls a `Recorder` takes:
`add_step`, `finish`, `abort`), the finished buffer travels back with the episode record
(frames, token ids and all), and the head commits it with `commit(store, buffered)`.

`commit` is idempotent on the episode id, which the head fixed before the episode ran: a
buffer whose episode is already finished in the store is not written again (a retried
request, a record delivered twice), and a half-written one (the head died while committing)
is replaced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.store.errors import RecorderClosed, StoreError


@dataclass
class BufferedEpisode:
    """What `Store.begin_episode` / `Recorder` were given, kept as data (picklable)."""

    episode_id: str
    begin: dict[str, Any] = field(default_factory=dict)  # begin_episode's keyword arguments
    steps: list[dict[str, Any]] = field(default_factory=list)  # add_step's keyword arguments
    outcome: dict[str, Any] | None = None  # finish's keyword arguments (None: aborted)
    abort_reason: str | None = None
    closed: bool = False

    # -- the recorder's interface (agents/loop/episode_loop.py, agents/loop/turns.py record_turn) ---------------
    @property
    def n_steps(self) -> int:
        return len(self.steps)

    @property
    def next_turn(self) -> int:
        turns = [s["turn"] for s in self.steps if s.get("turn") is not None]
        return max(turns) + 1 if turns else 0

    def add_step(self, **step: Any) -> None:
        if self.closed:
            raise RecorderClosed(f"episode {self.episode_id} is already closed")
        if isinstance(step.get("frame"), Path):
            step["frame"] = step["frame"].read_bytes()
        self.steps.append(step)

    def finish(self, **outcome: Any) -> None:
        if self.closed:
            raise RecorderClosed(f"episode {self.episode_id} is already closed")
        artifacts = outcome.get("artifacts")
        if artifacts:  # files of the node's scratch travel as bytes
            outcome["artifacts"] = {
                k: v.read_bytes() if isinstance(v, Path) else bytes(v) for k, v in artifacts.items()
            }
        self.outcome, self.closed = outcome, True

    def abort(self, reason: str = "") -> None:
        if not self.closed:
            self.abort_reason, self.closed = reason, True


class BufferSink:
    """Stands in for a `Store` where the store is not (`run_spec(..., store=BufferSink())`):
    `begin_episode` hands out buffers, kept in `episodes`, instead of recorders."""

    durable = False

    def __init__(self) -> None:
        self.episodes: list[BufferedEpisode] = []

    def begin_episode(self, episode_id: str | None = None, **begin: Any) -> BufferedEpisode:
        from agents.store.store import new_episode_id

        buffered = BufferedEpisode(episode_id or new_episode_id(), begin)
        self.episodes.append(buffered)
        return buffered


def commit(store: Any, buffered: BufferedEpisode, *, tags: tuple[str, ...] = ()) -> str:
    """Write `buffered` into `store` unless its episode is already there, finished; returns
    the episode id. `tags` are added to the episode's (e.g. `retried`)."""
    eid = buffered.episode_id
    with store.index() as db:
        row = db.execute("SELECT status FROM episodes WHERE id = ?", (eid,)).fetchone()
    done = "finished" if buffered.outcome is not None else "interrupted"
    if row is not None and row[0] == done:
        return eid  # already committed: a retried or repeated delivery writes nothing
    if row is not None or store.episode_dir(eid).exists():
        store.reap()  # a head that died mid-commit left it 'running': sweep, then replace
        if row is not None:
            store.delete([eid])
        else:
            import shutil

            shutil.rmtree(store.episode_dir(eid), ignore_errors=True)
    begin = {**buffered.begin, "episode_id": eid}
    old = list(begin.get("tags", ()))
    begin["tags"] = [*old, *(t for t in tags if t not in old)]
    recorder = store.begin_episode(**begin)
    try:
        for step in buffered.steps:
            recorder.add_step(**step)
    except BaseException:
        recorder.abort("commit failed")
        raise
    if buffered.outcome is not None:
        recorder.finish(**buffered.outcome)
    elif buffered.closed:
        recorder.abort(buffered.abort_reason or "")
    else:
        recorder.abort("the episode never closed")
        raise StoreError(f"episode {eid} was committed before it closed")
    return eid
