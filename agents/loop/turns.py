"""Turns as the store keeps them, for the agent's replies and a person's calls alike.

`record_turn` is the one way a step of the episode loop reaches the recorder. `HumanTurns`
records a person's calls through it as the turns the agent would have had at that point:
the episode begins with the loop's system prompt, tool catalogue and start montage, each
call is written as the agent writes it (one tool call per turn), its result is the text the
loop shows the model and its frame the montage the loop would render (after a call that
changed the scene). So a person's episode exports to the same TRL rows as an agent's, and a
person and the agent can take turns in one episode (each step marked with its actor).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from agents.loop.config import LoopConfig
from agents.loop.episode import CallOutcome, StepRecord
from agents.loop.start_state import StartState
from agents.policies.protocol import ToolCall
from tools import Session


def record_turn(recorder: Any, step: StepRecord, turn: int, actor: str) -> None:
    """Record the calls of one turn (one assistant reply): the message, tokens and latency on
    the first call, the frame observed after the turn on the last."""
    tokens = getattr(step, "tokens", None)  # TurnTokens: the ids the model generated (RL)
    for i, outcome in enumerate(step.calls):
        first, last = i == 0, i == len(step.calls) - 1
        call = outcome.call
        recorder.add_step(
            tool=call.name,
            args=call.arguments if isinstance(call.arguments, dict) else {"_raw": call.arguments},
            result=outcome.result if outcome.result is not None else outcome.text,
            error_kind=outcome.error_kind,
            error_message=outcome.error_message,
            duration_ms=outcome.duration_ms,
            frame=step.frame if last else None,
            scene_hash=outcome.scene_hash,
            model_message=step.text if first else None,
            tokens_in=step.tokens_in if first else 0,
            tokens_out=step.tokens_out if first else 0,
            latency_ms=step.latency_ms if first else 0.0,
            token_ids=tokens.completion_ids if first and tokens is not None else None,
            logprobs=tokens.logprobs if first and tokens is not None else None,
            turn=turn,
            actor=actor,
        )


def observe_frame(session: Session, config: LoopConfig) -> tuple[bytes | None, str]:
    """The montage the loop shows the model (its views and size) and the scene hash."""
    result = session.render(views=config.views, size=config.render_size)
    png = result.images[0] if getattr(result, "ok", True) and result.images else None
    return png, session.scene_hash()


def episode_meta(policy: str, goal: str, catalogue: list[dict], config: LoopConfig,
                 initial_frame: bytes | None, setup: list[dict], scene_hash: str | None) -> dict:
    """What an episode begins with, as `Store.begin_episode` takes it (the loop's own)."""
    return {"policy": policy, "tools": catalogue, "system": config.system_prompt, "prompt": goal,
            "initial_frame": initial_frame, "setup": setup, "initial_scene_hash": scene_hash}


class HumanTurns:
    """A person's calls in an episode, recorded as agent turns. Use from the thread that owns
    the session (it renders after calls that change the scene)."""

    def __init__(self, recorder: Any, config: LoopConfig, scene_hash: str | None) -> None:
        self.recorder, self.config = recorder, config
        self.last_hash = scene_hash
        self._n = 0

    @classmethod
    def begin(cls, session: Session, recorder_factory: Callable[..., Any], goal: str,
              start: StartState, config: LoopConfig | None = None,
              catalogue: list[dict] | None = None) -> HumanTurns:
        """Open the episode on the scene as it is (`start` says how to rebuild it)."""
        config = config or LoopConfig()
        if catalogue is None:
            from tools import catalogue as tool_catalogue

            catalogue = tool_catalogue()
        if config.observe == "never":  # as the loop starts: no montage, only the hash
            png, scene_hash = None, session.scene_hash()
        else:
            png, scene_hash = observe_frame(session, config)
        setup = [{"tool": c["tool"], "args": dict(c.get("args") or {})} for c in start.calls]
        recorder = recorder_factory(**episode_meta("human", goal, catalogue, config, png, setup,
                                                   scene_hash))
        return cls(recorder, config, scene_hash)

    def call(self, session: Session, tool: str, args: dict) -> Any:
        """Run one call of the person's and record it; returns the ToolResult."""
        start = time.perf_counter()
        result = session.call(tool, args)
        self.record(session, result, args, (time.perf_counter() - start) * 1e3)
        return result

    def record(self, session: Session, result: Any, args: dict | None = None,
               wall_ms: float = 0.0) -> None:
        """Record a call that already ran (its ToolResult) as one human turn; `args` as the
        person wrote them (default: the runtime's validated form, defaults filled in)."""
        written = dict(result.args or {}) if args is None else dict(args)
        call = ToolCall(f"h{self._n}", result.tool, written)
        self._n += 1
        outcome = CallOutcome.from_result(call, result, wall_ms)
        step = StepRecord(index=self.recorder.next_turn, text=None, calls=[outcome])
        changed = bool(outcome.ok and outcome.scene_hash and outcome.scene_hash != self.last_hash)
        if self.config.observes(changed):
            step.frame, self.last_hash = observe_frame(session, self.config)
        record_turn(self.recorder, step, self.recorder.next_turn, "human")
