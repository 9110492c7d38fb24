"""Replay: re-execute an episode's recorded tool calls in a fresh tool session and prove the
scene comes out the same, hash for hash, after every step.

The start state is rebuilt from the episode's `setup` calls (a task's setup, recorded by the
caller of `begin_episode`), then checked against `initial_scene_hash` when one was recorded.
A step whose recorded hash is unknown is executed but not checked (and counted as such).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents.store.store import Store


@dataclass(frozen=True)
class Divergence:
    step: int | None  # None: before the first step (setup or initial state)
    where: str  # "setup", "initial" or "step"
    tool: str | None
    expected_hash: str | None
    actual_hash: str | None
    expected_ok: bool | None
    actual_ok: bool | None
    message: str


@dataclass(frozen=True)
class ReplayReport:
    episode_id: str
    steps_total: int
    steps_replayed: int
    steps_checked: int
    divergence: Divergence | None

    @property
    def matched(self) -> bool:
        return self.divergence is None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "matched": self.matched}

    def summary(self) -> str:
        if self.divergence is None:
            return (
                f"episode {self.episode_id}: replay matches ({self.steps_checked} of "
                f"{self.steps_total} steps hash-checked)"
            )
        return f"episode {self.episode_id}: {self.divergence.message}"


def _short(h: str | None) -> str:
    return "none" if h is None else h[:16]


def replay_episode(
    store: Store,
    episode_id: str,
    session_factory: Callable[[], Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayReport:
    """Replay one episode; `session_factory()` returns a context-managed ToolSession."""
    episode = store.episode(episode_id)
    steps = store.steps(episode.id)
    if session_factory is None:
        from tools import ToolSession

        session_factory = ToolSession
    checked = replayed = 0

    def report(div: Divergence | None) -> ReplayReport:
        return ReplayReport(episode.id, len(steps), replayed, checked, div)

    with session_factory() as session:
        session.reset()
        for k, call in enumerate(episode.setup):
            r = session.call(call["tool"], call.get("args", {}))
            if not r.ok:
                return report(
                    Divergence(
                        None,
                        "setup",
                        call["tool"],
                        None,
                        r.scene_hash,
                        True,
                        False,
                        f"setup call {k} ({call['tool']}) failed on replay: {r.to_text()}",
                    )
                )
        if episode.initial_scene_hash is not None:
            actual = session.scene_hash()
            if actual != episode.initial_scene_hash:
                return report(
                    Divergence(
                        None,
                        "initial",
                        None,
                        episode.initial_scene_hash,
                        actual,
                        None,
                        None,
                        f"start state differs: recorded scene hash {_short(episode.initial_scene_hash)}"
                        f", replay {_short(actual)}",
                    )
                )
        for step in steps:
            r = session.call(step.tool, step.args)
            replayed += 1
            if progress is not None:
                progress(replayed, len(steps))
            if r.ok != step.ok:
                return report(
                    Divergence(
                        step.index,
                        "step",
                        step.tool,
                        step.scene_hash,
                        r.scene_hash,
                        step.ok,
                        r.ok,
                        f"step {step.index} ({step.tool}) {'succeeded' if step.ok else 'failed'} when "
                        f"recorded but {'succeeded' if r.ok else 'failed'} on replay: {r.to_text(300)}",
                    )
                )
            if step.scene_hash is None:
                continue
            checked += 1
            if r.scene_hash != step.scene_hash:
                return report(
                    Divergence(
                        step.index,
                        "step",
                        step.tool,
                        step.scene_hash,
                        r.scene_hash,
                        step.ok,
                        r.ok,
                        f"step {step.index} ({step.tool}) diverges: recorded scene hash "
                        f"{_short(step.scene_hash)}, replay {_short(r.scene_hash)}",
                    )
                )
    return report(None)
