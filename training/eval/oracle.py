"""Task-aware policies: `oracle` (a task's own plan) and `reference` (a benchmark case's
reference CadQuery script), named in the one policy table, `training.eval.policies`.

Both replay a known solution through the ordinary `Policy` interface, so their episodes run
through the same loop, are recorded the same way and become demonstrations. The plan is
looked up from the `task_info` the loop hands to `reset`: `{"task_id": ...}` (or the plan
itself, `{"plan": [...]}`) for tasks, `{"reference": {"code": ..., "name": ...}}` (or a `.py`
path) for benchmark cases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents import PolicyError, PolicyReply
from agents.policies.simple import PlanPolicy, calls_from_plan


class OraclePolicy:
    """Plays `task.oracle`, one call per step, then says it is done."""

    def __init__(self, task_id: str | None = None) -> None:
        self.name = "oracle"
        self._fixed = task_id
        self._plan = PlanPolicy(name="oracle")

    def reset(self, task_info: dict | None = None) -> None:
        info = task_info or {}
        plan = info.get("plan")  # given directly (benchmark cases are not generated tasks)
        if plan is None:
            task_id = info.get("task_id") or self._fixed
            if not task_id:
                raise PolicyError("the oracle needs a task: run it with --task ID (or oracle:ID)")
            from training.tasks import get_task

            plan = get_task(task_id).oracle
        self._plan.load(calls_from_plan(plan, id_prefix="oracle"))

    def act(self, messages: list[dict], tools: list[dict]) -> PolicyReply:
        return self._plan.act(messages, tools)


REFERENCE_PART = "reference"


def reference_plan(code: str, name: str = REFERENCE_PART) -> list[dict[str, Any]]:
    """A benchmark case's reference script as a one-step plan."""
    return [{"tool": "cadquery_script", "args": {"code": code, "name": name}}]


class ReferencePolicy:
    """Runs a benchmark case's reference `.py` through the `cadquery_script` tool."""

    def __init__(self, path: str | None = None) -> None:
        self.name = "reference"
        self._fixed = path
        self._plan = PlanPolicy(name="reference")

    def reset(self, task_info: dict | None = None) -> None:
        ref = (task_info or {}).get("reference") or self._fixed
        if isinstance(ref, str | Path):
            path = Path(ref)
            if not path.is_file():
                raise PolicyError(f"reference script not found: {path}")
            ref = {"code": path.read_text(), "name": REFERENCE_PART}
        if not ref or not ref.get("code"):
            raise PolicyError(
                "the reference policy needs a benchmark case with a reference .py "
                "(eval --benchmark DIR) or a script: --policy reference:FILE.py"
            )
        plan = reference_plan(ref["code"], ref.get("name", REFERENCE_PART))
        self._plan.load(calls_from_plan(plan, id_prefix="reference"))

    def act(self, messages: list[dict], tools: list[dict]) -> PolicyReply:
        return self._plan.act(messages, tools)


def make_oracle(arg: str | None = None, **_: object) -> OraclePolicy:
    return OraclePolicy(arg)


def make_reference(arg: str | None = None, **_: object) -> ReferencePolicy:
    return ReferencePolicy(arg)

