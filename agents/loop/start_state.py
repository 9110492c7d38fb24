"""Building an episode's start state, and telling a broken runtime from a failed task.

`build_start_state` resets the session and runs the caller's `setup(session)` through a
thin proxy that notes every call (the store keeps them so `replay` can rebuild the start).
If the worker died meanwhile (a crash result, a restarted worker, a crash/timeout/sandbox
ToolError) it raises `InfrastructureError`: the episode never started, so a scheduler may
retry it elsewhere without blaming the policy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tools import Session


class InfrastructureError(RuntimeError):
    """The tool runtime failed under the episode (not the policy's fault): retry elsewhere."""


class StartStateError(RuntimeError):
    """A recorded start state could not be rebuilt (a call failed on this runtime)."""


@dataclass(frozen=True)
class StartState:
    """Where an episode starts, as the calls that rebuild it from an empty scene.

    `keep=True` is "continue from here" (the studio's scene, a person's model): the session
    already holds this scene, so nothing is reset or rebuilt and the calls are only recorded
    as the episode's `setup`, which is how replay, export and eval reproduce the start. Used
    as a `setup(session)` (after a reset), it rebuilds the scene call by call: how eval starts
    an episode from a recorded start (`StartState.of_episode`)."""

    calls: tuple[dict, ...] = ()
    keep: bool = False

    def __call__(self, session: Session) -> None:
        for k, c in enumerate(self.calls):
            r = session.call(c["tool"], dict(c.get("args") or {}))
            if not r.ok:
                raise StartStateError(f"start call {k} ({c['tool']}) failed: {r.to_text(300)}")

    @classmethod
    def of_episode(cls, episode: Any) -> StartState:
        """The start state a recorded episode began from (its `setup` calls)."""
        return cls(tuple(dict(c) for c in episode.setup or ()))


def build_start_state(session: Session, setup: Callable[[Any], Any] | StartState | None) -> list[dict]:
    """Reset, run `setup`; returns the calls it made as `[{"tool", "args"}]`. A kept
    `StartState` is the session's scene as it is: no reset, its calls returned as they are."""
    if isinstance(setup, StartState) and setup.keep:
        return [{"tool": c["tool"], "args": dict(c.get("args") or {})} for c in setup.calls]
    capture = _SetupCapture(session)
    restarts = getattr(session, "restarts", 0)

    def worker_died() -> str | None:
        crashed = [r for r in capture.results if _is_crash(r)]
        if crashed:
            return crashed[0].to_text()
        if getattr(session, "restarts", 0) > restarts:
            return "its worker was restarted"
        return None

    try:
        session.reset()
        if setup is not None:
            setup(capture)
    except Exception as exc:
        died = worker_died() or _infra_error(exc)
        if died:
            raise InfrastructureError(f"the tool worker failed during setup: {died}") from exc
        raise
    died = worker_died()
    if died:
        raise InfrastructureError(f"the tool worker died during setup: {died}")
    return capture.calls


class _SetupCapture:
    """The session as `setup` sees it: every call is noted so the store can replay it."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self.calls: list[dict] = []
        self.results: list[Any] = []

    def call(self, name: str, args: dict | None = None, *rest: Any, **kw: Any) -> Any:
        result = self._session.call(name, args or {}, *rest, **kw)
        self.calls.append({"tool": name, "args": dict(args or {})})
        self.results.append(result)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def _infra_error(exc: Exception) -> str | None:
    """A runtime failure (crash, timeout, sandbox) raised as a ToolError, in words."""
    from tools.errors import ErrorKind, ToolError

    if isinstance(exc, ToolError) and exc.kind in (
        ErrorKind.CRASH,
        ErrorKind.TIMEOUT,
        ErrorKind.SANDBOX,
    ):
        return str(exc)
    return None


def _is_crash(result: Any) -> bool:
    error = getattr(result, "error", None)
    return error is not None and str(getattr(error, "kind", "")) in ("crash", "ErrorKind.CRASH")
