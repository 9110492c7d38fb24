"""The trusted side of the tool runtime: worker processes, the warm pool and sessions.

The supervisor never imports bpy or OCP. It validates every call against its spec, sends it
to a jailed worker, and enforces the call's deadline from outside with SIGKILL (a hung OCCT
boolean runs in C where no signal handler ever runs). A worker that dies or is killed is
replaced by a fresh one that loads the session's last commit from disk, so the caller gets
a typed error and the scene as it was before the failed call.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import threading
import time

from tools.errors import ErrorKind, ToolError
from tools.protocol import (
    HEADER,
    ProtocolError,
    check_reply_id,
    decode_payload,
    json_length,
    write_message,
)
from tools.results import WorkerDied, WorkerTimedOut, commit_number
from tools.sandbox import diskwatch, identity, jail, memwatch, scratch, shader_cache, template
from tools.text import printable
from tools.trust import confined, replies

log = logging.getLogger("modelwright.tools")
STARTUP_DEADLINE_S = 120.0
# Workers and the worker template are started from one daemon thread that lives as long as
# this process: PR_SET_PDEATHSIG (bubblewrap's --die-with-parent) fires when the *thread* that
# forked them exits. (A pooled thread is joined at the interpreter's exit while the main thread
# still runs: the template died first and the exit said "the worker template exited".)
_launch = template.DaemonLauncher("mw-worker-keeper")


def start_template_soon() -> None:
    """Boot the worker template in the background (Blender's import, seconds): workers fork
    from it later without waiting for it."""
    template.start_soon(_launch)


# Scratch removals of released workers (unmount, delete): one thread, off the episodes' path.
_KEEPER_CLEAN = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mw-scratch-clean")


def _remove_scratch(path: str) -> None:
    diskwatch.unmount(path)
    shutil.rmtree(path, ignore_errors=True)


class WorkerProcess:
    """One jailed worker holding Blender and CadQuery, with its own scratch dir and, as root,
    its own host uid (tools/sandbox/identity.py) for as long as it lives; its memory is watched
    (tools/sandbox/memwatch.py) from its start to its kill, and its scratch is capped (a file system of
    its own as root, else watched: tools/sandbox/diskwatch.py)."""

    def __init__(self, scratch: str, *args, **kwargs):
        self.identity = identity.lease()
        self.stopped_for: str | None = None  # why the supervisor stopped it, if it did
        self.stop_handles: list[int] = []  # pidfds of the processes a watch killed (memwatch.stop)
        try:
            self._boot(scratch, *args, **kwargs)
        except BaseException:
            if hasattr(self, "proc"):
                self.kill()  # releases the uid once its processes are dead
            else:
                self.identity.release()
            raise

    def _boot(self, scratch: str, restore: bool = False,
              test_hooks: bool = False, preload_cad: bool = False, warm_render: bool = True,
              restore_upto: int | None = None, spare: bool = False):
        self.scratch = scratch
        # the jail's only writable folder is its scratch: no caller's folder is ever bound in
        # (a command delivers files out of here through tools/trust/outbox.py)
        self.workspace = os.path.join(scratch, "workspace")
        # -s -P: no user site and no cwd on sys.path, for scratch is the session's to write into
        limits = jail.Limits()
        self.memory_cap_mb = limits.memory_mb  # RLIMIT_DATA inside, and the watch's cap
        self.disk_cap_mb = limits.disk_mb  # what the scratch may hold (tools/sandbox/diskwatch.py)
        self._disk_at = 0.0  # when the disk watch last walked this scratch
        self.disk_full = False  # stopped for its disk (then `stopped_for` says so)
        os.makedirs(scratch, exist_ok=True)
        if restore:  # a worker stopped at its disk cap left it full: room for the next one
            diskwatch.make_room(scratch, self.disk_cap_mb, restore_upto)
        else:  # as root: a file system of exactly the cap, mounted on the empty scratch
            diskwatch.provide(scratch, self.disk_cap_mb, self.identity.uid)
        self.disk_mounted = os.path.ismount(scratch)
        for d in (self.workspace, os.path.join(scratch, "tmp")):
            os.makedirs(d, exist_ok=True)
        self.rss_mb = 0.0
        self.versions: dict = {}
        argv = [sys.executable, "-s", "-P", "-m", "tools.worker", "--scratch", scratch,
                "--workspace", self.workspace, *limits.argv()]
        if restore:
            argv.append("--restore")
            if restore_upto is not None:
                argv += ["--restore-upto", str(int(restore_upto))]
        if test_hooks:
            argv.append("--test-hooks")
        if preload_cad:
            argv.append("--preload-cad")
        if not warm_render:
            argv.append("--no-warm-render")
        os.chmod(scratch, 0o700)  # the session's files: for the jail and the supervisor only
        uid = self.identity.uid
        if restore:  # the dead worker's files, and its uid is another worker's from now on
            identity.hand_tree(scratch, uid)
        for d in (scratch, self.workspace, os.path.join(scratch, "tmp")):
            jail.give_to_jail(d, uid)
        if not restore:  # a restored worker keeps the cache its session's worker had
            # a fork of a template whose renderer started has Mesa's shaders already, with
            # Mesa's disk cache off: a copy of the seed (~130 files) would go unread
            shader_cache.give(scratch, uid, seed=not template.renderer_warm())
        # never through a link or a FIFO: a restored worker's scratch was the dead worker's to
        # write, and what it planted there must neither aim nor block the supervisor's writes
        self._log = confined.open_append(scratch, "worker.log")
        env = dict(jail.worker_env(scratch), MESA_SHADER_CACHE_DIR=shader_cache.worker_dir(scratch))
        fd = jail.seccomp_fd()
        try:
            # forked from the template (bpy and CadQuery imported once, the same jail built by
            # the fork itself), or, without one, started from scratch in bubblewrap
            self.forked = template.spawn(_launch, self._fork_argv(argv, restore, spare), env, scratch,
                                         uid, self._log.fileno(), fd)
            self.proc = self.forked or _launch(
                jail.wrap(argv, scratch, [], fd, uid), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self._log, env=env, cwd=scratch, start_new_session=True, close_fds=True,
                pass_fds=() if fd is None else (fd,))
        finally:
            if fd is not None:
                os.close(fd)
        memwatch.WATCH.add(self)
        try:
            ready, _ = self._read(time.monotonic() + STARTUP_DEADLINE_S)
        except (WorkerDied, WorkerTimedOut) as e:
            self.kill()
            raise ToolError(ErrorKind.CRASH, f"the worker failed to start ({type(e).__name__}); see {scratch}/worker.log") from None
        if not ready.get("ready"):
            self.kill()
            raise ToolError(ErrorKind.CRASH, f"the worker failed to start: {printable(ready.get('error', '')[-800:])}")
        self.versions = ready.get("versions", {})
        self.startup_s = ready.get("startup_s", 0.0)
        self.ready_commit = commit_number(ready.get("commit"))  # a restored one's: the one it kept
        if warm_render and not restore:  # it has run no session's input yet (tools/sandbox/shader_cache.py)
            shader_cache.take_seed(scratch)

    @staticmethod
    def _fork_argv(argv: list[str], restore: bool, spare: bool = False) -> list[str]:
        """The worker's options for a fork of the template. A spare (booted in the background,
        before anyone waits for it) renders once before it is ready, so its session's first
        render costs what a kept worker's does (bench_trust.py: 236 ms instead of 111 without
        it). A fork someone waits for skips that warm-up when a shader cache seed exists: it
        pays ~0.1 s on its first render, if it renders, not on its start."""
        out = argv[argv.index("tools.worker") + 1:]
        if template.renderer_warm() and "--no-warm-render" not in out:
            out.append("--no-warm-render")  # its renderer is the template's, started already
            return out
        if spare:
            return out
        if not restore and shader_cache.seeded() and "--no-warm-render" not in out:
            out.append("--no-warm-render")
        return out

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def host_pids(self) -> list[int]:
        """The wrapper's pid and every descendant's, as the host sees them."""
        return memwatch.process_tree(self.proc.pid)

    def request(self, payload: dict, deadline_s: float) -> tuple[dict, list[bytes]]:
        if not self.alive:
            raise WorkerDied()
        payload = dict(payload, id=secrets.randbits(62))  # not guessable ahead by the worker
        try:
            write_message(self.proc.stdin, payload)
        except (BrokenPipeError, OSError, ValueError):
            raise WorkerDied() from None
        try:
            reply, blobs = self._read(time.monotonic() + deadline_s, payload)
        except WorkerDied:
            self._disk_verdict()  # did it die for want of room (ENOSPC in a commit)?
            raise
        if self._disk_verdict():  # the call filled the scratch: the next one would fail
            self.kill()
            raise WorkerDied(self.stopped_for or "")
        self.rss_mb = float(reply.get("rss_mb", self.rss_mb))  # held to the schema in _read
        return reply, blobs

    def check_disk(self, every_s: float = 0.0) -> int | None:
        """Stop the worker if its scratch is full (tools/sandbox/diskwatch.py); the bytes it holds, or
        None when not read now (a watched, unmounted scratch is walked at most every `every_s`)."""
        if not self.alive or self.stopped_for:
            return None
        now = time.monotonic()
        if not self.disk_mounted and now < self._disk_at + every_s:
            return None
        self._disk_at = now
        pids = self.host_pids()
        reason, used = diskwatch.over(self.scratch, self.disk_cap_mb, pids)
        if reason:
            log.warning("worker %s stopped at %d MB of disk, its cap %d MB: %s", self.scratch,
                        used >> 20, self.disk_cap_mb, reason)
            self.disk_full = True
            memwatch.stop(self, pids, reason)
        return used

    def _disk_verdict(self) -> str | None:
        """After a reply or a death: whether the worker is (to be) stopped for its disk; its
        `stopped_for` says why."""
        if self.stopped_for is None:
            if self.alive:
                self.check_disk()
            else:  # dead already (ENOSPC in a commit): what it left tells
                reason, _ = diskwatch.over(self.scratch, self.disk_cap_mb, [])
                if reason:
                    self.stopped_for, self.disk_full = reason, True
        return self.disk_full

    def _read(self, deadline: float, request: dict | None = None) -> tuple[dict, list[bytes]]:
        """One frame, each read bounded by `deadline`; a malformed or oversized frame, or a
        reply to another request, kills the worker (the caller sees a `crash`)."""
        fd = self.proc.stdout.fileno()
        try:
            n = json_length(self._read_exact(fd, HEADER.size, deadline))
            payload, sizes = decode_payload(self._read_exact(fd, n, deadline))
            if request is None:
                replies.check_ready(payload)
            else:
                check_reply_id(request, payload)
                replies.check_reply(request.get("op"), payload, sizes)
            blobs = [self._read_exact(fd, s, deadline) for s in sizes]
            if request is not None:  # a render that is not the PNGs it claims: a bad reply
                replies.check_images(request, payload, blobs)
        except ProtocolError as e:
            log.info("worker %s killed: %s", self.scratch, e)  # the caller's crash says why
            self.kill()
            raise WorkerDied(f"it sent a bad reply ({e})") from None
        return payload, blobs

    def _read_exact(self, fd: int, n: int, deadline: float) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerTimedOut()
            ready, _, _ = select.select([fd], [], [], min(left, 0.5))
            if not ready:
                if not self.alive:
                    raise WorkerDied()
                continue
            chunk = os.read(fd, min(n - len(buf), 1 << 20))
            if not chunk:
                raise WorkerDied()
            buf += chunk
        return bytes(buf)

    def kill(self) -> None:
        memwatch.WATCH.discard(self)
        pids = self.host_pids() if self.alive else []
        handles = _pidfds(pids)  # names its process for good, unlike a pid
        # and those a watch stopped (tools/sandbox/memwatch.py): the wrapper may be gone before them
        handles += self.stop_handles
        self.stop_handles = []
        for pid in reversed(pids):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        _wait_exited(handles, time.monotonic() + 10)  # the jail's, not only the wrapper's
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        if self.forked is not None:
            self.forked.close()
        self._log.close()
        self.identity.release()  # a uid some process still runs as is never leased again


def _pidfds(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            out.append(os.pidfd_open(pid))
        except OSError:
            continue  # gone already
    return out


def _wait_exited(fds: list[int], deadline: float) -> None:
    """Wait until every process behind `fds` has exited (a pidfd reads ready then), or the
    deadline; close them. The processes in the jail's pid namespace outlive the wrapper the
    supervisor waits for by a moment, and the worker's uid is free only once they are gone."""
    try:
        for fd in fds:
            select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
    finally:
        for fd in fds:
            os.close(fd)


class WorkerPool:
    """Keeps `size` fresh workers warm; a worker serves exactly one session, then is killed.

    No state crosses a session boundary: whatever a session's code did to the interpreter
    (monkeypatched kernels, threads, files in scratch) dies with its worker. The warm start is
    kept by spares booted in the background, so a session starts as soon as one is ready.
    Spares import CadQuery before they are ready (`preload_cad`, default: when the pool keeps
    spares); a worker someone waits for imports it on first use (tools/worker/lazy_cq.py).
    """

    def __init__(self, size: int = 1, root: str | None = None, test_hooks: bool | None = None,
                 prewarm: bool = True, preload_cad: bool | None = None, warm_render: bool = True):
        self.size = size
        self.preload_cad = size > 0 if preload_cad is None else preload_cad
        self.warm_render = warm_render  # off for workers that never render (a verifier's)
        self._root_lock: int | None = None
        if root is None:  # ours: held by a lock, and the roots of dead supervisors swept
            scratch.sweep_dead()
            root, self._root_lock = scratch.new_root()
        self.root = root
        jail.traversable(self.root)
        self.test_hooks = os.environ.get("MODELWRIGHT_TEST_HOOKS") == "1" if test_hooks is None else test_hooks
        self._idle: list[WorkerProcess] = []
        self._lock = threading.Lock()
        self._counter = 0
        self._closed = False
        self._warming = 0
        self._cleaning: list[concurrent.futures.Future] = []  # scratch removals under way
        if prewarm:
            self.warm()
        atexit.register(self.close)

    def _new_scratch(self) -> str:
        with self._lock:
            self._counter += 1
            return os.path.join(self.root, f"w{self._counter:04d}")

    def spawn(self, restore_from: str | None = None, preload_cad: bool = False,
              restore_upto: int | None = None, spare: bool = False) -> WorkerProcess:
        """A new worker; with `restore_from`, one that takes over a dead worker's scratch and
        loads its newest commit up to `restore_upto` (see SceneState.load_latest). A `spare`
        is booted before anyone waits for it, so it also warms its renderer first."""
        scratch = restore_from or self._new_scratch()
        return WorkerProcess(scratch, restore=restore_from is not None, test_hooks=self.test_hooks,
                             preload_cad=preload_cad, warm_render=self.warm_render,
                             restore_upto=restore_upto, spare=spare)

    def warm(self) -> None:
        """Start workers in the background until `size` are idle."""
        if self.size <= 0:
            return
        with self._lock:
            need = self.size - len(self._idle) - self._warming
            self._warming += max(0, need)
        for _ in range(max(0, need)):
            threading.Thread(target=self._warm_one, args=(self.preload_cad, True), daemon=True,
                             name="mw-warm").start()

    @property
    def spares(self) -> int:
        """How many booted workers wait idle for a session now."""
        with self._lock:
            return len(self._idle)

    def boot(self) -> None:
        """Start one worker in the background now, for a session about to open (a one-shot
        command overlaps its own imports and set-up with the worker's start); no spare
        replaces it, and it imports CadQuery on first use, for someone will wait for it."""
        with self._lock:
            self._warming += 1
        threading.Thread(target=self._warm_one, args=(False,), daemon=True, name="mw-boot").start()

    def _warm_one(self, preload_cad: bool, spare: bool = False) -> None:
        try:
            w = self.spawn(preload_cad=preload_cad, spare=spare)
        except ToolError as e:
            if not self._closed:  # a pool closed at exit races its own warm-up: not an error
                log.error("could not warm a worker: %s", e)
            w = None
        with self._lock:
            self._warming -= 1
            if w is not None and not self._closed:
                self._idle.append(w)
                return
        if w is not None:
            w.kill()

    def acquire(self, timeout: float = STARTUP_DEADLINE_S) -> WorkerProcess:
        end = time.monotonic() + timeout
        while True:
            with self._lock:
                w = self._idle.pop() if self._idle else None
                warming = self._warming
            if w is not None:
                if w.alive:
                    self.warm()  # start the next one while this one works
                    return w
                w.kill()
                continue
            if not warming or time.monotonic() > end:
                w = self.spawn()
                self.warm()
                return w
            time.sleep(0.05)

    def release(self, worker: WorkerProcess) -> None:
        """End a worker's session: kill it now, boot a fresh spare, and remove its scratch in
        the background (unmounting a capped scratch and deleting it are off the episode's
        path; `close` waits for them)."""
        worker.kill()
        self.warm()
        with self._lock:
            if not self._closed:
                try:
                    self._cleaning.append(_KEEPER_CLEAN.submit(_remove_scratch, worker.scratch))
                except RuntimeError:  # the interpreter is shutting down: no more background work
                    pass
                else:
                    self._cleaning = [f for f in self._cleaning if not f.done()]
                    return
        _remove_scratch(worker.scratch)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            cleaning, self._cleaning = self._cleaning, []
        for w in idle:
            w.kill()
        concurrent.futures.wait(cleaning)
        diskwatch.unmount_under(self.root)
        scratch.release(self.root, self._root_lock)
        self._root_lock = None


_default_pool: WorkerPool | None = None
_default_lock = threading.Lock()


def default_pool() -> WorkerPool:
    global _default_pool
    with _default_lock:
        if _default_pool is None or _default_pool._closed:
            # no spare by default: one-shot commands and the studio hold one session each, and a
            # spare booting beside them only competes for the CPU (MODELWRIGHT_POOL_SIZE sets one)
            _default_pool = WorkerPool(size=int(os.environ.get("MODELWRIGHT_POOL_SIZE", "0")))
        return _default_pool
