"""The jailed geometry checker's process and its pool of spares (the trusted side's half).

`CheckerProcess` boots one `python -m training.tasks.checker_main` jailed like a tool worker
and waits for its one job; `CheckerPool` keeps spares booted in the background. The episode's
check itself (what is sent, what is answered, the verdict) is training/tasks/checker.py.
"""

from __future__ import annotations

import atexit
import logging
import os
import select
import shutil
import subprocess
import sys
import threading
import time

from tools.protocol import HEADER, ProtocolError, decode_payload, json_length, write_message
from tools.sandbox import identity, jail, memwatch, scratch, template
from tools.trust import confined
from tools.trust.confined import ConfinedPathError

log = logging.getLogger("modelwright.checker")
DEADLINE_ENV = "MODELWRIGHT_CHECKER_DEADLINE_S"
MEMORY_ENV = "MODELWRIGHT_CHECKER_MEMORY_MB"
DEFAULT_DEADLINE_S = 300.0
DEFAULT_MEMORY_MB = 4096
STARTUP_DEADLINE_S = 180.0  # a spare's imports on a loaded machine; not the episode's time
TRAINING_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The checker template (training/tasks/checker_template.py): checkers forked from it
TEMPLATE = template.Kind(module="training.tasks.checker_template", switch="MODELWRIGHT_CHECKER_TEMPLATE",
                         what="geometry checker template")
# Checkers and the checker template are started from one daemon thread that lives as long as
# this process: PR_SET_PDEATHSIG (bubblewrap's --die-with-parent) fires when the thread that
# forked them exits, and a template's death at the interpreter's exit is then no death to report.
_launch = template.DaemonLauncher("mw-checker-keeper")


def start_template_soon() -> None:
    """Boot the checker template in the background (its imports, a CPU-second)."""
    template.start_soon(_launch, TEMPLATE)


class CheckerError(ConfinedPathError):
    """The checker gave no verdict: past its deadline or memory cap, dead, or out of shape."""


def deadline_s() -> float:
    return float(os.environ.get(DEADLINE_ENV, DEFAULT_DEADLINE_S))


def memory_mb() -> int:
    return int(os.environ.get(MEMORY_ENV, DEFAULT_MEMORY_MB))


class CheckerProcess:
    """One jailed checker, booted and waiting for its one job. Quacks as a worker for
    tools/sandbox/memwatch.py (alive, stopped_for, memory_cap_mb, host_pids, scratch)."""

    def __init__(self, root: str, name: str, preload_cad: bool):
        self.scratch = os.path.join(root, name)
        self.workspace = os.path.join(self.scratch, "workspace")
        self.stopped_for: str | None = None
        self.data_mb_seen = 0.0
        self._killed = False
        self.memory_cap_mb = memory_mb()
        self.identity = identity.lease()
        self.proc: subprocess.Popen | template.ForkedProcess | None = None
        self.forked: template.ForkedProcess | None = None
        try:
            self._boot(preload_cad)
        except BaseException:
            self.kill()
            raise

    def _boot(self, preload_cad: bool) -> None:
        uid = self.identity.uid
        for d in (self.scratch, self.workspace, os.path.join(self.scratch, "tmp"),
                  os.path.join(self.scratch, "inputs")):
            os.makedirs(d, exist_ok=True)
        os.chmod(self.scratch, 0o700)
        for d in (self.scratch, self.workspace, os.path.join(self.scratch, "tmp")):
            jail.give_to_jail(d, uid)  # inputs/ stays ours: the checker only reads it
        # the checker's own CPU cap is a backstop behind the deadline counted here
        cpu_s = int(deadline_s() * 2 + 120)
        argv = [sys.executable, "-s", "-P", "-m", "training.tasks.checker_main",
                "--memory-mb", str(self.memory_cap_mb), "--cpu-s", str(cpu_s)]
        if preload_cad:
            argv.append("--preload-cad")
        self._log = confined.open_append(self.scratch, "checker.log")
        env = jail.worker_env(self.scratch)
        fd = jail.seccomp_fd()
        try:
            # forked from the checker template (its imports done once, the same jail built by
            # the fork itself), or, without one, started from scratch in bubblewrap
            self.forked = template.spawn(_launch, argv[argv.index("training.tasks.checker_main") + 1:],
                                         env, self.scratch, uid, self._log.fileno(), fd,
                                         kind=TEMPLATE, readonly=(TRAINING_DIR,))
            self.proc = self.forked or _launch(
                jail.wrap(argv, self.scratch, [], fd, uid, readonly=(TRAINING_DIR,)),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env,
                cwd=self.scratch, start_new_session=True, close_fds=True,
                pass_fds=() if fd is None else (fd,))
        finally:
            if fd is not None:
                os.close(fd)
        memwatch.WATCH.add(self)
        ready = self.read(STARTUP_DEADLINE_S)
        if ready.get("ready") is not True:
            raise CheckerError("the geometry checker failed to start")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def host_pids(self) -> list[int]:
        """The wrapper's pid and every descendant's, as the host sees them."""
        return [] if self.proc is None else memwatch.process_tree(self.proc.pid)

    def send(self, payload: dict) -> None:
        try:
            write_message(self.proc.stdin, payload)
        except (OSError, ValueError):
            raise CheckerError(self._why_dead()) from None

    def read(self, budget_s: float) -> dict:
        """One frame from the checker within `budget_s`; CheckerError past it (the checker is
        killed), if the checker died, or if the frame is malformed or over the caps."""
        deadline = time.monotonic() + budget_s
        fd = self.proc.stdout.fileno()
        try:
            n = json_length(self._read_exact(fd, HEADER.size, deadline))
            payload, sizes = decode_payload(self._read_exact(fd, n, deadline))
        except ProtocolError as e:
            self.kill()
            raise CheckerError(f"the geometry checker sent a bad frame ({e})") from None
        if sizes or not isinstance(payload, dict):
            self.kill()
            raise CheckerError("the geometry checker sent a bad frame")
        return payload

    def _read_exact(self, fd: int, n: int, deadline: float) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], min(left, 0.1))
            if not ready:
                if not self.alive:
                    raise CheckerError(self._why_dead())
                self._sample()
                continue
            chunk = os.read(fd, min(n - len(buf), 1 << 20))
            if not chunk:
                raise CheckerError(self._why_dead())
            buf += chunk
        return bytes(buf)

    def _sample(self) -> None:
        """Note the checker's data size (VmData, what RLIMIT_DATA counts) while it works:
        when it dies, how close it was to its cap says why."""
        for pid in self.host_pids():  # (bubblewrap's own processes hold next to nothing)
            try:
                with open(f"/proc/{pid}/status") as f:
                    kb = next((int(line.split()[1]) for line in f if line.startswith("VmData:")), 0)
            except (OSError, ValueError):
                continue
            self.data_mb_seen = max(self.data_mb_seen, kb / 1024)

    def _why_dead(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        cap = f"its memory cap of {self.memory_cap_mb} MB ({MEMORY_ENV})"
        if self.stopped_for:  # the memory watch killed it
            return f"the geometry checker went past {cap} and was stopped"
        # an allocation refused at RLIMIT_DATA inside OCCT often ends in SIGSEGV/SIGABRT
        near = self.data_mb_seen >= self.memory_cap_mb - max(64, self.memory_cap_mb // 10)
        if near:
            return f"the geometry checker went past {cap}: it died (exit {code}) when an allocation was refused"
        return f"the geometry checker died (exit {code}) with {self.data_mb_seen:.0f} MB of data, under {cap}"

    def kill(self) -> None:
        if self._killed:
            return
        self._killed = True
        memwatch.WATCH.discard(self)
        if self.proc is not None:
            pids = self.host_pids() if self.alive else []
            handles = []
            for pid in pids:
                try:
                    handles.append(os.pidfd_open(pid))
                except OSError:
                    pass
            for pid in reversed(pids):
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            try:  # the jail's processes outlive the wrapper by a moment: its uid is free after
                for h in handles:
                    select.select([h], [], [], 10)
            finally:
                for h in handles:
                    os.close(h)
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            if self.forked is not None:
                self.forked.close()
        if hasattr(self, "_log"):
            self._log.close()
        shutil.rmtree(self.scratch, ignore_errors=True)
        self.identity.release()


class CheckerPool:
    """Spare checkers booted in the background: one more than the checks in flight."""

    def __init__(self, spares: int = 1):
        self.spares = spares
        self.preload_cad = False
        scratch.sweep_dead()
        self.root, self._root_lock = scratch.new_root()
        jail.traversable(self.root)
        self._idle: list[CheckerProcess] = []
        self._warming = 0
        self._busy = 0
        self._counter = 0
        self._closed = False
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        atexit.register(self.close)

    def _name(self) -> str:
        with self._lock:
            self._counter += 1
            return f"c{self._counter:05d}"

    def take(self, cad: bool) -> CheckerProcess:
        """A booted checker for one job (a spare, the next spare to finish booting, or one
        booted now); more spares start."""
        with self._ready:
            self.preload_cad = cad
            self._busy += 1
            # a spare on its way is sooner than a new boot, which would compete with it
            self._ready.wait_for(lambda: self._idle or not self._warming, STARTUP_DEADLINE_S)
            proc = self._idle.pop(0) if self._idle else None
        try:
            # a spare booted under other caps (the environment changed since) is not used
            if proc is None or not proc.alive or proc.memory_cap_mb != memory_mb():
                if proc is not None:
                    proc.kill()
                proc = CheckerProcess(self.root, self._name(), cad)
        except BaseException:
            self.done()
            raise
        self.warm()
        return proc

    def reserve(self, checks: int) -> None:
        """Keep a spare for each of `checks` episodes scored at once (and one more while
        checks are in flight), booting them now."""
        with self._lock:
            self.spares = max(self.spares, checks)
        self.warm()

    def done(self) -> None:
        with self._lock:
            self._busy -= 1

    def warm(self) -> None:
        with self._lock:
            if self._closed:
                return
            need = max(self.spares, self._busy + 1) - len(self._idle) - self._warming
            need = max(0, need)
            self._warming += need
            cad = self.preload_cad
        for _ in range(need):
            threading.Thread(target=self._warm_one, args=(cad,), daemon=True,
                             name="mw-checker-warm").start()

    def _warm_one(self, cad: bool) -> None:
        proc = None
        try:
            proc = CheckerProcess(self.root, self._name(), cad)
        except Exception as e:  # the next take boots one itself and reports why
            if not self._closed:  # (at exit, a spare booting is killed with its keeper)
                log.info("a spare geometry checker failed to start: %s", e)
        with self._ready:
            self._warming -= 1
            if proc is not None and not self._closed:
                self._idle.append(proc)
                proc = None
            self._ready.notify_all()
        if proc is not None:
            proc.kill()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for p in idle:
            p.kill()
        scratch.release(self.root, self._root_lock)
        self._root_lock = None
