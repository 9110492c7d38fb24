"""Scratch roots of worker pools, and the sweep of those whose supervisor died.

A pool's root (`$TMPDIR/modelwright-XXXX`) holds an `owner.lock` the supervisor keeps
flock-ed for as long as it lives; the kernel drops the lock when the process dies, however
it dies (kill -9 included). The next pool to start removes every root whose lock it can take:
only folders whose owner is gone, never by age, never one without a lock file (it may be
in the instant between its creation and its lock).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile

PREFIX = "modelwright-"
LOCK_NAME = "owner.lock"


def claim(root: str) -> int:
    """Lock `root` for this process; returns the descriptor to keep open while it lives.

    The lock file is made and locked under another name, then renamed into place: another
    process's sweep never finds `owner.lock` unlocked in a live root (between a plain
    create-then-lock, a sweep could take the lock and remove the root being made)."""
    making = os.path.join(root, f".{LOCK_NAME}.{os.getpid()}")
    fd = os.open(making, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, f"{os.getpid()}\n".encode())
    os.rename(making, os.path.join(root, LOCK_NAME))
    return fd


def new_root() -> tuple[str, int]:
    """A fresh scratch root and the descriptor of its held lock."""
    root = tempfile.mkdtemp(prefix=PREFIX)
    return root, claim(root)


def sweep_dead(parent: str | None = None) -> list[str]:
    """Remove the scratch roots under `parent` (default: the temp dir) whose owner died."""
    parent = parent or tempfile.gettempdir()
    removed = []
    try:
        names = [n for n in os.listdir(parent) if n.startswith(PREFIX)]
    except OSError:
        return removed
    for name in names:
        root = os.path.join(parent, name)
        try:
            fd = os.open(os.path.join(root, LOCK_NAME), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # no lock (not ours, or not yet claimed), or not a folder
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # its supervisor is alive
        try:
            if not os.path.islink(root):
                from tools.sandbox import diskwatch  # its workers' own file systems (as root) first

                diskwatch.unmount_under(root)
                shutil.rmtree(root, ignore_errors=True)
                removed.append(root)
        finally:
            os.close(fd)
    return removed


def release(root: str, fd: int | None) -> None:
    """Remove our own root and drop its lock."""
    from tools.sandbox import diskwatch  # its workers' own file systems (as root) first

    diskwatch.unmount_under(root)
    shutil.rmtree(root, ignore_errors=True)
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
