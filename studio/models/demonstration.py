"""Manual modelling as a recorded `human` episode, replayable by the store.

The journal is every successful mutating call since the scene was last emptied (a task's
setup, the agent's calls, the person's calls, undos). When the person starts working, the
journal so far becomes the episode's `setup`, so `data replay` rebuilds the same start state;
then each manual call (ok or failed, undo and redo included) is one recorded step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from studio.models.evented import Emitter


@dataclass
class SceneJournal:
    calls: list[dict[str, Any]] = field(default_factory=list)  # [{"tool", "args"}]

    def reset(self, setup: list[dict[str, Any]] | None = None) -> None:
        self.calls = [dict(c) for c in (setup or [])]

    def add(self, tool: str, args: dict[str, Any]) -> None:
        self.calls.append({"tool": tool, "args": dict(args)})


class Demonstration:
    """One `human` episode in the making; begins lazily at the first manual call."""

    def __init__(self, store_factory) -> None:
        self._store_factory = store_factory  # () -> agents.store.Store (opened on first use)
        self.recorder: Any = None
        self.episode_id: str | None = None
        self.task_id: str | None = None
        self.prompt: str | None = None
        self.calls: list[dict[str, Any]] = []  # for the task's checker
        self.changed = Emitter()  # (n_steps)

    @property
    def active(self) -> bool:
        return self.recorder is not None

    def set_task(self, task_id: str | None, prompt: str | None) -> None:
        self.task_id, self.prompt = task_id, prompt

    def record(self, result: Any, journal: SceneJournal, initial_hash: str | None,
               frame: bytes | None = None) -> None:
        """Add one manual call's result; `journal`/`initial_hash` describe the state before it."""
        if self.recorder is None:
            from tools import catalogue

            store = self._store_factory()
            self.recorder = store.begin_episode(
                task_id=self.task_id, source="human", policy="human", tools=catalogue(),
                prompt=self.prompt, setup=list(journal.calls), initial_scene_hash=initial_hash)
            self.episode_id = self.recorder.episode_id
            self.calls = []
        error = result.error
        self.recorder.add_step(
            tool=result.tool, args=result.args, result=result.output if result.ok else None,
            error_kind=error.kind.value if error else None, error_message=error.message if error else None,
            duration_ms=result.duration_ms, frame=frame, scene_hash=result.scene_hash)
        self.calls.append({"tool": result.tool, "args": result.args, "ok": result.ok,
                           "error_kind": error.kind.value if error else None})
        self.changed.emit(len(self.calls))

    def finish(self, verdict: Any = None) -> str | None:
        """Close the episode (with the task's verdict when there is one); returns its id."""
        if self.recorder is None:
            return None
        kw = {}
        if verdict is not None:
            kw = {"reward": float(verdict.total), "components": dict(verdict.components),
                  "success": bool(verdict.success)}
        self.recorder.finish(**kw)
        episode_id, self.recorder = self.episode_id, None
        self.changed.emit(0)
        return episode_id

    def abandon(self) -> None:
        if self.recorder is not None:
            self.recorder.abort("the studio closed before Finish")
            self.recorder = None
