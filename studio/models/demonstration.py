"""The studio's episode: a person's and the agent's turns on one scene, recorded as one episode.

The journal is every successful mutating call since the scene was last emptied (a task's
setup, the agent's calls, the person's calls, undos): when the episode begins, the journal
so far is its start state (`setup`), so replay, export and eval rebuild the same scene.
The episode begins at the first call of either actor and stays open while they take turns
(the person can stop the agent, edit by hand and let it go on). Only Finish saves it as a
demonstration; anything else that ends it (a new scene, another task, Open, Restore, Replay,
closing the studio) `discard`s it: a person's unfinished session leaves nothing in the store,
an agent's run that ended on its own is kept as the agent left it. A person's calls are recorded through
`agents.loop.turns.HumanTurns`, as the turns the agent would have had; the agent's through the
episode loop itself (`EpisodeLoop(recorder=...)`). Each step says who made it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from studio.models.evented import Emitter
from tools import Session

log = logging.getLogger(__name__)
DONE_TEXT = "Done."  # what a person's Finish says in the agent's words (the oracle's too)


@dataclass
class LoopVerdict:
    """The reward the agent's loop computed, shaped like the checker's RewardBreakdown."""

    total: float
    components: dict[str, float]
    success: bool


@dataclass
class SceneJournal:
    calls: list[dict[str, Any]] = field(default_factory=list)  # [{"tool", "args"}]

    def reset(self, setup: list[dict[str, Any]] | None = None) -> None:
        self.calls = [dict(c) for c in (setup or [])]

    def add(self, tool: str, args: dict[str, Any]) -> None:
        self.calls.append({"tool": tool, "args": dict(args)})


class Demonstration:
    """The open episode of the studio session, if any."""

    def __init__(self, store_factory) -> None:
        self._store_factory = store_factory  # () -> agents.store.Store (opened on first use)
        self.turns: Any = None  # agents.loop.turns.HumanTurns over the open recorder
        self.episode_id: str | None = None
        self.task_id: str | None = None
        self.task_params: dict | None = None
        self.prompt: str | None = None  # the task's
        self.episode_prompt = ""  # the open episode's: the task's, or the goal typed for a run
        self.typed_prompt = ""  # typed in the review for an episode without one (kept if it closes)
        # every actor's calls, one per recorded step ("step": its index), for the task's checker
        self.calls: list[dict[str, Any]] = []
        self.final_message: str | None = None  # what the agent said when it stopped last
        # the loop's verdict while it still stands (the episode is that run, nothing since)
        self.loop_verdict: LoopVerdict | None = None
        self.record_error: str | None = None  # the last recording failure, for the GUI
        self.agent_acted = False  # the agent made steps in the open episode
        self.changed = Emitter()  # (n_steps)

    @property
    def active(self) -> bool:
        return self.turns is not None

    @property
    def recorder(self) -> Any:
        return None if self.turns is None else self.turns.recorder

    def set_task(self, task_id: str | None, prompt: str | None, params: dict | None = None) -> None:
        self.task_id, self.prompt, self.task_params = task_id, prompt, params

    def recorder_factory(self, source: str, goal: str | None = None):
        """`begin_episode` for this session's episode, as the loop and HumanTurns call it."""
        def begin(**meta: Any) -> Any:
            if goal is not None:
                meta["prompt"] = goal
            self.episode_prompt = meta.get("prompt") or ""
            return self._store_factory().begin_episode(
                task_id=self.task_id, task_params=self.task_params, source=source, **meta)
        return begin

    def adopt(self, recorder: Any) -> Any:
        """The agent opened the episode (its loop made the recorder): the person's later
        calls join it. Returns the recorder (so this can wrap a recorder factory)."""
        from agents import HumanTurns

        self.turns = HumanTurns(recorder, _loop_config(), None)
        self.episode_id, self.calls, self.final_message = recorder.episode_id, [], None
        self.loop_verdict, self.agent_acted = None, False
        return recorder

    # -- on the session thread ----------------------------------------------------------
    def human_call(self, session: Session, tool: str, args: dict, start: list[dict]) -> Any:
        """Run a person's call and record it as a human turn (the episode begins on the scene
        as it is, `start` being the calls that built it). Returns the ToolResult; a failure
        to record is kept in `record_error`, never lost with the call."""
        from agents import HumanTurns, StartState
        from tools.specs import without_defaults

        self.record_error = None
        if self.turns is None:
            try:
                self.turns = HumanTurns.begin(
                    session, self.recorder_factory("human"), self.prompt or "",
                    StartState(tuple(start), keep=True), _loop_config())
                self.episode_id, self.calls, self.final_message = (
                    self.turns.recorder.episode_id, [], None)
                self.loop_verdict, self.agent_acted = None, False
            except Exception as exc:
                log.exception("beginning the episode failed")
                self.record_error = f"Recording could not start: {exc}"
                return session.call(tool, args)
        result = session.call(tool, args)
        step = None
        try:  # the call as the agent would write it: the form's untouched defaults left out
            self.turns.record(session, result, without_defaults(tool, args))
            step = self.turns.recorder.n_steps - 1
        except Exception as exc:
            log.exception("recording a step failed")
            self.record_error = f"Recording the step failed: {exc}"
        self.note_call(result, step)
        return result

    def note_call(self, result: Any, step: int | None = None) -> None:
        """A person's call, for the task's checker (`step`: its recorded index)."""
        error = result.error
        self.calls.append({"tool": result.tool, "args": result.args, "ok": result.ok,
                           "error_kind": error.kind.value if error else None,
                           "seq": getattr(result, "seq", None), "step": step})
        self.final_message, self.loop_verdict = None, None
        self.changed.emit(self.n_steps)

    @property
    def n_steps(self) -> int:
        """The steps recorded in the open episode: the one count every dock shows."""
        return self.turns.recorder.n_steps if self.turns is not None else 0

    def after_agent(self, summary: dict, first_step: int) -> None:
        """The agent's run ended: its calls (as its loop gave them to the checker) join the
        episode's, its verdict stands until anything else happens, and its last words close
        the episode unless the person acts. `first_step`: the episode's step count when the
        run began."""
        calls = list(summary.get("checker_calls") or ())
        n = self.n_steps - first_step
        self.agent_acted = self.agent_acted or n > 0
        for i, c in enumerate(calls):  # one recorded step per call, in order
            self.calls.append({**c, "step": first_step + i if len(calls) == n else None})
        self.final_message = summary.get("final_message")
        self.loop_verdict = None
        if summary.get("reward") is not None and first_step == 0 and len(calls) == n:
            self.loop_verdict = LoopVerdict(float(summary["reward"]),
                                            dict(summary.get("components") or {}),
                                            bool(summary.get("success")))
        self.changed.emit(self.n_steps)

    def after_agent_hash(self, scene_hash: str | None) -> None:
        if self.turns is not None:
            self.turns.last_hash = scene_hash

    def use_goal(self, goal: str) -> None:
        """A run continues the open episode with a typed goal: an episode the person began
        without a task has no prompt yet, and the goal becomes it."""
        if self.turns is None or self.episode_prompt or not goal.strip():
            return
        from agents.store.revise import set_prompt

        set_prompt(self._store_factory(), self.episode_id, goal.strip())
        self.episode_prompt = goal.strip()

    def drop(self, indices: set[int]) -> None:
        """Leave recorded steps out (raises StoreError, dropping nothing, when the kept ones
        would not replay); the checker's calls follow."""
        from agents.store.revise import drop_steps

        if self.turns is None or not indices:
            return
        drop_steps(self._store_factory(), self.episode_id, indices)
        self.calls = [c for c in self.calls if c.get("step") not in indices]
        self.loop_verdict = None

    # -- closing -----------------------------------------------------------------------
    def finish(self, verdict: Any = None, prompt: str | None = None) -> str | None:
        """Close the episode (with the task's verdict when there is one); returns its id.
        `prompt`: what the person says the episode does, when it has no prompt yet."""
        if self.turns is None:
            return None
        prompt = prompt or self.typed_prompt
        if prompt and prompt.strip() and prompt.strip() != self.episode_prompt:
            from agents.store.revise import set_prompt

            set_prompt(self._store_factory(), self.episode_id, prompt.strip())
        kw: dict[str, Any] = {"final_message": self.final_message or DONE_TEXT}
        if verdict is not None:
            kw.update(reward=float(verdict.total), components=dict(verdict.components),
                      success=bool(verdict.success))
        self.turns.recorder.finish(**kw)
        episode_id, self.turns, self.episode_prompt, self.loop_verdict = self.episode_id, None, "", None
        self.typed_prompt, self.agent_acted = "", False
        self.changed.emit(0)
        return episode_id

    def discard(self) -> tuple[str, str] | None:
        """End the open episode without the person's Finish (a replacement, or the studio
        closing). An agent's run that ended on its own, nothing done since, closes as the agent
        left it (its loop's reward when it has one); one with the agent's steps and the
        person's after them is kept as `interrupted` (never exported by default); a person's
        own unfinished session is removed from the store. Returns (episode id, "finished" |
        "interrupted" | "removed"), or None when no episode was open."""
        if self.turns is None:
            return None
        recorder, episode_id = self.turns.recorder, self.episode_id
        if self.final_message is not None:  # the agent spoke last
            kw: dict[str, Any] = {"final_message": self.final_message}
            if self.loop_verdict is not None:
                kw.update(reward=self.loop_verdict.total, components=self.loop_verdict.components,
                          success=self.loop_verdict.success)
            recorder.finish(**kw)
            outcome = "finished"
        else:
            recorder.abort("ended without Finish")
            outcome = "interrupted"
            if not self.agent_acted:  # the person's alone: not a demonstration, not kept
                self._store_factory().delete([episode_id])
                outcome = "removed"
        self.turns, self.episode_prompt, self.loop_verdict = None, "", None
        self.typed_prompt, self.agent_acted = "", False
        self.changed.emit(0)
        return episode_id, outcome


def _loop_config() -> Any:
    from agents import LoopConfig

    return LoopConfig()
