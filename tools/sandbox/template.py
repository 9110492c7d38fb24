"""Workers forked from a template: a fresh jailed worker per session without booting Blender.

A worker started from scratch pays for its interpreter, `import bpy` and CadQuery's import
(~1–3 s of CPU) before its first call. The template (tools/worker/template.py) is one process
per supervisor that has imported them once and forks a worker on request; the fork jails
itself exactly as bubblewrap jails a worker started from scratch (tools/worker/selfjail.py:
its own host uid as root, its own user, mount, pid, network, ipc, uts and cgroup namespaces,
the same binds from `jail._filesystem`, no capabilities, no_new_privs, the same seccomp
filter) before it reads anything, and it still serves one session and is killed after it.

The template runs no input of any session, as the supervisor's own child (as root: root, for
it must hand each fork its own host uid). It is started on first use and again if it dies;
when it cannot start, workers start from scratch as before (`MODELWRIGHT_WORKER_TEMPLATE=0`
chooses that always). A forked worker (as root the worker itself, pid 1 of its pid namespace;
else its wrapper) is not the supervisor's child: `ForkedProcess`
stands for its `Popen`, with a pidfd for its life and the template's word for its exit code.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import os
import queue
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tools.protocol import recv_with_fds, send_with_fds
from tools.sandbox import jail

log = logging.getLogger("modelwright.sandbox")
ENV = "MODELWRIGHT_WORKER_TEMPLATE"
RENDER_ENV = "MODELWRIGHT_TEMPLATE_RENDERER"
START_DEADLINE_S = 120.0


WORKER = "tools.worker.template"


@dataclass(frozen=True)
class Kind:
    """A kind of template: the module it runs (`python -m MODULE --sock FD`, serving forks with
    tools/worker/template.py `serve`), the variable that turns it off, and what it is called."""

    module: str = WORKER
    switch: str = ENV
    what: str = "worker template"


WORKERS = Kind()


def enabled(kind: Kind = WORKERS) -> bool:
    return os.environ.get(kind.switch, "1") != "0"


def renderer_in_template() -> bool:
    """Whether the template starts Blender's renderer before it forks, so a fork's first render
    is not a cold one (~90 ms instead of ~330: its GPU context and compiled shaders are the
    template's copy). Only with software rendering: with a GPU (/dev/dri) a context holds
    kernel objects that forks would share, so each worker makes its own.
    `MODELWRIGHT_TEMPLATE_RENDERER=0` turns it off."""
    return os.environ.get(RENDER_ENV, "1") != "0" and not os.path.exists("/dev/dri")


def renderer_warm() -> bool:
    """Whether the shared template, if it runs, holds a started renderer."""
    tpl = _shared.get(WORKERS)
    return bool(tpl is not None and tpl.alive and tpl.renderer_warm)


class DaemonLauncher:
    """`subprocess.Popen` run on one daemon thread that lives as long as this process: a child
    started there with PR_SET_PDEATHSIG (a template) dies with the process, never before it.
    (A ThreadPoolExecutor's thread is joined at the interpreter's exit while the main thread
    still runs, and a template it started would die then and be reported as a death.)"""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def __call__(self, cmd: list[str], **kwargs) -> subprocess.Popen:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, daemon=True, name=self._name)
                self._thread.start()
        done = concurrent.futures.Future()
        self._jobs.put((cmd, kwargs, done))
        return done.result()

    def _serve(self) -> None:
        while True:
            cmd, kwargs, done = self._jobs.get()
            try:
                done.set_result(subprocess.Popen(cmd, **kwargs))
            except BaseException as e:  # noqa: BLE001 - the caller's to raise
                done.set_exception(e)


class TemplateError(Exception):
    """The template could not start or fork: the caller starts a worker from scratch."""


class ForkedProcess:
    """The `subprocess.Popen` face of a forked worker's wrapper (pid, stdin, stdout, poll, wait).

    Its pidfd stays open until `close` (the worker's kill, once it is dead): threads that ask
    `poll` side by side (the session's, the memory watch's) never see it closed under them,
    and no descriptor number is ever closed twice."""

    def __init__(self, template: Template, pid: int, pidfd: int, stdin, stdout):
        self._template = template
        self.pid = pid
        self._pidfd = pidfd
        self._lock = threading.Lock()
        self.stdin = stdin
        self.stdout = stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        with self._lock:
            if self.returncode is not None:
                return self.returncode
            if self._pidfd < 0:  # closed: it was dead and reaped before
                self.returncode = -9
                return self.returncode
            ready, _, _ = select.select([self._pidfd], [], [], 0)
            if not ready:
                return None
        code = self._template.exit_code(self.pid, timeout=5.0)  # the template's word, at once
        with self._lock:
            if self.returncode is None:
                self.returncode = -9 if code is None else code
            return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        with self._lock:
            fd, code = self._pidfd, self.returncode
        if code is None and fd >= 0:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired("worker", timeout)
        code = self.poll()
        return -9 if code is None else code

    def close(self) -> None:
        """Forget the process: its pidfd closed, its exit code dropped (call it once dead)."""
        with self._lock:
            fd, self._pidfd = self._pidfd, -1
        if fd >= 0:
            os.close(fd)
        self._template.forget(self.pid)

    def __del__(self):
        fd = getattr(self, "_pidfd", -1)
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


class Template:
    """One template process and the thread that reads its replies."""

    def __init__(self, launch: Callable[..., subprocess.Popen], kind: Kind = WORKERS):
        self.kind = kind
        self._home = _private_dir()
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = parent
        self._log = open(os.path.join(self._home, "template.log"), "ab")
        env = dict(jail.worker_env(self._home))
        # Blender's session folder (blender_XXXXXX) is made in TMPDIR, or /tmp when TMPDIR does
        # not exist, and only removed by Blender's own exit: the template is killed, so it is
        # made in the template's home, which `close` removes
        os.makedirs(env["TMPDIR"], mode=0o700, exist_ok=True)
        if kind == WORKERS and renderer_in_template():
            # Mesa (llvmpipe) draws on the calling thread and keeps no disk cache: a fork has
            # every thread and queue it needs, for it has no other (a fork copies one thread)
            env.update(LP_NUM_THREADS="0", MESA_SHADER_CACHE_DISABLE="true",
                       MODELWRIGHT_TEMPLATE_RENDERER="1")
        argv = [sys.executable, "-s", "-P", "-m", kind.module, "--sock", str(child.fileno())]
        try:
            self.proc = launch(argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log, env=env,
                               cwd=self._home, start_new_session=True, close_fds=True,
                               pass_fds=(child.fileno(),))
        finally:
            child.close()
        self._lock = threading.Lock()
        self._waiting: dict[int, dict] = {}  # request id -> {"event", "reply", "fd"}
        self._codes: dict[int, int] = {}
        self._exited = threading.Condition(self._lock)
        self._next = 0
        self.alive = True
        self._closing = False
        self._ready = False
        self.died = False  # it exited on its own: its home (and log) stays for a look
        ready, _ = self._recv(time.monotonic() + START_DEADLINE_S)
        if not ready or not ready.get("ready"):
            self.close()
            raise TemplateError(f"the {kind.what} failed to start: {(ready or {}).get('error', 'no reply')}; "
                                f"see {self._home}/template.log")
        self.startup_s = float(ready.get("startup_s", 0.0))
        self.renderer_warm = bool(ready.get("renderer_warm"))
        self._ready = True
        threading.Thread(target=self._read_loop, daemon=True, name="mw-template").start()

    def _recv(self, deadline: float | None = None) -> tuple[dict | None, list[int]]:
        if deadline is not None:
            ready, _, _ = select.select([self._sock], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None, []
        return recv_with_fds(self._sock, 1 << 16)

    def _read_loop(self) -> None:
        while True:
            try:
                msg, fds = self._recv()
            except (OSError, ValueError):
                msg, fds = None, []
            with self._lock:
                if msg is None:
                    # At the interpreter's exit the keeper thread that started the template ends
                    # first, and its PR_SET_PDEATHSIG kills the template: not a death to report
                    if not self._closing and threading.main_thread().is_alive():
                        self.died = True
                        log.warning("the %s exited; its log: %s/template.log", self.kind.what, self._home)
                    self.alive = False
                    for w in self._waiting.values():
                        w["event"].set()
                    self._exited.notify_all()
                    for fd in fds:
                        os.close(fd)
                    return
                if "exited" in msg:
                    self._codes[int(msg["exited"])] = int(msg["code"])
                    self._exited.notify_all()
                    continue
                w = self._waiting.get(msg.get("id"))
                if w is None:
                    for fd in fds:
                        os.close(fd)
                    continue
                w["reply"], w["fd"] = msg, (fds[0] if fds else -1)
                for fd in fds[1:]:
                    os.close(fd)
                w["event"].set()

    def fork(self, request: dict, fds: list[int], timeout: float = 30.0) -> tuple[int, int]:
        """(pid, pidfd) of a new worker's wrapper; raises TemplateError."""
        with self._lock:
            if not self.alive:
                raise TemplateError(f"the {self.kind.what} is gone")
            self._next += 1
            rid = self._next
            waiter = {"event": threading.Event(), "reply": None, "fd": -1}
            self._waiting[rid] = waiter
        try:
            try:
                send_with_fds(self._sock, dict(request, id=rid), fds)
            except OSError as e:
                raise TemplateError(f"the {self.kind.what} is gone ({e})") from None
            if not waiter["event"].wait(timeout) or waiter["reply"] is None:
                raise TemplateError(f"the {self.kind.what} did not fork in time")
            reply = waiter["reply"]
            if "error" in reply or waiter["fd"] < 0:
                if waiter["fd"] >= 0:
                    os.close(waiter["fd"])
                raise TemplateError(f"the {self.kind.what} could not fork: {reply.get('error')}")
            return int(reply["pid"]), waiter["fd"]
        finally:
            with self._lock:
                self._waiting.pop(rid, None)

    def exit_code(self, pid: int, timeout: float) -> int | None:
        end = time.monotonic() + timeout
        with self._lock:
            while pid not in self._codes and self.alive:
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self._exited.wait(left)
            return self._codes.get(pid)

    def forget(self, pid: int) -> None:
        with self._lock:
            self._codes.pop(pid, None)

    @property
    def home(self) -> str:
        return self._home

    def close(self) -> None:
        """Kill the template and remove its home (with Blender's session folder in it), unless
        it had died on its own or failed to start: then its log stays."""
        self._closing = True
        self.alive = False
        try:
            self._sock.close()
        except OSError:
            pass
        try:
            self.proc.kill()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self._log.close()
        if self._ready and not self.died and self.proc.poll() is not None:
            shutil.rmtree(self._home, ignore_errors=True)


def _private_dir() -> str:
    import tempfile

    d = tempfile.mkdtemp(prefix="modelwright-template-")
    os.chmod(d, 0o700)
    return d


_shared: dict[Kind, Template] = {}
_shared_lock = threading.Lock()


def shared(launch: Callable[..., subprocess.Popen], kind: Kind = WORKERS) -> Template | None:
    """This process's template of `kind`, started now if none is alive; None when templates
    are off or it cannot start (then its programs start from scratch, as the log says)."""
    if not enabled(kind):
        return None
    with _shared_lock:
        tpl = _shared.get(kind)
        if tpl is not None and tpl.alive and tpl.proc.poll() is None:
            return tpl
        if tpl is not None:
            tpl.close()
            del _shared[kind]
        try:
            tpl = _shared[kind] = Template(launch, kind)
        except (TemplateError, OSError) as e:
            log.warning("forks of the %s start from scratch: %s", kind.what, e)
            return None
        return tpl


def start_soon(launch: Callable[..., subprocess.Popen], kind: Kind = WORKERS) -> None:
    """Start this process's template of `kind` in the background, if none runs: a command
    that will fork from it (an eval) boots it while it loads its model. The first fork waits
    for it as it would have; off or failing, nothing changes (`shared` logs why)."""
    if enabled(kind):
        threading.Thread(target=shared, args=(launch, kind), daemon=True,
                         name=f"mw-start-{kind.what.replace(' ', '-')}").start()


def spawn(launch: Callable[..., subprocess.Popen], argv: list[str], env: dict, scratch: str,
          uid: int | None, log_fd: int, seccomp_fd: int | None, kind: Kind = WORKERS,
          readonly: tuple[str, ...] = ()) -> ForkedProcess | None:
    """A program forked from the template of `kind` (a worker by default), jailed like
    `jail.wrap(argv, scratch, [], seccomp_fd, uid, readonly)`'s; None when there is no
    template (the caller starts one from scratch)."""
    tpl = shared(launch, kind)
    if tpl is None:
        return None
    jailed = jail.mode() == "bwrap"
    spec = jail.self_jail_spec(scratch, uid, readonly) if jailed else {}
    in_r, in_w = os.pipe2(os.O_CLOEXEC)
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    fds = [in_r, out_w, log_fd] + ([seccomp_fd] if jailed and seccomp_fd is not None else [])
    try:
        pid, pidfd = tpl.fork({"spec": spec, "argv": argv, "env": env, "jailed": jailed}, fds)
    except TemplateError as e:
        for fd in (in_w, out_r):
            os.close(fd)
        log.warning("one starts from scratch: %s", e)
        return None
    finally:
        os.close(in_r)
        os.close(out_w)
    return ForkedProcess(tpl, pid, pidfd, os.fdopen(in_w, "wb"), os.fdopen(out_r, "rb"))


def close_shared() -> None:
    with _shared_lock:
        tpls = list(_shared.values())
        _shared.clear()
    for tpl in tpls:
        tpl.close()


# At exit the template is killed and its home removed (a supervisor's own exit handler, which
# closes its workers, is registered later and so runs first)
atexit.register(close_shared)
