"""Revising an open episode before it closes: its prompt, and steps the person drops.

A person reviews a demonstration before Finish and may drop steps (a call sent twice by
mistake, a failing call and its retries). A dropped step leaves the index, its frame leaves
the folder, and the journal gets a tombstone, so a rebuilt index leaves it out too. Only a
set of steps whose removal leaves every kept step on the scene it was recorded on may go:
the replay of what is kept then meets the same scene hashes (a mistaken call can be dropped
together with the undo that took it back, never alone).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agents.store import journal
from agents.store.errors import StoreError
from agents.store.layout import FRAMES


class StepsNeeded(StoreError):
    """Dropping these steps would change the scene that a kept step was recorded on."""


def check_drop(initial_hash: str | None, steps: list[Any], drop: set[int]) -> None:
    """Raise StepsNeeded unless every kept step starts from the scene it started from in the
    recording, and the kept steps end on the recorded final scene. A step without a hash
    (a failed call) left the scene as it was."""
    recorded = kept = initial_hash
    for s in steps:
        after = s.scene_hash or recorded
        if s.index in drop:
            recorded = after
            continue
        if kept != recorded:
            raise StepsNeeded(_needed(steps, drop, s))
        recorded = kept = after
    if kept != recorded:
        raise StepsNeeded(_needed(steps, drop, None))


def _needed(steps: list[Any], drop: set[int], blocked: Any) -> str:
    changed = [s for s in steps if s.index in drop and s.error_kind is None]
    what = ", ".join(f"step {s.index + 1} ({s.tool})" for s in changed[:3]) or "the dropped steps"
    where = (
        f"step {blocked.index + 1} ({blocked.tool}) was made on"
        if blocked
        else "the episode ends on"
    )
    return f"{what} changed the scene that {where}; drop the step that undid it too, or keep it"


def drop_steps(store: Any, episode_id: str, indices: Iterable[int]) -> list[int]:
    """Drop steps of a running episode; returns the indices dropped. Raises StoreError when
    the episode is closed, an index is unknown, or the kept steps would not replay."""
    drop = {int(i) for i in indices}
    if not drop:
        return []
    episode = store.episode(episode_id)
    if episode.status != "running":
        raise StoreError(f"episode {episode.id} is closed; steps are dropped before Finish")
    steps = store.steps(episode.id)
    unknown = drop - {s.index for s in steps}
    if unknown:
        raise StoreError(f"episode {episode.id} has no step {min(unknown) + 1}")
    check_drop(episode.initial_scene_hash, steps, drop)
    gone = [s for s in steps if s.index in drop]
    with store.transaction() as db:
        db.executemany(
            "DELETE FROM steps WHERE episode_id = ? AND idx = ?",
            [(episode.id, s.index) for s in gone],
        )
        db.execute(
            """UPDATE episodes SET n_steps = n_steps - ?, n_errors = n_errors - ?,
            tool_ms = tool_ms - ?, latency_ms = latency_ms - ?, tokens_in = tokens_in - ?,
            tokens_out = tokens_out - ? WHERE id = ?""",
            (
                len(gone),
                sum(s.error_kind is not None for s in gone),
                sum(s.duration_ms or 0.0 for s in gone),
                sum(s.latency_ms or 0.0 for s in gone),
                sum(s.tokens_in or 0 for s in gone),
                sum(s.tokens_out or 0 for s in gone),
                episode.id,
            ),
        )
        store.journal_episode(db, episode.id)
    folder = store.episode_dir(episode.id)
    for s in gone:
        journal.drop_step(folder, s.index)
        if s.frame:  # a recorded path inside the episode folder, never followed out of it
            frame = folder / s.frame
            if frame.parent.resolve() == (folder / FRAMES).resolve() and not frame.is_symlink():
                frame.unlink(missing_ok=True)
    return sorted(drop)


def set_prompt(store: Any, episode_id: str, prompt: str) -> None:
    """The user prompt of a running episode (a person's episode that the agent continued
    with a typed goal: the goal is its prompt)."""
    episode = store.episode(episode_id)
    if episode.status != "running":
        raise StoreError(f"episode {episode.id} is closed; its prompt is kept as recorded")
    with store.transaction() as db:
        db.execute("UPDATE episodes SET prompt = ? WHERE id = ?", (prompt, episode.id))
        store.journal_episode(db, episode.id)


__all__ = ["StepsNeeded", "check_drop", "drop_steps", "set_prompt"]
