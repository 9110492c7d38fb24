"""Who is recording an episode: an exclusive OS file lock held for the episode's lifetime.

A recorder takes `flock(LOCK_EX)` on `<episode>/lease` before its row is inserted and keeps
it until `finish`. The kernel drops the lock when the process dies however it dies (kill -9,
OOM, power-off on reboot), so "row says running and nobody holds the lease" means the writer
is gone: the episode is `interrupted`. Unlike a pid check this cannot be fooled by pid reuse,
and unlike a timed lease it needs no heartbeat. The writer's pid, host and start time are
kept in the row for display only.

flock locks belong to the open file description, and Python opens files close-on-exec, so
subprocesses the recorder spawns do not inherit the lease (a bare `os.fork()` child would).
Where fcntl is missing (Windows) we fall back to "pid alive with the same create time".
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LEASE_NAME = "lease"


def writer_identity() -> dict:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": time.time(),
        "proc_start": _process_start(os.getpid()),
    }


def _process_start(pid: int) -> float | None:
    """Process start in clock ticks since boot (Linux), else psutil's create time."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return float(f.read().rsplit(b")", 1)[1].split()[19])
    except OSError:
        pass
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:
        return None


class Lease:
    """The recorder's hold on one episode folder."""

    def __init__(self, episode_dir: Path):
        self.path = episode_dir / LEASE_NAME
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if fcntl is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(self._fd)
                self._fd = None
                raise

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def holder_alive(episode_dir: Path, writer: dict) -> bool:
    """True while some live process holds the episode's lease."""
    path = episode_dir / LEASE_NAME
    if fcntl is None:  # pragma: no cover - Windows
        return _pid_alive(writer)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def try_take(episode_dir: Path) -> Lease | None:
    """Take the lease of an episode whose writer is gone (to reap or delete it), or None."""
    if not (episode_dir / LEASE_NAME).exists():
        episode_dir.mkdir(parents=True, exist_ok=True)
    try:
        return Lease(episode_dir)
    except BlockingIOError:
        return None


def _pid_alive(writer: dict) -> bool:  # pragma: no cover - Windows
    if writer.get("host") != socket.gethostname():
        return True  # cannot tell for another machine: assume alive
    pid = writer.get("pid")
    start = writer.get("proc_start")
    if not pid:
        return False
    now = _process_start(int(pid))
    return now is not None and (start is None or now == start)
