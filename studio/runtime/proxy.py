"""The studio's ToolSession as another thread sees it: every use becomes a job on the worker.

The agent loop runs in its own thread and calls `session.call(...)` synchronously; this
proxy forwards each call to the `SessionWorker` and waits, so the session stays owned by one
thread and the viewport's renders can slip in between the agent's calls. Risky tools wait
for the person's Approve/Reject when an approval gate is given.
"""

from __future__ import annotations

import threading
from typing import Any

from tools import TOOLS, ErrorKind, ToolError, ToolResult


class ApprovalGate:
    """Asks the GUI about a risky call and blocks the asking (non-GUI) thread for the answer."""

    def __init__(self, ask) -> None:  # ask(request: ApprovalRequest) is called off the GUI thread
        self._ask = ask

    def approve(self, tool: str, args: dict, cancel: threading.Event) -> bool:
        request = ApprovalRequest(tool, args)
        self._ask(request)
        while not request.answered.wait(0.05):
            if cancel.is_set():
                return False
        return request.approved


class ApprovalRequest:
    def __init__(self, tool: str, args: dict) -> None:
        self.tool, self.args = tool, args
        self.approved = False
        self.answered = threading.Event()

    def answer(self, approved: bool) -> None:
        self.approved = approved
        self.answered.set()


class BlockingSession:
    """Duck-types ToolSession for the episode loop and replay (never closes the real one)."""

    def __init__(self, worker, origin: str = "agent", gate: ApprovalGate | None = None,
                 cancel: threading.Event | None = None) -> None:
        self._worker = worker
        self.origin = origin
        self.gate = gate
        self.cancel = cancel or threading.Event()
        # Only the policy's own calls need approval, not the checker's or a task setup's
        # (a checker may export files): the runner notes each reply's calls here.
        self.from_policy: list[tuple[str, str]] = []

    def note_policy_calls(self, calls: list[tuple[str, Any]]) -> None:
        self.from_policy = [(name, _key(args)) for name, args in calls]

    def _run(self, fn):
        return self._worker.submit(fn, f"{self.origin}").result()

    def call(self, tool: str, args: dict | None = None, *_: Any, **__: Any) -> ToolResult:
        spec = TOOLS.get(tool) if isinstance(tool, str) else None
        key = (tool, _key(args or {}))
        if spec is not None and spec.risky and self.gate is not None and key in self.from_policy:
            self.from_policy.remove(key)
            if not self.gate.approve(tool, dict(args or {}), self.cancel):
                return ToolResult(tool, dict(args or {}), False, error=ToolError(
                    ErrorKind.VALIDATION, f"the user rejected this {tool} call; do it another way or stop"))
        return self._worker.call(tool, args if args is not None else {}, origin=self.origin).result()

    def render(self, views: list[str] | None = None, size: int = 256, **kw: Any) -> ToolResult:
        return self._run(lambda s: s.render(views=views, size=size, **kw))

    def scene(self) -> dict:
        return self._run(lambda s: s.scene())

    def scene_hash(self) -> str:
        return self._run(lambda s: s.scene_hash())

    def reset(self) -> None:
        def reset(s: Any) -> None:
            s.reset()
            self._worker.sig_reset.emit(self.origin)

        self._run(reset)

    @property
    def restarts(self) -> int:
        return self._run(lambda s: s.restarts)

    @property
    def workspace(self):
        return self._run(lambda s: s.workspace)

    @property
    def scratch(self):  # the verifier reads the committed scene from here
        return self._run(lambda s: s.scratch)

    @property
    def ledger(self):  # the verifier rebuilds the episode from the real session's ledger
        return self._run(lambda s: s.ledger)

    # replay_episode opens its session as a context manager: the studio keeps its own open
    def __enter__(self) -> BlockingSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def _key(args: Any) -> str:
    import json

    return json.dumps(args, sort_keys=True, default=str)
