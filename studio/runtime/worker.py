"""The one thread that owns the studio's ToolSession (a session is not thread-safe).

Everything that touches the scene - manual calls, the agent's calls (through
`BlockingSession`), viewport renders, task setup, replay - becomes a job on this thread's
queue. Viewport renders are not queued: only the newest request is kept, so a drag never
leaves a backlog of stale frames; they run when no other job is waiting.

One worker, one episode: the person's scene is one episode, and the agent continuing it is
part of it, so they share the worker. Once untrusted input ran in it (a `cadquery_script` or
an `import_file`, whoever sent it), that worker may be patched in ways no scene shows, so a
new episode (an empty scene, a task's start, an agent run on a new scene) gets a fresh worker
first (`fresh_episode`); a worker that ran none is kept.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QThread, Signal

from tools import Session
from tools.runtime.session import UNTRUSTED_INPUT_TOOLS

log = logging.getLogger(__name__)


@dataclass
class Job:
    fn: Callable[[Any], Any]  # fn(session) -> value, run on the worker thread
    label: str = ""
    on_done: Callable[[Any], None] | None = None  # called on the GUI thread with the value
    on_error: Callable[[BaseException], None] | None = None
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)


@dataclass
class ViewRequest:
    """A viewport render: `args` for the `render` tool; `serial` orders requests."""
    args: dict
    serial: int
    draft: bool = False  # a low-resolution frame while dragging


class SessionWorker(QThread):
    sig_ready = Signal()  # the session is up
    sig_failed = Signal(str)  # the session could not start
    sig_busy = Signal(bool)
    sig_view = Signal(object, object)  # (ViewRequest, ToolResult)
    sig_call = Signal(object, str)  # (ToolResult, origin) for every tool call made through `call`
    sig_reset = Signal(str)  # the scene was emptied (origin)
    sig_deliver = Signal(object, object)  # internal: (callback, value) onto the GUI thread

    def __init__(self, session_factory: Callable[[], Any], parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("mw-session")
        self._factory = session_factory
        self._jobs: deque[Job] = deque()
        self._view: ViewRequest | None = None
        self._cond = threading.Condition()
        self._stop = False
        self.session: Any = None
        self.tainted = False  # untrusted input ran in the current worker
        self.renewals = 0  # workers replaced for a new episode
        self.sig_deliver.connect(self._deliver)

    # -- from any thread ---------------------------------------------------------------
    def submit(self, fn: Callable[[Any], Any], label: str = "", on_done=None, on_error=None) -> concurrent.futures.Future:
        job = Job(fn, label, on_done, on_error)
        with self._cond:
            if self._stop:
                job.future.set_exception(RuntimeError("the studio's tool session has stopped"))
                return job.future
            self._jobs.append(job)
            self._cond.notify()
        return job.future

    def call(self, tool: str, args: dict, origin: str = "human", on_done=None) -> concurrent.futures.Future:
        """One tool call; every result is also broadcast as `sig_call` for the studio to follow."""
        def run(session: Session) -> Any:
            result = session.call(tool, args)
            self.sig_call.emit(result, origin)
            return result

        return self.submit(run, f"{origin}:{tool}", on_done)

    def fresh_episode(self) -> concurrent.futures.Future:
        """Queue the start of a new episode: a worker that ran untrusted input is closed (it
        dies with its scratch) and a fresh one opened; an untouched one is kept. The jobs
        queued after this one run on the new worker."""
        def swap(_session: Any) -> bool:
            if not self.tainted:
                return False
            old, self.session = self.session, _Noting(self._factory(), self)
            self.tainted = False
            self.renewals += 1
            old.close()
            return True

        return self.submit(swap, "fresh worker for a new episode")

    def request_view(self, request: ViewRequest) -> None:
        with self._cond:
            self._view = request  # replaces any older, not yet rendered request
            self._cond.notify()

    def stop(self, wait_ms: int = 15000) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        self.wait(wait_ms)

    # -- the worker thread ---------------------------------------------------------------
    def run(self) -> None:
        try:
            self.session = _Noting(self._factory(), self)
        except Exception as exc:
            log.exception("tool session failed to start")
            self.sig_failed.emit(f"The tool runtime could not start: {exc}")
            self._fail_pending(exc)
            return
        self.sig_ready.emit()
        try:
            while True:
                with self._cond:
                    while not self._stop and not self._jobs and self._view is None:
                        self._cond.wait()
                    if self._stop:
                        break
                    if self._jobs:  # jobs first: a viewport frame never delays a call
                        job, view = self._jobs.popleft(), None
                    else:
                        job, view, self._view = None, self._view, None
                if job is not None:
                    self._run_job(job)
                elif view is not None:
                    self._run_view(view)
        finally:
            self._fail_pending(RuntimeError("the studio's tool session has stopped"))
            try:
                self.session.close()
            except Exception:
                log.exception("closing the tool session failed")

    def _run_job(self, job: Job) -> None:
        self.sig_busy.emit(True)
        try:
            value = job.fn(self.session)
        except BaseException as exc:  # handed back to whoever asked
            log.debug("job %s failed: %s", job.label, traceback.format_exc())
            job.future.set_exception(exc)
            if job.on_error is not None:
                self.sig_deliver.emit(job.on_error, exc)
            else:
                self.sig_failed.emit(f"{job.label or 'a studio job'} failed: {exc}")
        else:
            job.future.set_result(value)
            if job.on_done is not None:
                self.sig_deliver.emit(job.on_done, value)
        finally:
            self.sig_busy.emit(False)

    def _run_view(self, view: ViewRequest) -> None:
        try:
            result = self.session.call("render", view.args)
        except Exception as exc:
            self.sig_failed.emit(f"viewport render failed: {exc}")
            return
        self.sig_view.emit(view, result)

    def _fail_pending(self, exc: BaseException) -> None:
        with self._cond:
            jobs, self._jobs = list(self._jobs), deque()
        for job in jobs:
            if not job.future.done():
                job.future.set_exception(exc)

    def _deliver(self, callback: Callable[[Any], None], value: Any) -> None:
        callback(value)


class _Noting:
    """The session as jobs see it: notes when untrusted input is sent to its worker (before
    the call: code that failed may still have run)."""

    def __init__(self, session: Any, owner: SessionWorker) -> None:
        self._session, self._owner = session, owner

    def call(self, tool: Any, args: Any = None, *rest: Any, **kw: Any) -> Any:
        if tool in UNTRUSTED_INPUT_TOOLS:
            self._owner.tainted = True
        return self._session.call(tool, args, *rest, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)
