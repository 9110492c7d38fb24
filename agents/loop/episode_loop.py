"""THE episode loop: one implementation for the studio, the CLI and RL rollouts.

reset -> setup -> observe (montage + compact scene) -> policy -> validate calls -> execute
-> feed back results or errors -> observe ... until the policy answers without calls
(`done`), the checker passes (`success`), the step budget runs out (`budget`), the same
failing call keeps coming (`stuck`), the caller cancels (`cancelled`), the policy cannot
go on (`fatal`, e.g. its server is down) or the conversation no longer fits the model's
context even in its shortest form (`overflow`, agents/loop/context.py's budget rule).

The loop knows no task: the caller passes a goal, an optional `setup(session)` that builds
the start state and an optional `checker(session, calls)` that scores the final scene
(training/ passes `task.setup` and `task.evaluate`). A kept `StartState` starts from the
session's scene as it is ("continue from here"); its calls are recorded as the episode's
setup so replay and eval rebuild it. An open `recorder` owned by the caller (the studio's
session episode, where a person and the agent take turns) gets the loop's turns appended
and is left open; so is one the factory makes when `keep_recording` is set. Errors from
tools go back to the model as tool results it can act on; an infrastructure failure (the
worker died while the start state was being built, or the pool failed) raises
`InfrastructureError` so that a scheduler can retry the episode on a fresh worker.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from agents.loop import events as ev
from agents.loop.config import DEFAULT_SYSTEM, LoopConfig
from agents.loop.context import (
    RECALL_SPEC,
    RECALL_TOOL,
    ContextOverflow,
    ContextWindow,
    PromptBudget,
    estimate_tokens,
    observation,
    openai_tools,
    wire_call,
)
from agents.loop.episode import CallOutcome, EpisodeResult, StepRecord, Verdict
from agents.loop.start_state import InfrastructureError, StartState, build_start_state
from agents.loop.turns import episode_meta, observe_frame, record_turn
from agents.policies.protocol import Policy, PolicyError, PolicyReply, ToolCall
from tools import Session

__all__ = [
    "DEFAULT_SYSTEM",
    "EpisodeLoop",
    "InfrastructureError",
    "LoopConfig",
    "StartState",
    "openai_tools",
    "run_episode",
]

Checker = Callable[[Session, list[dict]], Verdict]  # (session, calls) -> RewardBreakdown
Setup = Callable[[Session], Any] | StartState


class EpisodeLoop:
    """Runs one episode; construct, then `run()`. Not reusable across episodes."""

    def __init__(
        self,
        policy: Policy,
        session: Session,
        goal: str,
        *,
        setup: Setup | None = None,
        checker: Checker | None = None,
        config: LoopConfig | None = None,
        subscribers: Iterable[ev.Subscriber] = (),
        cancel: threading.Event | None = None,
        task_info: dict | None = None,
        catalogue: list[dict] | None = None,
        recorder_factory: Callable[..., Any] | None = None,
        recorder: Any = None,
        keep_recording: bool = False,
    ) -> None:
        self.policy = policy
        self.session = session
        self.goal = goal
        self.setup = setup
        self.checker = checker
        self.config = config or LoopConfig()
        if self.config.observe == "auto":
            observe = "changed" if getattr(policy, "sees_images", True) else "text"
            self.config = dataclasses.replace(self.config, observe=observe)
        self.bus = ev.EventBus(list(subscribers))
        self.cancel = cancel or threading.Event()
        self.task_info = task_info
        if catalogue is None:
            from tools import catalogue as tool_catalogue

            catalogue = tool_catalogue()
        self.catalogue = catalogue
        self.tools = openai_tools(catalogue) + [RECALL_SPEC]
        self.tool_names = {t["function"]["name"] for t in self.tools}
        self.recorder_factory = recorder_factory
        self.window = ContextWindow(self.config.context)
        self.history: list[dict] = []
        self.result = EpisodeResult(goal=goal, policy=getattr(policy, "name", "?"))
        self._failures: dict[str, int] = {}
        self._last_hash: str | None = None
        self._scene_changed = False  # a call changed the scene since the last observation
        self._render_skipped = False  # the last observation's montage was not rendered ("text")
        self._used_ids: set[str] = set()
        self._recorder: Any = recorder  # given: the caller's open episode, never closed here
        self._owns_recorder = recorder is None and not keep_recording
        self._turn_base = 0 if recorder is None else recorder.next_turn

    # -- the episode ---------------------------------------------------------------------

    def run(self) -> EpisodeResult:
        start = time.perf_counter()
        try:
            first = self._start()
            self.bus.emit(
                ev.EPISODE_STARTED,
                goal=self.goal,
                tools=[t["function"]["name"] for t in self.tools],
            )
            if first is not None:
                self.bus.emit(ev.RENDER, step=-1, png=first)
            self._steps()
            self._finish()
        except BaseException as exc:
            self._abandon(exc)
            raise
        self.result.wall_ms = (time.perf_counter() - start) * 1e3
        self.bus.emit(
            ev.DONE,
            status=self.result.status,
            steps=len(self.result.steps),
            reward=self.result.reward,
            success=self.result.success,
            error=self.result.error,
        )
        return self.result

    def _start(self) -> bytes | None:
        began = time.perf_counter()
        setup_calls = build_start_state(self.session, self.setup)
        # a goal with no task: its words, for a policy that picks a toolbox by them
        self.policy.reset(self.task_info if self.task_info is not None else {"goal": self.goal})
        png, scene = self._observe_scene(force=True)
        self.result.initial_frame = png
        self.history = [{"role": "system", "content": self.config.system_prompt}]
        self.history.append(observation(f"Goal: {self.goal}", png, scene, self.config.context, -1,
                                        render_skipped=self._render_skipped))
        if self.recorder_factory is not None and self._recorder is None:
            self._recorder = self.recorder_factory(
                **episode_meta(self.result.policy, self.goal, self.catalogue, self.config, png,
                               setup_calls, self._last_hash)
            )
        self.result.start_ms = (time.perf_counter() - began) * 1e3
        return png

    def _steps(self) -> None:
        cfg = self.config
        for index in range(cfg.max_steps):
            if self.cancel.is_set():
                self.result.status = "cancelled"
                return
            step_start = time.perf_counter()
            self.bus.emit(ev.STEP_STARTED, step=index)
            budget = self._budget()
            try:
                prompt = self.window.view(self.history, self.tools, budget)
            except ContextOverflow as exc:
                self.result.status, self.result.error = "overflow", str(exc)
                return
            est = estimate_tokens(prompt, self.tools, cfg.context)
            policy_start = time.perf_counter()
            try:
                reply = self._act(prompt)
            except PolicyError as exc:
                if exc.fatal:
                    self.result.status, self.result.error = "fatal", str(exc)
                    return
                if self._policy_failed(index, str(exc), step_start):
                    self.result.status = "stuck"
                    return
                continue
            policy_ms = (time.perf_counter() - policy_start) * 1e3
            if reply is None:
                self.result.status = "cancelled"
                return
            step = StepRecord(
                index=index,
                text=reply.text,
                tokens_in=reply.tokens_in,
                tokens_out=reply.tokens_out,
                prompt_tokens_est=est,
                prompt_tokens=self.window.tokens if budget is not None else reply.tokens_in,
                compaction=self.window.moves,
                latency_ms=reply.latency_ms or policy_ms,
                tokens=reply.tokens,
            )
            self.result.steps.append(step)
            self.bus.emit(
                ev.MESSAGE,
                step=index,
                text=reply.text,
                tokens_in=reply.tokens_in,
                tokens_out=reply.tokens_out,
                latency_ms=step.latency_ms,
            )
            if reply.done:
                self.result.status, self.result.final_message = "done", reply.text
                step.overhead_ms = self._overhead(step_start, policy_ms, step)
                return
            calls = self._unique_ids(reply.tool_calls, index)
            self.history.append(
                {
                    "role": "assistant",
                    "content": reply.text,
                    "tool_calls": [wire_call(c) for c in calls],
                    "_step": index,
                }
            )
            stuck = self._execute(calls, step)
            if self.cancel.is_set():
                self.result.status = "cancelled"
                return
            self._observe_after(step)
            step.overhead_ms = self._overhead(step_start, policy_ms, step)
            if stuck:
                self.result.status = "stuck"
                return
            if cfg.check_every_step and self.checker is not None:
                verdict = self._check()
                if verdict.success:
                    self.result.status = "success"
                    return
        self.result.status = "budget"

    def _budget(self) -> PromptBudget | None:
        """The policy's own prompt budget (`prompt_budget()`: its context less the turn's new
        tokens, counted by its tokenizer), or None: the estimated `token_budget` applies."""
        ask = getattr(self.policy, "prompt_budget", None)
        budget = ask() if callable(ask) else None
        if budget is not None:
            cap = self.config.context.max_prompt_tokens
            self.result.context_limit = min(budget.limit, cap or budget.limit)
        return budget

    def _policy_failed(self, index: int, message: str, step_start: float) -> bool:
        """A reply that could not be used (not fatal): tell the model, count it as a step.
        True when the same failure has come back `stuck_after` times."""
        step = StepRecord(index=index, text=None, policy_error=message)
        step.latency_ms = (time.perf_counter() - step_start) * 1e3
        self.result.steps.append(step)
        self.bus.emit(
            ev.MESSAGE,
            step=index,
            text=None,
            error=message,
            tokens_in=0,
            tokens_out=0,
            latency_ms=step.latency_ms,
        )
        self.history.append(
            {
                "role": "user",
                "content": f"Your last reply could not be used: {message}. Reply again; write "
                "each tool call as JSON with a name and an arguments object.",
                "_step": index,
            }
        )
        key = f"policy|{message}"
        self._failures[key] = self._failures.get(key, 0) + 1
        return self._failures[key] >= self.config.stuck_after

    def _act(self, prompt: list[dict]) -> PolicyReply | None:
        """Ask the policy; returns None if cancelled while it was thinking."""
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["reply"] = self.policy.act(prompt, self.tools)
            except BaseException as exc:  # re-raised on the loop's thread
                box["error"] = exc

        thread = threading.Thread(target=work, name="policy-act", daemon=True)
        thread.start()
        while thread.is_alive():
            thread.join(0.02)
            if self.cancel.is_set():
                return None  # the abandoned call finishes in the background; nothing reads it
        if "error" in box:
            raise box["error"]
        return box["reply"]

    def _execute(self, calls: list[ToolCall], step: StepRecord) -> bool:
        """Run the calls of one reply; True if the episode is stuck on a repeated failure."""
        stuck = False
        for i, call in enumerate(calls):
            if self.cancel.is_set():
                break
            self.bus.emit(
                ev.CALL, step=step.index, call_id=call.id, tool=call.name, args=call.arguments
            )
            if i >= self.config.max_calls_per_step:
                outcome = CallOutcome.refused(
                    call, f"too many calls in one reply (limit {self.config.max_calls_per_step})"
                )
            else:
                outcome = self._run_call(call, step.index)
            key = f"{call.name}|{call.arguments_json()}"
            if not outcome.ok:
                self._failures[key] = count = self._failures.get(key, 0) + 1
                if count >= self.config.repeat_warning:
                    outcome.repeated = count
                    outcome.text += (
                        f"\nThis exact call has now failed {count} times: change the arguments "
                        "or use another tool."
                    )
                    self.result.repeated_failures += 1
                stuck = stuck or count >= self.config.stuck_after
            step.calls.append(outcome)
            self.result.calls.append(outcome.for_checker())
            self.history.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": outcome.text,
                    "_step": step.index,
                    "_ok": outcome.ok,  # what a left-out output still says (context.fit)
                }
            )
            self.bus.emit(
                ev.RESULT,
                step=step.index,
                call_id=call.id,
                tool=call.name,
                ok=outcome.ok,
                text=outcome.text,
                error_kind=outcome.error_kind,
                duration_ms=outcome.duration_ms,
                repeated=outcome.repeated,
            )
        return stuck

    def _run_call(self, call: ToolCall, step_index: int) -> CallOutcome:
        if not call.name or call.name not in self.tool_names:
            names = ", ".join(sorted(self.tool_names))
            shown = call.name or "(no name)"
            return CallOutcome.refused(call, f"unknown tool {shown!r}; the tools are: {names}")
        if not isinstance(call.arguments, dict):
            raw = call.arguments if len(call.arguments) < 200 else call.arguments[:200] + "..."
            return CallOutcome.refused(
                call,
                f"the arguments of {call.name} are not a JSON object: {raw!r}. Send them as a "
                'JSON object matching the tool\'s parameters, e.g. {"name": "A"}.',
            )
        if call.name == RECALL_TOOL:
            return self._recall(call)
        start = time.perf_counter()
        try:
            result = self.session.call(call.name, call.arguments)
        except Exception as exc:  # the runtime itself failed, not the call
            raise InfrastructureError(f"the tool runtime failed on {call.name}: {exc}") from exc
        wall_ms = (time.perf_counter() - start) * 1e3
        outcome = CallOutcome.from_result(call, result, wall_ms)
        if outcome.ok and outcome.scene_hash:
            self._scene_changed = outcome.scene_hash != self._last_hash or self._scene_changed
        return outcome

    def _recall(self, call: ToolCall) -> CallOutcome:
        index = call.arguments.get("index")
        steps = self.result.steps
        if not isinstance(index, int) or not 0 <= index < len(steps):
            return CallOutcome.refused(
                call, f"no step {index!r}; steps so far: 0..{len(steps) - 1}"
            )
        texts = [f"{o.call.name}: {o.text}" for o in steps[index].calls]
        return CallOutcome(call=call, ok=True, text="\n".join(texts) or "(no calls)", local=True)

    # -- observation -----------------------------------------------------------------------

    def _observe_scene(self, force: bool = False) -> tuple[bytes | None, dict | None]:
        """The montage and the scene page, when `config.observe` wants them (`force`: the
        start, unless observing is off)."""
        config = self.config
        self._render_skipped = False
        if config.observe == "never" or not (force or config.observes(self._scene_changed)):
            return None, None
        self._scene_changed = False
        if config.observe == "text":  # the scene listing as "changed" gives it, no render
            self._last_hash = self.session.scene_hash()
            self._render_skipped = True
            return None, self._scene_page()
        png, self._last_hash = observe_frame(self.session, self.config)
        return png, self._scene_page()

    def _scene_page(self) -> dict | None:
        """The scene's first page: the objects the model is shown, the totals and what the
        last change touched, all that `compact_scene` reads. Never the whole scene, which
        costs a read of every object each turn on a large model. A failed listing only costs
        the model this observation's JSON."""
        limit = max(1, self.config.context.scene_objects)
        result = self.session.call("get_scene", {"limit": limit})
        return dict(result.output) if result.ok else None

    def _observe_after(self, step: StepRecord) -> None:
        start = time.perf_counter()
        png, scene = self._observe_scene()
        step.observe_ms = (time.perf_counter() - start) * 1e3
        errors = sum(1 for o in step.calls if not o.ok)
        words = f"Step {step.index} done: {len(step.calls) - errors} call(s) ok, {errors} failed."
        if png is None and scene is None:
            words += " The scene did not change."
        step.frame = png
        self.history.append(observation(words, png, scene, self.config.context, step.index,
                                        render_skipped=self._render_skipped))
        if png is not None:
            self.bus.emit(ev.RENDER, step=step.index, png=png)
        if self._recorder is not None:
            self._record_step(step)

    @staticmethod
    def _overhead(step_start: float, policy_ms: float, step: StepRecord) -> float:
        wall = (time.perf_counter() - step_start) * 1e3
        tool = sum(o.wall_ms for o in step.calls) + step.observe_ms
        return max(0.0, wall - policy_ms - tool)

    def _unique_ids(self, calls: list[ToolCall], index: int) -> list[ToolCall]:
        out = []
        for i, call in enumerate(calls):
            cid = call.id if call.id and call.id not in self._used_ids else f"s{index}_{i}"
            self._used_ids.add(cid)
            out.append(call if cid == call.id else ToolCall(cid, call.name, call.arguments))
        return out

    # -- ending ----------------------------------------------------------------------------

    def _finish(self) -> None:
        if self.checker is not None and self.result.status != "fatal":
            verdict = self._check()
            self.result.reward = float(verdict.total)
            self.result.components = dict(verdict.components)
            self.result.success = bool(verdict.success)
            self.result.verdict = verdict
        if self._recorder is not None and not self._owns_recorder:
            self.result.episode_id = self._recorder.episode_id
        elif self._recorder is not None:
            self._recorder.finish(
                reward=self.result.reward,
                components=self.result.components,
                success=self.result.success,
                final_message=self.result.final_message,
                artifacts=self._final_artifacts() if self.config.record_artifacts else None,
            )
            self.result.episode_id = self._recorder.episode_id

    def _check(self) -> Any:
        began = time.perf_counter()
        try:
            return self.checker(self.session, self.result.calls)
        finally:
            self.result.check_ms += (time.perf_counter() - began) * 1e3

    def _final_artifacts(self) -> dict[str, Any]:
        """The final scene as files (.glb, .blend, and .step when it holds CAD parts)."""
        from tools.trust import confined

        workspace = getattr(self.session, "workspace", None)
        if workspace is None or self.result.status == "fatal":
            return {}
        try:
            objects = self.session.scene().get("objects", [])
        except Exception:
            return {}
        if not objects:
            return {}
        wanted = [("glb", {}), ("blend", {})]
        cad = [o["name"] for o in objects if o.get("source") == "cad"]
        if cad:
            wanted.append(("step", {"objects": cad}))
        out: dict[str, Any] = {}
        for fmt, extra in wanted:
            path = f"_episode_final/final.{fmt}"
            r = self.session.call("export", {"format": fmt, "path": path, **extra})
            if r.ok:  # a regular file of the worker's workspace, never read through a link
                try:
                    out[f"final.{fmt}"] = confined.read_file(workspace, path)
                except confined.ConfinedPathError:
                    continue
        return out

    def _abandon(self, exc: BaseException) -> None:
        if self._recorder is not None and self._owns_recorder:
            try:
                self._recorder.abort(f"{type(exc).__name__}: {exc}")
            except Exception:
                pass

    def _record_step(self, step: StepRecord) -> None:
        record_turn(self._recorder, step, self._turn_base + step.index, "agent")


def run_episode(policy: Policy, session: Session, goal: str, **options: Any) -> EpisodeResult:
    """Run one episode; see `EpisodeLoop` for the options."""
    return EpisodeLoop(policy, session, goal, **options).run()
