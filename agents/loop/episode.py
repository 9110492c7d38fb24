"""What an episode produced: per-call outcomes, per-step records and the episode result.

Plain dataclasses, so the studio, the recorder, evaluation and RL read the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from agents.policies.protocol import ToolCall


class Verdict(Protocol):
    """What a checker returns and the loop reads (training's RewardBreakdown is one)."""

    total: float
    components: dict[str, float]
    success: bool


@dataclass
class CallOutcome:
    call: ToolCall
    ok: bool
    text: str  # what the model is shown
    output: Any = None  # the tool's JSON output
    error_kind: str | None = None
    error_message: str | None = None
    duration_ms: float = 0.0  # as the runtime measured it
    wall_ms: float = 0.0  # as the loop measured it (includes IPC)
    scene_hash: str | None = None
    repeated: int = 0  # how often this identical call had failed, when >= the warning level
    local: bool = False  # answered by the loop (recall_step, refusals), not the runtime
    result: Any = field(default=None, repr=False)  # the runtime's ToolResult, for the store

    @classmethod
    def refused(cls, call: ToolCall, message: str) -> CallOutcome:
        """A call the loop did not run because it is malformed: a validation error."""
        return cls(
            call=call,
            ok=False,
            text=f"error (validation): {message}",
            error_kind="validation",
            error_message=message,
            local=True,
        )

    @classmethod
    def from_result(cls, call: ToolCall, result: Any, wall_ms: float) -> CallOutcome:
        error = result.error
        return cls(
            call=call,
            ok=bool(result.ok),
            text=result.to_text(),
            output=result.output,
            error_kind=_kind(error) if error is not None else None,
            error_message=getattr(error, "message", None) if error is not None else None,
            duration_ms=float(result.duration_ms or 0.0),
            wall_ms=wall_ms,
            scene_hash=result.scene_hash,
            result=result,
        )

    def for_checker(self) -> dict:
        """The `{"tool", "args", "ok", "error_kind", "seq"}` form `task.evaluate` takes (`seq`:
        the call's place in the session's ledger, which is how the verifier finds it)."""
        args = self.call.arguments if isinstance(self.call.arguments, dict) else {}
        return {"tool": self.call.name, "args": args, "ok": self.ok, "error_kind": self.error_kind,
                "seq": getattr(self.result, "seq", None)}


def _kind(error: Any) -> str:
    kind = getattr(error, "kind", "kernel")
    return getattr(kind, "value", kind)


@dataclass
class StepRecord:
    index: int
    text: str | None
    calls: list[CallOutcome] = field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    prompt_tokens_est: int = 0  # the loop's own estimate of the prompt it sent
    # The prompt's tokens as the policy counts them (its `prompt_budget`; else the tokens_in
    # it reports), and the budget rule's compaction moves that prompt took (context.fit).
    prompt_tokens: int = 0
    compaction: int = 0
    latency_ms: float = 0.0  # the policy's
    observe_ms: float = 0.0  # render + scene after the calls
    overhead_ms: float = 0.0  # the loop's own time: step wall minus policy, tools, observe
    frame: bytes | None = None
    policy_error: str | None = None  # the reply could not be used (e.g. the server failed)
    tokens: Any = None  # agents.policies.protocol.TurnTokens of this turn, when the policy gave them (RL)

    @property
    def tool_errors(self) -> int:
        return sum(1 for c in self.calls if not c.ok)


@dataclass
class EpisodeResult:
    goal: str
    policy: str
    # done | success | budget | stuck | cancelled | fatal | overflow (the context is full)
    status: str = "running"
    steps: list[StepRecord] = field(default_factory=list)
    calls: list[dict] = field(default_factory=list)  # for the checker
    final_message: str | None = None
    error: str | None = None
    reward: float | None = None
    components: dict[str, float] | None = None
    success: bool | None = None
    verdict: Any = None
    repeated_failures: int = 0
    wall_ms: float = 0.0
    start_ms: float = 0.0  # start state, first observation, the recorder's opening entry
    check_ms: float = 0.0  # the checker's verdicts (the verifier's clean worker, when scored)
    episode_id: str | None = None  # in the store, when recorded
    initial_frame: bytes | None = field(default=None, repr=False)  # the start montage
    context_limit: int | None = None  # the prompt tokens a turn may hold (the policy's budget)

    @property
    def n_calls(self) -> int:
        return sum(len(s.calls) for s in self.steps)

    @property
    def tool_errors(self) -> int:
        return sum(s.tool_errors for s in self.steps)

    @property
    def policy_errors(self) -> int:
        return sum(1 for s in self.steps if s.policy_error)

    @property
    def tokens_in(self) -> int:
        return sum(s.tokens_in for s in self.steps)

    @property
    def tokens_out(self) -> int:
        return sum(s.tokens_out for s in self.steps)

    @property
    def latency_ms(self) -> float:
        return sum(s.latency_ms for s in self.steps)

    def summary(self) -> dict:
        """The `modelwright run --json` summary."""
        return {
            "status": self.status,
            "policy": self.policy,
            "success": self.success,
            "reward": self.reward,
            "components": self.components or {},
            "steps": len(self.steps),
            "calls": self.n_calls,
            "tool_errors": self.tool_errors,
            "policy_errors": self.policy_errors,
            "repeated_failures": self.repeated_failures,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "prompt_tokens_est": sum(s.prompt_tokens_est for s in self.steps),
            # per model turn: the prompt's tokens, and the turns the budget rule compacted
            "prompt_tokens": [s.prompt_tokens for s in self.steps if s.policy_error is None],
            "compacted_turns": sum(1 for s in self.steps if s.compaction),
            "context_limit": self.context_limit,
            "latency_ms": round(self.latency_ms, 3),
            "wall_ms": round(self.wall_ms, 3),
            "error": self.error,
            "episode_id": self.episode_id,
        }
