"""The geometry checker: a task's checkers run in a jailed process, bounded in time and memory.

Loading the policy's part (STEP, GLB), OCCT booleans, IoU and tessellation cost what the part
makes them cost: a 576-hole plate took the trusted process to 69.5 s and 1.09 GB. So the
trusted side computes none of it. `check(task, session, calls)` hands the task and the calls (pickled:
our own data, trusted -> jail only) to a fresh checker process
(`training/tasks/checker_main.py`) jailed like a tool worker (tools/sandbox/jail.py: bubblewrap,
seccomp, its own host uid as root, `training/` and `tools/` read-only, its scratch the only
writable place), which runs the checkers (`checks.evaluate_here`) on a stand-in session. Each
query of that session (`get_scene`, `export`, `mesh_check`, ...) comes back here over a pipe
as a bounded frame (tools/protocol.py), is run on the clean session, and is answered; an
export's file is copied from the clean worker's workspace into the checker's own
(tools/trust/confined.py: no link followed, capped). The verdict comes back the same way, checked
for its shape.

Caps (read at each check):
- `MODELWRIGHT_CHECKER_DEADLINE_S` (default 300): the checker's own time, summed over the
  episode's checks; the time the clean worker spends answering its queries is not counted
  (that worker has its own deadline).
- `MODELWRIGHT_CHECKER_MEMORY_MB` (default 4096): RLIMIT_DATA in the checker and the cap of
  the memory watch over its jail (tools/sandbox/memwatch.py).
Past either, or if the checker dies or answers out of shape, `CheckerError` (a
`ConfinedPathError`): the verifier scores the episode invalid (`INVALID_TOTAL`) with the
reason in `details["verifier"]`.

A checker serves one episode and is killed; spares boot in the background (one more than
the checks in flight), importing CadQuery when the last checked task needed it.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import os
import pickle
import select
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tools import TOOLS
from tools.protocol import HEADER, ProtocolError, decode_payload, json_length, write_message
from tools.sandbox import identity, jail, memwatch, scratch
from tools.text import printable
from tools.trust import confined
from tools.trust.confined import ConfinedPathError
from training.rewards import RewardBreakdown

log = logging.getLogger("modelwright.checker")
DEADLINE_ENV = "MODELWRIGHT_CHECKER_DEADLINE_S"
MEMORY_ENV = "MODELWRIGHT_CHECKER_MEMORY_MB"
DEFAULT_DEADLINE_S = 300.0
DEFAULT_MEMORY_MB = 4096
STARTUP_DEADLINE_S = 180.0  # a spare's imports on a loaded machine; not the episode's time
TRAINING_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CAD_KINDS = frozenset({"part", "holes", "topology", "placed", "feature"})
MAX_INPUT_BYTES = 1 << 30  # one file copied into the checker (as tools/trust/confined's cap)
# Workers and checkers are started from one long-lived thread: PR_SET_PDEATHSIG
# (bubblewrap's --die-with-parent) fires when the thread that forked them exits.
_KEEPER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mw-checker-keeper")


class CheckerError(ConfinedPathError):
    """The checker gave no verdict: past its deadline or memory cap, dead, or out of shape."""


def deadline_s() -> float:
    return float(os.environ.get(DEADLINE_ENV, DEFAULT_DEADLINE_S))


def memory_mb() -> int:
    return int(os.environ.get(MEMORY_ENV, DEFAULT_MEMORY_MB))


# Constraints measured from `get_scene`'s numbers (a bounded frame) or from read-only tools
# the clean worker answers under its own caps: no shape file is loaded for them.
SCENE_ONLY_KINDS = frozenset({
    "exists", "absent", "count", "position", "size", "rotation", "material", "on_ground",
    "on_top", "touching", "aligned", "evenly_spaced", "symmetric", "gap", "light", "framed",
    "no_overlap", "mesh_health", "wall_thickness", "mass", "centre_of_mass"})


def touches_geometry(task: Any) -> bool:
    """Whether the task's checkers load or compute on shapes (a geometry component, a
    deliverable file, a constraint of any kind but SCENE_ONLY_KINDS): then they run in the
    checker. A task of scene-only constraints reads JSON frames alone, whose size the
    protocol caps, and is checked in the trusted process without a checker's start."""
    spec = task.spec
    return (spec.geometry is not None or bool(spec.deliverables)
            or any(c.get("kind") not in SCENE_ONLY_KINDS for c in spec.constraints))


def needs_cad(task: Any) -> bool:
    """Whether the task's checkers read CAD solids (then spares import CadQuery up front)."""
    spec = task.spec
    geo = spec.geometry or {}
    return (geo.get("kind") == "parts"
            or any(c.get("kind") in CAD_KINDS for c in spec.constraints)
            or any(d.get("format") == "step" or d.get("check") == "step_parts"
                   for d in spec.deliverables))


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
        self.proc: subprocess.Popen | None = None
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
        cmd = jail.wrap(argv, self.scratch, [], fd, uid, readonly=(TRAINING_DIR,))
        try:
            self.proc = _KEEPER.submit(
                subprocess.Popen, cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self._log, env=env, cwd=self.scratch, start_new_session=True,
                close_fds=True, pass_fds=() if fd is None else (fd,)).result()
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
        if self.proc is None:
            return []
        pids, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            pids.append(pid)
            try:
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{tid}/children") as f:
                        todo += [int(x) for x in f.read().split()]
            except OSError:
                continue
        return pids

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
        for pid in self.host_pids()[1:]:
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


@dataclass
class CheckerStats:
    checks: int = 0  # verdicts given
    seconds: float = 0.0  # the checkers' own time (what the deadline counts), summed
    peak_mb: float = 0.0  # the largest peak RSS a checker reported
    last_peak_mb: float = 0.0  # the last one's


STATS = CheckerStats()
_pool: CheckerPool | None = None
_pool_lock = threading.Lock()


def default_pool() -> CheckerPool:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = CheckerPool()
        return _pool


# ---------------------------------------------------------------- one episode's check


def _inputs(task: Any, session: Any, proc: CheckerProcess) -> Any:
    """Copy what the checkers read besides the session's answers into the checker's scratch:
    the deliverables the clean worker's exports wrote, and a ground-truth mesh file; the task
    as the checker will see it (a mesh file's path is the copy's)."""
    ws = Path(session.workspace)
    for d in task.spec.deliverables:
        rel = d["path"]
        if confined.is_file(ws, rel):
            _copy_in(ws, rel, proc)
    geo = task.spec.geometry
    if geo and geo.get("kind") == "mesh_file":
        src = Path(geo["path"])  # the task's own file (a benchmark's ground truth)
        rel = "inputs/reference" + src.suffix.lower()
        with open(src, "rb") as f, confined.create_file(proc.scratch, rel) as dst:
            shutil.copyfileobj(f, dst, 1 << 20)
        dest = os.path.join(proc.scratch, rel)
        task = replace(task, spec=replace(task.spec, geometry=dict(geo, path=dest)))
    return task


def _copy_in(ws: Path, rel: str, proc: CheckerProcess) -> None:
    """The clean workspace's file `rel` into the checker's workspace at the same name: read
    and written without following a link at either end (the checker's workspace is the
    jail's to write), capped, streamed (the trusted side holds 1 MB of it at a time)."""
    n = 0
    with confined.open_file(ws, rel, MAX_INPUT_BYTES) as src, \
            confined.create_file(proc.workspace, rel) as dst:
        while chunk := src.read(1 << 20):
            n += len(chunk)
            if n > MAX_INPUT_BYTES:
                raise ConfinedPathError(f"{rel!r} is over the {MAX_INPUT_BYTES}-byte cap")
            dst.write(chunk)


def _answer(msg: dict, session: Any, proc: CheckerProcess) -> dict:
    """Run one query of the checker on the clean session (read-only tools and exports into a
    check folder only) and give its answer."""
    op = msg.get("op")
    if op == "scene":
        return {"ok": True, "output": session.scene()}
    tool, args = msg.get("tool"), msg.get("args")
    spec = TOOLS.get(tool) if isinstance(tool, str) else None
    if op != "call" or spec is None or not isinstance(args, dict):
        raise CheckerError(f"the geometry checker asked for something else ({printable(str(op))[:80]})")
    path = args.get("path")
    if tool == "export":
        if not (isinstance(path, str) and path.startswith("_check_")):
            raise CheckerError("the geometry checker asked for an export outside its folder")
    elif spec.mutating:
        raise CheckerError(f"the geometry checker asked for a mutating tool ({tool})")
    r = session.call(tool, dict(args))
    if r.ok and tool == "export":
        _copy_in(Path(session.workspace), path, proc)
    return {"ok": bool(r.ok), "output": r.output if r.ok else {},
            "error": None if r.ok else str(r.error)}


def _verdict_of(payload: Any) -> RewardBreakdown:
    """The checker's verdict, held to the shape of a RewardBreakdown."""
    v = payload.get("verdict") if isinstance(payload, dict) else None
    ok = (isinstance(v, dict) and type(v.get("total")) in (int, float)
          and isinstance(v.get("success"), bool) and isinstance(v.get("components"), dict)
          and all(isinstance(k, str) and type(x) in (int, float) for k, x in v["components"].items())
          and isinstance(v.get("details"), dict))
    if not ok:
        raise CheckerError("the geometry checker sent a verdict out of shape")
    return RewardBreakdown(float(v["total"]), {k: float(x) for k, x in v["components"].items()},
                           v["success"], v["details"])


def check(task: Any, session: Any, calls: list[dict[str, Any]],
          pool: CheckerPool | None = None) -> RewardBreakdown:
    """The task's verdict on `session`'s final state, measured by a jailed checker; each of
    the checker's queries is answered from `session`. CheckerError when it gives none."""
    pool = pool or default_pool()
    budget = deadline_s()
    proc = pool.take(needs_cad(task))
    try:
        job = _inputs(task, session, proc)
        # a file, not a frame: an episode's calls (scripts and all) may be over a frame's cap
        confined.write_file(proc.scratch, "inputs/job.pickle", pickle.dumps((job, calls)))
        proc.send({"op": "check"})
        while True:
            t0 = time.monotonic()
            try:
                msg = proc.read(budget)
            except TimeoutError:
                raise CheckerError(f"the geometry checker went past its deadline of {deadline_s():g} s "
                                   f"({DEADLINE_ENV}) and was stopped") from None
            budget -= time.monotonic() - t0
            if "verdict" in msg:
                verdict = _verdict_of(msg)
                peak = msg.get("rss_mb")
                with _pool_lock:
                    STATS.checks += 1
                    STATS.seconds += deadline_s() - budget
                    if type(peak) in (int, float):
                        STATS.peak_mb = max(STATS.peak_mb, float(peak))
                        STATS.last_peak_mb = float(peak)
                return verdict
            if msg.get("op") == "failed":
                why = printable(str(msg.get("error", "")))[:500]
                if msg.get("memory"):
                    raise CheckerError(f"the geometry checker went past its memory cap of "
                                       f"{proc.memory_cap_mb} MB ({MEMORY_ENV}): {why}")
                raise CheckerError(f"the geometry checker failed: {why}")
            proc.send(_answer(msg, session, proc))
    finally:
        pool.done()
        # nobody waits for the kill (its processes' exit, its uid, its scratch)
        threading.Thread(target=proc.kill, daemon=True, name="mw-checker-kill").start()
