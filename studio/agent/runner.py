"""Runs THE episode loop (agents.loop) in a QThread and re-posts its events as Qt signals.

The loop is the same code the CLI and RL rollouts run; the studio only gives it a session
proxy (calls go through the studio's session thread), a cancel flag (Stop) and an approval
gate for risky tools. Tasks come from training/ (`task_spec`, the oracle policy).
"""

from __future__ import annotations

import base64
import logging
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QThread, Signal

from studio.runtime.proxy import ApprovalGate, BlockingSession

log = logging.getLogger(__name__)
ORACLE_POLICIES = ("oracle", "reference")


@dataclass
class AgentRequest:
    policy: str = "oracle"  # a make_policy spec: oracle | openai | hf:PATH | script:FILE | none
    task_id: str | None = None
    goal: str = ""
    options: dict[str, Any] = field(default_factory=dict)  # base_url, model, temperature...
    max_steps: int | None = None
    record: bool = True
    attachment: bytes | None = None  # "send what I see": a PNG shown to the model with the goal


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

    def act(self, messages: list[dict], tools: list[dict]):
        head = 2 if len(messages) > 1 else len(messages)  # after the system prompt and the goal
        return self.inner.act([*messages[:head], self._message, *messages[head:]], tools)


class NotedPolicy:
    """Tells the session proxy which calls came from the policy (those may need approval)."""

    def __init__(self, inner: Any, session: BlockingSession) -> None:
        self.inner, self.session, self.name = inner, session, getattr(inner, "name", "?")

    def reset(self, task_info: dict | None = None) -> None:
        self.inner.reset(task_info)

    def act(self, messages: list[dict], tools: list[dict]):
        reply = self.inner.act(messages, tools)
        self.session.note_policy_calls([(c.name, c.arguments) for c in reply.tool_calls])
        return reply


class AgentRunner(QThread):
    sig_event = Signal(str, object)  # (kind, data) from agents.events
    sig_approval = Signal(object)  # ApprovalRequest: answer it with .answer(bool)
    sig_finished = Signal(object)  # the episode summary dict
    sig_error = Signal(str)

    def __init__(self, worker, request: AgentRequest, store: Any = None, approval: bool = False,
                 parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("mw-agent")
        self.request = request
        self.store = store
        self.cancel = threading.Event()
        gate = ApprovalGate(self.sig_approval.emit) if approval else None
        self.session = BlockingSession(worker, origin="agent", gate=gate, cancel=self.cancel)
        self.summary: dict | None = None

    def stop(self) -> None:
        self.cancel.set()

    def _emit(self, event: Any) -> None:
        self.sig_event.emit(event.kind, dict(event.data))

    def run(self) -> None:
        try:
            self.summary = self._run()
        except Exception as exc:
            log.error("agent run failed: %s", traceback.format_exc())
            self.summary = {"status": "fatal", "error": f"{type(exc).__name__}: {exc}"}
            self.sig_error.emit(f"The agent run failed: {exc}")
        self.sig_finished.emit(self.summary)

    def _run(self) -> dict:
        import training.oracle  # noqa: F401  (registers the oracle and reference policies)
        from agents.loop import LoopConfig, run_episode
        from agents.policies import make_policy
        from training.evaluation import run_spec, task_spec

        r = self.request
        policy = make_policy(r.policy, **r.options)
        if r.attachment:
            policy = AttachmentPolicy(policy, r.attachment)
        policy = NotedPolicy(policy, self.session)
        source = "oracle" if r.policy.partition(":")[0] in ORACLE_POLICIES else "agent"
        store = self.store if r.record else None
        if r.task_id:
            spec = task_spec(r.task_id)
            if r.goal:
                spec.goal = r.goal
            config = LoopConfig(max_steps=r.max_steps or spec.budget)
            record = run_spec(spec, policy, self.session, config=config, store=store, source=source,
                              subscribers=(self._emit,), cancel=self.cancel)
            return {k: v for k, v in record.items() if k != "_result"}
        if not r.goal.strip():
            raise ValueError("type a goal or pick a task first")
        recorder_factory = None
        if store is not None:
            def recorder_factory(**meta: Any) -> Any:
                return store.begin_episode(source=source, **meta)
        result = run_episode(policy, self.session, r.goal, config=LoopConfig(max_steps=r.max_steps or 20),
                             subscribers=(self._emit,), cancel=self.cancel, recorder_factory=recorder_factory)
        return result.summary()
