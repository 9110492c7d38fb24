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

from agents import LoopConfig, PolicyError, PolicyReply
from agents.policies.simple import PlanPolicy, calls_from_plan


def group_calls(steps: list[list[Any]], per_turn: int) -> list[list[Any]]:
    """One-call steps as replies of up to `per_turn` calls. A reply also ends after a call
    that leaves the scene as it was (`get_scene`, `measure`, `render`, `export`, ...): what it
    reads comes back before the calls that follow it are written."""
    from tools import TOOLS

    replies: list[list[Any]] = []
    current: list[Any] = []
    for step in steps:
        current += step
        reads = any(c.name in TOOLS and not TOOLS[c.name].mutating for c in step)
        if len(current) >= per_turn or reads:
            replies.append(current)
            current = []
    return replies + ([current] if current else [])


def step_text(k: int, n: int) -> str:
    """What a counting oracle's reply says before its calls: which of its plan's replies it is."""
    return f"Step {k} of {n}."


class OraclePolicy:
    """Plays `task.oracle`, `calls_per_turn` calls a step (0: as many as one reply may hold,
    the loop's `max_calls_per_step`; `group_calls`), then says it is done.

    With `count_steps`, each reply that calls says first which of the plan's replies it is
    (`step_text`: "Step 2 of 3."); the closing reply stays "Done.". The count is the model's
    own running note in the conversation: a model trained on these rows commits to a number of
    steps in its first reply and closes when its last reply said "Step n of n"."""

    def __init__(self, task_id: str | None = None, calls_per_turn: int = 1,
                 count_steps: bool = False) -> None:  # fmt: skip
        if calls_per_turn < 0:
            raise ValueError(f"calls_per_turn must be 0 (as many as a reply may hold) or more, "
                             f"not {calls_per_turn}")  # fmt: skip
        self.name = "oracle"
        self._fixed = task_id
        self._per_turn = calls_per_turn or LoopConfig().max_calls_per_step
        self._plan = PlanPolicy(name="oracle")
        self.count_steps = count_steps
        self._step = 0

    def reset(self, task_info: dict | None = None) -> None:
        info = task_info or {}
        plan = info.get("plan")  # given directly (benchmark cases are not generated tasks)
        if plan is None:
            task_id = info.get("task_id") or self._fixed
            if not task_id:
                raise PolicyError("the oracle needs a task: run it with --task ID (or oracle:ID)")
            from training.tasks import get_task

            plan = get_task(task_id).oracle
        self._plan.load(group_calls(calls_from_plan(plan, id_prefix="oracle"), self._per_turn))
        self._step = 0

    @property
    def steps(self) -> int:
        """How many replies with calls the loaded plan has."""
        return len(self._plan.steps)

    def act(self, messages: list[dict], tools: list[dict]) -> PolicyReply:
        reply = self._plan.act(messages, tools)
        if self.count_steps and reply.tool_calls:
            self._step += 1
            reply.text = step_text(self._step, self.steps)
        return reply


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

