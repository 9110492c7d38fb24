"""The worker template: a process that has imported bpy, CadQuery and the worker once, and
forks a fresh worker per session on the supervisor's request (`python -m tools.worker.template`).

It never runs any session's input: it reads fork requests from the supervisor's socket and
nothing else, and it keeps no state a worker could change (a fork's memory is its own copy).
Each fork jails itself (tools/worker/selfjail.py) before it reads its first request, so a
worker forked from the template has the guarantees of one started by bubblewrap from
scratch: its own host uid as root, its own namespaces, its scratch alone writable, no
capabilities, no_new_privs and the seccomp filter; one worker serves one session.

Protocol, over a SOCK_SEQPACKET unix socket (fd given by --sock): the template says
{"ready": true, ...} once; a request is {"id", "spec", "argv", "env", "jailed"} with the
worker's stdin, stdout and log (and the seccomp filter when jailed) as SCM_RIGHTS; the reply
is {"id", "pid"} with a pidfd of the new worker (as root; else of its wrapper), or
{"id", "error"}; whenever one of them exits the template says {"exited": pid, "code": returncode}.
"""

from __future__ import annotations

import argparse
import gc
import os
import select
import signal
import socket
import sys
import time
import warnings
from collections.abc import Callable

from tools.protocol import recv_with_fds, send_with_fds

_recv = recv_with_fds
_send = send_with_fds
_WHAT = "worker"  # what the forks are, in their log's last word


def _preload() -> dict:
    t0 = time.perf_counter()
    from tools.worker import lazy_cq, runtime, state  # noqa: F401  (bpy and every worker module)
    from tools.worker import main as worker_main  # noqa: F401

    lazy_cq.preload()
    warm = os.environ.get("MODELWRIGHT_TEMPLATE_RENDERER") == "1"
    if warm:  # start the renderer here once (tools/sandbox/template.py renderer_in_template)
        import tempfile

        from tools.worker import render

        with tempfile.TemporaryDirectory(prefix="mw-template-render-") as out:
            render.Renderer(out).warm_up()
    state.factory_reset_for_forks()
    # What the template holds is frozen out of the cyclic collector: a fork's collections then
    # never walk (and so never copy) the pages of the template's objects, bpy's and OCCT's.
    gc.collect()
    gc.freeze()
    return {"startup_s": time.perf_counter() - t0, "renderer_warm": warm}


def _run_worker(argv: list[str]) -> None:
    from tools.worker import main as worker_main

    sys.argv = ["tools.worker", *argv]
    worker_main.main()


def _child(req: dict, fds: list[int], sock: socket.socket, run: Callable[[list[str]], None]) -> None:
    """In the fork: jail, take the program's pipes as 0/1/2, then run it (`run(argv)`)."""
    try:
        sock.close()
        stdin, stdout, log = fds[:3]
        program = None
        if req.get("jailed"):
            program = _read_all(fds[3])
        from tools.worker import selfjail

        selfjail.die_with_parent()
        os.dup2(log, 2)  # the jail's own errors reach the worker's log
        if req.get("jailed"):
            selfjail.enter(req["spec"], program, pid_one=bool(req.get("pid_one")))
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        os.closerange(3, 65536)
        os.environ.clear()
        os.environ.update(req["env"])
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        run(list(req["argv"]))
        code = 0
    except SystemExit as e:  # as the interpreter would exit
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException as e:  # noqa: BLE001 - a child that fails says why in its log, then exits
        try:
            os.write(2, f"modelwright {_WHAT} (forked): {type(e).__name__}: {e}\n".encode())
        except OSError:
            pass
        code = 70
    os._exit(code)


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        b = os.read(fd, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(fd)
    return b"".join(chunks)


def main() -> None:
    serve(_preload, _run_worker)


def serve(preload: Callable[[], dict], run: Callable[[list[str]], None], what: str = "worker") -> None:
    """A template's life (`--sock FD` on the command line): `preload()` once (it returns what
    `ready` says besides), then fork a jailed child per request, which runs `run(argv)` and
    exits. The worker's template is this module's `main`; the geometry checker's is
    training/tasks/checker_template.py, with its own preload and program."""
    global _WHAT
    _WHAT = what
    parser = argparse.ArgumentParser()
    parser.add_argument("--sock", type=int, required=True)
    opts = parser.parse_args()
    from tools.worker import selfjail

    selfjail.die_with_parent()
    sock = socket.socket(fileno=opts.sock)
    warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*fork.*")
    try:
        info = preload()
    except Exception as e:  # noqa: BLE001
        _send(sock, {"ready": False, "error": f"{type(e).__name__}: {e}"})
        return
    own_pidns = _own_pid_namespace()
    info["one_fork"] = own_pidns is not None
    # a worker's exit wakes the loop at once: its code reaches the supervisor within a moment
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    _send(sock, {"ready": True, "pid": os.getpid(), **info})
    while True:
        _reap(sock)
        ready, _, _ = select.select([sock, wake_r], [], [], 1.0)
        if wake_r in ready:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
        if sock not in ready:
            continue
        try:
            req, fds = _recv(sock)
        except (OSError, ValueError):
            return
        if req is None:
            return  # the supervisor closed its end
        req["pid_one"] = bool(req.get("jailed")) and own_pidns is not None
        try:
            pid = _fork(own_pidns if req["pid_one"] else None)
        except OSError as e:
            for fd in fds:
                os.close(fd)
            _send(sock, {"id": req.get("id"), "error": f"fork: {e}"})
            continue
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.close(wake_r)
            os.close(wake_w)
            if own_pidns is not None:
                os.close(own_pidns)
            _child(req, fds, sock, run)
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        try:
            _send(sock, {"id": req.get("id"), "pid": pid}, [pidfd])
        finally:
            os.close(pidfd)


def _own_pid_namespace() -> int | None:
    """As root, a descriptor of this process's pid namespace: each jailed worker is then forked
    into a new pid namespace of its own (`_fork`), as its pid 1, and needs no wrapper process
    outside it (one fork of this ~400 MB process per worker instead of two). None where that
    cannot be done (not root, or no CAP_SYS_ADMIN): the worker unshares it and forks itself."""
    if os.geteuid() != 0:
        return None
    fd = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.unshare(os.CLONE_NEWPID)
        os.setns(fd, os.CLONE_NEWPID)
    except OSError:
        os.close(fd)
        return None
    return fd


def _fork(own_pidns: int | None) -> int:
    """os.fork; with `own_pidns`, the child is pid 1 of a new pid namespace, and this process's
    children after it are in its own namespace again."""
    if own_pidns is None:
        return os.fork()
    os.unshare(os.CLONE_NEWPID)
    try:
        pid = os.fork()
    except BaseException:
        os.setns(own_pidns, os.CLONE_NEWPID)
        raise
    if pid:
        try:
            os.setns(own_pidns, os.CLONE_NEWPID)
        except OSError:  # never seen: the next fork would fail too, so this one serves no one
            os.kill(pid, signal.SIGKILL)
            raise
    return pid


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        try:
            _send(sock, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})
        except OSError:
            return


if __name__ == "__main__":
    main()
