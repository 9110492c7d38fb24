"""Policies that need no model: `none` (does nothing) and scripted plans.

`PlanPolicy` plays a fixed list of steps, one per `act`, and says it is done when the list
runs out. It is the engine of `script:FILE.jsonl` here and of the task oracle in training/.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from agents.policies.protocol import PolicyReply, ToolCall


class NonePolicy:
    """Answers every observation with 'done' and no calls: the floor of any evaluation."""

    name = "none"

    def reset(self, task_info: dict | None = None) -> None:
        return None

    def act(self, messages: list[dict], tools: list[dict]) -> PolicyReply:
        return PolicyReply(text="I will not do anything.", tool_calls=[])


class PlanPolicy:
    """Replays planned steps; each step is a list of calls (usually one)."""

    def __init__(self, steps: list[list[ToolCall]] | None = None, name: str = "plan") -> None:
        self.name = name
        self.steps: list[list[ToolCall]] = list(steps or [])
        self._next = 0

    def reset(self, task_info: dict | None = None) -> None:
        self._next = 0

    def load(self, steps: list[list[ToolCall]]) -> None:
        self.steps = list(steps)
        self._next = 0

    def act(self, messages: list[dict], tools: list[dict]) -> PolicyReply:
        start = time.perf_counter()
        if self._next >= len(self.steps):
            return PolicyReply(text="Done.", tool_calls=[])
        calls = self.steps[self._next]
        self._next += 1
        return PolicyReply(
            text=None, tool_calls=list(calls), latency_ms=(time.perf_counter() - start) * 1e3
        )


def calls_from_plan(plan: list[dict], id_prefix: str = "plan") -> list[list[ToolCall]]:
    """A `tools run`-format plan (`[{"tool", "args"}]`) as one call per step."""
    return [
        [ToolCall(id=f"{id_prefix}_{i}", name=step["tool"], arguments=dict(step.get("args", {})))]
        for i, step in enumerate(plan)
    ]


class ScriptError(ValueError):
    pass


def load_script(path: str | Path) -> list[list[ToolCall]]:
    """Read a script: one JSON object per line, one step per line.

    A line is `{"tool": NAME, "args": {...}}` (one call) or `{"tool_calls": [{"name", "arguments"}
    ...]}` (several calls in one step). Blank lines and lines starting with `#` are skipped.
    """
    path = Path(path)
    if not path.is_file():
        raise ScriptError(f"script file not found: {path}")
    steps: list[list[ToolCall]] = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ScriptError(f"{path}:{lineno}: not JSON ({exc.msg})") from exc
        step_id = f"script_{len(steps)}"
        if isinstance(obj, dict) and "tool" in obj:
            steps.append([ToolCall(id=step_id, name=obj["tool"], arguments=obj.get("args", {}))])
        elif isinstance(obj, dict) and isinstance(obj.get("tool_calls"), list):
            steps.append(
                [
                    ToolCall(id=f"{step_id}_{j}", name=c["name"], arguments=c.get("arguments", {}))
                    for j, c in enumerate(obj["tool_calls"])
                ]
            )
        else:
            raise ScriptError(
                f'{path}:{lineno}: expected {{"tool": ..., "args": ...}} or {{"tool_calls": [...]}}'
            )
    return steps


def make_none(arg: str | None = None, **_: object) -> NonePolicy:
    return NonePolicy()


def make_script(arg: str | None = None, **_: object) -> PlanPolicy:
    if not arg:
        raise ScriptError("the script policy needs a file: --policy script:FILE.jsonl")
    return PlanPolicy(load_script(arg), name=f"script:{arg}")
