"""Runs THE episode loop (agents.loop.episode_loop) in a QThread and re-posts its events as Qt signals.

The loop is the same code the CLI and RL rollouts run; the studio only gives it a session
proxy (calls go through the studio's session thread), a cancel flag (Stop) and an approval
gate for risky tools. Tasks come from training/ (`task_spec`, the oracle policy).
"""

from __future__ import annotations

import base64
import logging
import threading
import traceback
from dataclasses import dataclass, field, replace
from typing import Any

from PySide6.QtCore import QThread, Signal

from studio.runtime.proxy import ApprovalGate, BlockingSession

log = logging.getLogger(__name__)
ORACLE_POLICIES = ("oracle", "reference")
# The Local agent's stop-on-prose budget (agents/policies/hf_policy.py ProseStop); the Agent
# dock's setting agent/prose_stop_tokens changes it.
PROSE_STOP_TOKENS = 12


@dataclass
class AgentRequest:
    policy: str = "oracle"  # a make_policy spec: oracle | openai | hf:PATH | script:FILE | none
    task_id: str | None = None
    goal: str = ""
    options: dict[str, Any] = field(default_factory=dict)  # base_url, model, temperature...
    max_steps: int | None = None
    record: bool = True
    attachment: bytes | None = None  # "send what I see": a PNG shown to the model with the goal
    new_scene: bool = False  # False: continue from the scene as it is ("continue from here")
    start: list[dict] = field(default_factory=list)  # the calls that built the current scene
    # hf: end the run when the first reply's first N tokens begin no tool call (a goal the
    # local model cannot act on ends in seconds); None or 0: off
    prose_stop_tokens: int | None = PROSE_STOP_TOKENS


def needs_task(policy: str) -> bool:
    """`oracle` and `reference` with no argument play the chosen task's own solution."""
    return policy in ORACLE_POLICIES


def refusal(request: AgentRequest) -> str | None:
    """Why a run cannot start, in the studio's words (checked before anything changes)."""
    if needs_task(request.policy) and not request.task_id:
        name = request.policy.partition(":")[0]
        what = "a task's own solution" if name == "oracle" else "a benchmark case's reference"
        return (f"The {name} policy plays {what}, so it needs a task: choose one in the Task "
                "dock and tick 'Chosen task', or pick another policy for a free-form goal.")
    if not request.task_id and not request.goal.strip():
        return "Type a goal or pick a task before pressing Run."
    return None


class AttachmentPolicy:
    """Wraps a policy so the model also sees the person's viewport capture with the goal."""

    def __init__(self, inner: Any, png: bytes) -> None:
        self.inner, self.name = inner, getattr(inner, "name", "?")
        url = "data:image/png;base64," + base64.b64encode(png).decode()
        self._message = {"role": "user", "content": [
            {"type": "text", "text": "This is what the user sees in the studio's viewport:"},
            {"type": "image_url", "image_url": {"url": url}}]}

    def reset(self, task_info: dict | None = None) -> None:
        self.inner.reset(task_info)

    def prompt_budget(self) -> Any:
        """The inner policy's budget, counting the capture it is shown as well."""
        ask = getattr(self.inner, "prompt_budget", None)
        budget = ask() if callable(ask) else None
        if budget is None:
            return None
        return replace(budget, count=lambda m, t: budget.count(self._with(m), t))

    def act(self, messages: list[dict], tools: list[dict]):
        return self.inner.act(self._with(messages), tools)

    def _with(self, messages: list[dict]) -> list[dict]:
        head = 2 if len(messages) > 1 else len(messages)  # after the system prompt and the goal
        return [*messages[:head], self._message, *messages[head:]]


class NotedPolicy:
    """Tells the session proxy which calls came from the policy (those may need approval)."""

    def __init__(self, inner: Any, session: BlockingSession) -> None:
        self.inner, self.session, self.name = inner, session, getattr(inner, "name", "?")

    def reset(self, task_info: dict | None = None) -> None:
        self.inner.reset(task_info)

    def prompt_budget(self) -> Any:
        ask = getattr(self.inner, "prompt_budget", None)
        return ask() if callable(ask) else None

    def act(self, messages: list[dict], tools: list[dict]):
        reply = self.inner.act(messages, tools)
        self.session.note_policy_calls([(c.name, c.arguments) for c in reply.tool_calls])
        return reply


class AgentRunner(QThread):
    sig_event = Signal(str, object)  # (kind, data) from agents.loop.events
    sig_approval = Signal(object)  # ApprovalRequest: answer it with .answer(bool)
    sig_finished = Signal(object)  # the episode summary dict
    sig_error = Signal(str)

    def __init__(self, worker, request: AgentRequest, approval: bool = False, parent=None,
                 episode: Any = None, data_dir: str | None = None) -> None:
        super().__init__(parent)
        self.data_dir = data_dir  # where a model's name resolves, as in the Agent dock's list
        # the studio's session episode (studio.models.demonstration); None: nothing recorded
        self.episode = episode
        self.setObjectName("mw-agent")
        self.request = request
        self.cancel = threading.Event()
        gate = ApprovalGate(self.sig_approval.emit) if approval else None
        self.worker = worker
        self.session = BlockingSession(worker, origin="agent", gate=gate, cancel=self.cancel)
        self.summary: dict | None = None

    def stop(self) -> None:
        self.cancel.set()

    def _emit(self, event: Any) -> None:
        self.sig_event.emit(event.kind, dict(event.data))

    def run(self) -> None:
        try:
            self.summary = self._run()
        except RunRefused as exc:
            self.summary = {"status": "refused", "error": str(exc), "steps": 0}
            self.sig_error.emit(str(exc))
        except Exception as exc:
            log.error("agent run failed: %s", traceback.format_exc())
            self.summary = {"status": "fatal", "error": f"{type(exc).__name__}: {exc}"}
            self.sig_error.emit(f"The agent run failed: {exc}")
        self.sig_finished.emit(self.summary)

    def _run(self) -> dict:
        from agents import EpisodeLoop, LoopConfig, StartState
        from training import make_policy

        r = self.request
        why = refusal(r)
        if why:
            raise RunRefused(why)
        # fails here, before the scene is touched: a missing model, a tampered shipped adapter
        # are one line in the studio's words
        from agents import PolicyError
        from tools.cli.exits import UserError

        options = dict(r.options)
        if r.policy.partition(":")[0] == "hf" and r.prose_stop_tokens:
            options.setdefault("prose_stop_tokens", r.prose_stop_tokens)
        try:
            policy = make_policy(local_model(r.policy, self.data_dir), **options)
        except (PolicyError, UserError) as exc:
            raise RunRefused(str(exc)) from None
        loaded = loaded_model(policy)
        if r.attachment:
            policy = AttachmentPolicy(policy, r.attachment)
        policy = NotedPolicy(policy, self.session)
        goal, checker, task_info, budget, setup = r.goal, None, None, 20, None
        if r.task_id:
            from training import task_spec

            spec = task_spec(r.task_id)
            goal = r.goal or spec.goal
            checker, task_info, budget, setup = spec.checker, spec.task_info, spec.budget, spec.setup
        if not r.new_scene:  # continue from here: the scene as it is, recorded as the start
            setup = StartState(tuple(r.start), keep=True)
        else:  # a new episode: never on a worker that ran untrusted input (runtime/worker.py)
            self.worker.fresh_episode().result()
        options: dict[str, Any] = {}
        if self.episode is not None and r.record:
            if self.episode.active:
                options["recorder"] = self.episode.recorder
            else:
                source = "oracle" if r.policy.partition(":")[0] in ORACLE_POLICIES else "agent"
                begin = self.episode.recorder_factory(source)
                options["recorder_factory"] = lambda **meta: self.episode.adopt(begin(**meta))
            options["keep_recording"] = True
        config = LoopConfig(max_steps=r.max_steps or budget)
        loop = EpisodeLoop(policy, self.session, goal, setup=setup, checker=checker, config=config,
                           subscribers=(self._emit,), cancel=self.cancel, task_info=task_info,
                           **options)
        result = loop.run()
        # checker_calls: the calls the loop scored, for the studio episode's own verdict
        return {**result.summary(), "final_message": result.final_message,
                "checker_calls": list(result.calls),
                "task": r.task_id, "family": (task_info or {}).get("family"), **loaded}


def local_model(policy: str, data_dir: str | None) -> str:
    """`hf:NAME` with a registered name resolved in the studio's data dir (the packaged base is
    built there on first use), so the run loads the model the Agent dock lists; a folder or
    any other policy is returned as it is."""
    name, _, arg = policy.partition(":")
    if name != "hf" or not data_dir:
        return policy
    from agents.models.registry import BASE_NAME, resolve
    from tools.cli.exits import UserError

    arg = arg or BASE_NAME  # `hf` alone: the packaged base, as the hf policy takes it
    try:
        folder = resolve(arg, data_dir)
    except UserError as exc:  # a missing wheel, a tampered file, a model gone: one line
        raise RunRefused(str(exc)) from exc
    return f"hf:{folder}" if folder is not None else policy


def loaded_model(policy: Any) -> dict:
    """What an in-process model policy loaded: its model folder and, when a LoRA adapter sits
    on it, the adapter's folder (for the summary and the tests)."""
    config, model = getattr(policy, "config", None), getattr(policy, "model", None)
    if config is None or model is None or not hasattr(config, "adapter"):
        return {}
    return {"model": str(config.model or getattr(model.config, "_name_or_path", "")),
            "adapter": config.adapter if hasattr(model, "peft_config") else None}


class RunRefused(ValueError):
    """A run that cannot start (no task for the oracle, no goal): said in the GUI's words."""
