"""Play a list of calls on a task in a session and score it (used by `tasks try` and tests)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tools import Session
from training.rewards import RewardBreakdown
from training.tasks.base import Task


@dataclass
class Attempt:
    task: Task
    calls: list[dict[str, Any]]
    reward: RewardBreakdown

    def summary(self) -> dict[str, Any]:
        """The `tasks try --json` view."""
        return {
            "task": self.task.id,
            "success": self.reward.success,
            "reward": self.reward.total,
            "components": self.reward.components,
            "steps": len(self.calls),
            "errors": [c for c in self.calls if not c["ok"]],
            "details": self.reward.details,
        }


def run_calls(session: Session, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run `{tool, args}` steps; return the records the checkers read."""
    records = []
    for step in steps:
        result = session.call(step["tool"], step.get("args") or {})
        err = result.error
        records.append(
            {
                "tool": step["tool"],
                "args": step.get("args") or {},
                "ok": bool(result.ok),
                "error_kind": str(getattr(err.kind, "value", err.kind)) if err else None,
                "error": err.message if err else None,
                "seq": result.seq,
            }
        )
    return records


def attempt(task: Task, session: Session, steps: list[dict[str, Any]]) -> Attempt:
    """Reset the session, build the start state, run the steps, check."""
    session.reset()
    task.setup(session)
    calls = run_calls(session, steps)
    return Attempt(task, calls, task.evaluate(session, calls))
