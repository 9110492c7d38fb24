"""The memory cap of a whole jail, shared memory included: a watch on its processes' counters.

The same thread also checks each worker's disk (WorkerProcess.check_disk, tools/sandbox/diskwatch.py).

RLIMIT_DATA (tools/worker/main.py) caps one process's private writable memory. It does not
count MAP_SHARED mappings, memfd or tmpfs pages, and it is per process: 256 processes may each
hold the cap. Cgroups would count all of it, but memory cgroups cannot be delegated on every
machine (here: cgroup v1, none). So one thread of the supervisor samples, every TICK_S, each
live worker's processes (every host pid of the jail, wrappers and forks included) and stops
the worker past its cap; the call in flight fails with a typed `crash` and the session
restarts the worker from its last commit, as after any crash.

What is counted, per process, summed over the jail:
- RssAnon + RssShmem + VmSwap (/proc/PID/status: O(1) counters): private memory, and shared
  memory while it is mapped (memfd, MAP_SHARED|MAP_ANONYMOUS, mapped tmpfs files);
- the blocks of every memfd a process holds open (/proc/PID/fd), mapped or not: a memfd
  written through its fd is RAM that no mapping shows.
That sum can only overstate: a forked child's copy-on-write pages count in each process, and a
mapped memfd counts twice. So when it passes the cap, the precise figure decides: Pss_Anon +
Pss_Shmem + SwapPss (/proc/PID/smaps_rollup, each shared page split among its mappers) plus
only the memfds no process maps. smaps_rollup walks page tables (about 20 ms for a Blender
worker, that many times over for a jail of forks), so it is read only then: at once when the
bound grew past the cap since the last precise figure (new pages raise both alike; then at
most a third of the watch's time), else at most every PRECISE_EVERY_S per worker and a sixth
of the time (pages a fork un-shares by writing raise the truth, not the bound). File-backed pages
(libraries, files mapped from scratch) are not counted: the kernel can drop them.

Not counted, and bounded otherwise: tmpfs files not mapped (/tmp and /dev/shm in the jail are
64 MB tmpfs each), System V segments and queues (refused by seccomp), kernel memory (pipe and
socket buffers). Not counted at all: a memfd whose only reference is an fd in flight in a
unix socket (sent with SCM_RIGHTS, then closed): no /proc file shows it. And a sample is a
sample: a burst can pass the cap by what the jail touches between two ticks.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import weakref
from collections.abc import Iterable

from tools.sandbox import diskwatch

log = logging.getLogger("modelwright.tools")
TICK_S = 0.25
PRECISE_EVERY_S = 1.0
_STATUS_KEYS = ("RssAnon:", "RssShmem:", "VmSwap:")
_ROLLUP_KEYS = ("Pss_Anon:", "Pss_Shmem:", "SwapPss:")


def _kb_fields(path: str, keys: tuple[str, ...]) -> int:
    total = 0
    with open(path) as f:
        for line in f:
            if line.startswith(keys):
                total += int(line.split()[1])
    return total << 10


def _memfds(pids: Iterable[int]) -> dict[tuple[int, int], int]:
    """(dev, inode) -> allocated bytes of every memfd the processes hold open."""
    out: dict[tuple[int, int], int] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            path = f"/proc/{pid}/fd/{fd}"
            try:
                if not os.readlink(path).startswith("/memfd:"):
                    continue
                st = os.stat(path)
            except OSError:
                continue
            out[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    return out


def _mapped_memfds(pids: Iterable[int]) -> set[int]:
    """Inodes of the memfds some process maps (their pages are in its Pss_Shmem)."""
    out: set[int] = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    if "/memfd:" in line:
                        out.add(int(line.split()[4]))
        except (OSError, ValueError, IndexError):
            continue
    return out


def process_tree(root: int) -> list[int]:
    """`root` and every descendant's pid, as the host sees them (a jail's wrapper and all it
    started), read from /proc; a process that exits meanwhile is skipped."""
    pids, todo = [], [root]
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


def upper_bound(pids: list[int]) -> int:
    """Bytes the jail holds, never less than the truth (see the module docstring)."""
    total = 0
    for pid in pids:
        try:
            total += _kb_fields(f"/proc/{pid}/status", _STATUS_KEYS)
        except (OSError, ValueError):
            continue
    return total + sum(_memfds(pids).values())


def precise(pids: list[int]) -> int:
    """Bytes the jail holds, shared pages split among their mappers, each memfd once."""
    total = 0
    for pid in pids:
        try:
            total += _kb_fields(f"/proc/{pid}/smaps_rollup", _ROLLUP_KEYS)
        except (OSError, ValueError):
            continue
    mapped = _mapped_memfds(pids)
    return total + sum(b for (_, ino), b in _memfds(pids).items() if ino not in mapped)


class _Watch:
    """One daemon thread for every live worker of this process."""

    def __init__(self) -> None:
        self._workers: weakref.WeakSet = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        # per worker: (when the last precise reading was, what it took, its figure, the bound then)
        self._precise: dict[int, tuple[float, float, int, int]] = {}

    def add(self, worker) -> None:
        with self._lock:
            self._workers.add(worker)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True, name="mw-memwatch")
                self._thread.start()

    def discard(self, worker) -> None:
        with self._lock:
            self._workers.discard(worker)
            self._precise.pop(id(worker), None)

    def _run(self) -> None:
        while True:
            time.sleep(TICK_S)
            with self._lock:
                workers = list(self._workers)
            for w in workers:
                try:
                    self.check(w)
                    if hasattr(w, "check_disk"):  # its scratch too (tools/sandbox/diskwatch.py)
                        w.check_disk(diskwatch.WALK_EVERY_S)
                except Exception:  # a watch that dies watches nothing: log and go on
                    log.exception("memory watch of %s failed", getattr(w, "scratch", w))

    def check(self, w) -> int | None:
        """Stop `w` if its jail holds more than its cap; the bytes measured, or None."""
        if not w.alive or w.stopped_for:
            return None
        cap = w.memory_cap_mb << 20
        pids = w.host_pids()
        used = upper_bound(pids)
        if used <= cap:
            return used
        t0 = time.monotonic()
        at, took, last, bound_then = self._precise.get(id(w), (-1e9, 0.0, 0, used))
        # new pages raise the bound as much as the truth: past the cap that way, read again
        # after twice what the last reading took; else once a PRECISE_EVERY_S, and after five
        # times its cost (a jail of forks costs that many page-table walks)
        grew_past = last + (used - bound_then) > cap
        if t0 < at + (2 * took if grew_past else max(5 * took, PRECISE_EVERY_S)):
            return used
        bound = used
        used = precise(pids)
        self._precise[id(w)] = (t0, time.monotonic() - t0, used, bound)
        if used > cap:
            log.warning("worker %s stopped at %d MB, over its %d MB cap", w.scratch, used >> 20,
                        cap >> 20)
            stop(w, pids, f"it used more than {cap >> 20} MB of memory (the cap, "
                 "MODELWRIGHT_WORKER_MEMORY_MB)")
        return used


def stop(w, pids: list[int], reason: str) -> None:
    """Kill every process of the jail (the supervisor's call in flight then sees it die); the
    worker's kill() waits for them all (`stop_handles`): until then they hold what they hold
    (memory, an unlinked file on its disk)."""
    w.stopped_for = reason
    handles = []
    for pid in pids:
        try:
            handles.append(os.pidfd_open(pid))  # names its process for good, unlike a pid
        except OSError:
            continue
    w.stop_handles = getattr(w, "stop_handles", []) + handles
    for pid in reversed(pids):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


WATCH = _Watch()
