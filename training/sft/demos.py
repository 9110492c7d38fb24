"""Demonstrations captured from the episode loop, as SFT rows in the store's export format.

`CapturingPolicy` wraps any policy (the oracle, a teacher model) and keeps exactly what the
loop showed it at every turn plus what it answered. Each turn becomes a row with the
columns of the store's TRL export (`messages` with `{type, text}` parts, `images` as PNG bytes in
placeholder order, `tools` as a JSON string, plus `success`, `reward`, `source`, `model`), so
SFT reads captured demonstrations and exported episodes through one path. Capturing the
policy's own view keeps training prompts byte-identical to what the agent sees when acting.

The loop fits every prompt to the budget of the model the rows will train (`budget`, its
context less a turn's new tokens, counted by its tokenizer) by the same rule it applies when
that model acts, so a long episode's rows hold the compacted prompts the model will see.

One row per turn, not one per episode: the loop compacts its history (an older scene listing
becomes "[scene listing omitted: a newer one follows]"), so the last turn's view of turn 0 is
not what the agent sees at turn 0. Trained on last-turn views only, a model never sees the
first-turn prompt it must answer when acting (measured: 0-15 % valid calls on held-out seeds).
"""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

from agents import PolicyReply
from agents.policies.hf_policy import shown_tools
from agents.policies.protocol import PromptBudget
from agents.store.conversation import IMAGE_PART, message, text_part


class CapturingPolicy:
    """Delegates to `inner`; remembers each turn's prompt, tools and reply of the episode.

    When the episode ends (a reply without tool calls) its turns go to `sink` as
    `{"task_id", "turn", "conversation": (messages, tools, reply)}`, one entry per turn."""

    def __init__(
        self, inner: Any, sink: list[dict], lock: threading.Lock, shown: list[str] | None,
        budget: PromptBudget | None = None,
    ) -> None:
        # `shown` None: each task's toolbox (its `task_info["tools"]`), as the hf policy shows
        # one when no list is configured, so the rows hold the tools the model will be shown.
        self.inner, self.sink, self.lock, self.shown = inner, sink, lock, shown
        self._task_tools: list[str] | None = None
        # The prompt budget of the model the rows will train (`counting_budget`): the loop
        # fits each turn's prompt to it as it will when that model acts.
        self.budget = budget
        self.name = getattr(inner, "name", "captured")
        self.task_id: str | None = None
        self._turns: list[tuple[list[dict], list[dict], PolicyReply]] = []

    def reset(self, task_info: dict | None = None) -> None:
        self.task_id = (task_info or {}).get("task_id")
        self._task_tools = (task_info or {}).get("tools")
        self._turns = []
        self.inner.reset(task_info)

    def shown_names(self) -> list[str] | None:
        """The tool names the rows show: the configured list, else the task's toolbox."""
        return self.shown if self.shown is not None else self._task_tools

    def prompt_budget(self) -> PromptBudget | None:
        if self.budget is not None:
            if self.shown is None and self._task_tools is not None:
                # Counted with the task's toolbox, as the hf policy counts its own prompts.
                base, names = self.budget, self._task_tools
                return PromptBudget(base.limit, lambda m, t: base.count(m, shown_tools(t or [], names)))
            return self.budget
        ask = getattr(self.inner, "prompt_budget", None)
        return ask() if callable(ask) else None

    def act(self, messages: list[dict], tools: list[dict]) -> PolicyReply:
        reply = self.inner.act(messages, tools)
        self._turns.append((list(messages), shown_tools(tools, self.shown_names()), reply))
        if reply.done:
            with self.lock:
                self.sink.extend(
                    {"task_id": self.task_id, "turn": k, "conversation": turn}
                    for k, turn in enumerate(self._turns)
                )
        return reply


# Names a recovery demonstration's first call asks for instead of the task's own (one per task,
# by a hash of its id); an episode whose decoy happens to exist makes no error and is dropped.
DECOYS = ("Object", "Part", "Item", "Thing", "Piece", "Shape")


class FumblingOracle:
    """The oracle, except that its first call names a decoy instead of the object the task
    names. The loop answers with the tool's error, which lists the scene's objects, and the
    oracle then plays its whole plan: a recovery demonstration. A first call without a
    `name` argument is played as is (the episode then has no error and is not kept).
    With `count_steps`, the wrong call is "Step 1 of n" too: the retry repeats the step."""

    def __init__(self, calls_per_turn: int = 1, count_steps: bool = False) -> None:
        from training.eval.oracle import OraclePolicy

        self.name = "oracle"
        self.inner = OraclePolicy(calls_per_turn=calls_per_turn, count_steps=count_steps)
        self._fumble: Any = None

    def reset(self, task_info: dict | None = None) -> None:
        import hashlib

        from agents import ToolCall
        from training.tasks import get_task

        self.inner.reset(task_info)
        self._fumble = None
        task_id = (task_info or {}).get("task_id")
        plan = get_task(task_id).oracle if task_id else []
        if plan and isinstance(plan[0].get("args"), dict) and "name" in plan[0]["args"]:
            pick = int(hashlib.sha256(task_id.encode()).hexdigest(), 16) % len(DECOYS)
            args = {**plan[0]["args"], "name": DECOYS[pick]}
            from training.eval.oracle import step_text

            text = step_text(1, self.inner.steps) if self.inner.count_steps else None
            self._fumble = PolicyReply(text=text, tool_calls=[
                ToolCall("fumble-0", plan[0]["tool"], args)])  # fmt: skip

    def act(self, messages: list[dict], tools: list[dict]) -> PolicyReply:
        fumble, self._fumble = self._fumble, None
        return fumble if fumble is not None else self.inner.act(messages, tools)


def conversation_row(messages: list[dict], tools: list[dict], final: PolicyReply) -> dict:
    """Loop messages + the final reply -> {messages, images, tools} in the export's schema."""
    out: list[dict] = []
    images: list[bytes] = []
    for msg in [*messages, _assistant(final)]:
        content = msg.get("content")
        parts: list[dict] | None
        if content is None or content == "":
            parts = None
        elif isinstance(content, str):
            parts = [text_part(content)]
        else:
            parts = []
            for part in content:
                if part.get("type") == "image_url":
                    url = part["image_url"]["url"]
                    images.append(base64.b64decode(url.split(",", 1)[1]))
                    parts.append(dict(IMAGE_PART))
                else:
                    parts.append(text_part(part.get("text", "")))
        calls = [
            {
                "type": "function",
                "function": {
                    "name": c["function"]["name"],
                    "arguments": _json_args(c["function"]["arguments"]),
                },
            }
            for c in msg.get("tool_calls") or []
        ] or None
        out.append(message(msg["role"], parts, calls))
    return {"messages": out, "images": images, "tools": json.dumps(tools)}


def _assistant(reply: PolicyReply) -> dict:
    return {
        "role": "assistant",
        "content": reply.text,
        "tool_calls": [c.to_openai() for c in reply.tool_calls] or None,
    }


def _json_args(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def write_rows(rows: list[dict], path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), str(path))
