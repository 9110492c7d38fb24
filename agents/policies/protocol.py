"""The policy interface: what an agent (model, script, oracle, person) must offer the loop.

A policy sees OpenAI-style chat messages and the OpenAI `tools=[...]` list, and answers
with a `PolicyReply`: optional text plus zero or more tool calls. A reply with no tool
calls means the policy is done. Everything here is plain data so that the same reply can
be recorded, replayed, shown in the studio and used in training.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class ToolCall:
    """One call the policy asked for.

    `arguments` is a dict when it parsed as a JSON object, or the raw text that did not
    parse (the loop feeds such a call back to the model as a validation error).
    """

    id: str
    name: str
    arguments: dict | str

    @property
    def parsed(self) -> bool:
        return isinstance(self.arguments, dict)

    def arguments_json(self) -> str:
        """The arguments as the JSON string OpenAI messages carry."""
        if isinstance(self.arguments, dict):
            return json.dumps(self.arguments, sort_keys=True)
        return self.arguments

    def to_openai(self) -> dict:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments_json()},
        }


@dataclass
class TurnTokens:
    """One model turn exactly as generated: what RL trains on (never re-tokenised text).

    `prompt_ids` is the tokenised prompt the model continued (images expanded to their
    placeholder tokens where the loop put them), `completion_ids` the sampled tokens (closing
    end-of-turn token included when generated), `logprobs` their log-probabilities under the
    sampling distribution (temperature applied), `vision` the processor's image tensors for the
    prompt (pixel values, grid) so a trainer's forward pass sees the same pixels, and `seen` a
    digest of the messages and image bytes the policy was shown.
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] | None = None
    vision: dict | None = None
    seen: str = ""
    model_version: str = ""
    # Prompt tokens the model ran this turn: the whole prompt on a fresh forward, the tokens
    # after a reused cached prefix otherwise (the hf policy's `reuse_kv`). None: not known.
    prompt_encoded: int | None = None
    # (messages, tools) of a turn whose image tensors are built where the trained model's
    # processor is: a Ray node's server turn, rebuilt on the trainer's side. Never stored.
    prompt: Any = None


@dataclass
class PolicyReply:
    """A policy's answer to one observation."""

    text: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: float = 0.0
    raw: Any = None
    tokens: TurnTokens | None = None  # set by policies that can say exactly what they generated

    @property
    def done(self) -> bool:
        return not self.tool_calls


@dataclass(frozen=True)
class PromptBudget:
    """What a policy that knows its model's context offers the loop (`prompt_budget()`, an
    optional method): the most tokens a turn's prompt may hold (the context less the turn's
    new tokens) and its own count of a prompt, `count(messages, tools)`, for the messages and
    tools as the loop hands them. The loop fits every prompt to it (agents/loop/context.py)."""

    limit: int
    count: Callable[[list[dict], list[dict] | None], int]


@runtime_checkable
class Policy(Protocol):
    """Anything that maps a conversation to tool calls."""

    name: str

    def reset(self, task_info: dict | None = None) -> None: ...

    def act(self, messages: list[dict], tools: list[dict]) -> PolicyReply: ...


class PolicyError(RuntimeError):
    """A policy could not produce a reply (server down, bad configuration).

    `fatal` says whether the episode must stop: a down server is fatal, a single
    unparseable answer is not (the loop feeds that back to the model instead).
    """

    def __init__(self, message: str, *, fatal: bool = True) -> None:
        super().__init__(message)
        self.fatal = fatal
