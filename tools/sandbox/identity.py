"""Host identities of jailed workers: one uid each, as root, from a reserved range.

As root, a worker's processes drop to a host uid that no other live worker, verifier or
system account has: a process that ever got out of its mount namespace, or any other
process of the machine running as `nobody`, still finds every other live scratch closed
(scratch dirs are 0700, owned by their worker's uid). The uid is leased for the worker's
life: a lock file per uid, flock-ed by the supervisor that holds it, so supervisors started
side by side never hand out the same one, and one whose supervisor died is free again (the
kernel drops the lock; its workers died with it, `--die-with-parent`). A uid some process
still runs as is skipped whatever its lock says.

The range is MODELWRIGHT_JAIL_UID_BASE (default 2,000,000,000: above systemd's container
range, 524288-1879048191, and below 2^31, which some tools read as signed) and
MODELWRIGHT_JAIL_UID_SLOTS uids from there (default 65536). No passwd entry is needed:
`setpriv` takes numbers. As an ordinary user there is no other uid to take: the worker is
that user on the host, and its scratch is 0700 under that user.
"""

from __future__ import annotations

import fcntl
import os
import stat
import threading

from tools.errors import ErrorKind, ToolError

UID_BASE = int(os.environ.get("MODELWRIGHT_JAIL_UID_BASE", "2000000000"))
UID_SLOTS = int(os.environ.get("MODELWRIGHT_JAIL_UID_SLOTS", "65536"))
LOCK_DIR = os.environ.get("MODELWRIGHT_JAIL_UID_LOCKS", "/run/modelwright-jail-uids")
_LOCAL = threading.Lock()  # flock is per open file: threads of one process need this too
_next = 0  # round robin: a uid just freed is the last to be handed out again


class Identity:
    """A host uid (and gid, the same number) held for one worker."""

    def __init__(self, uid: int, fd: int | None):
        self.uid = uid
        self._fd = fd

    def release(self) -> None:
        """Free the uid for another worker; call it once every process of the worker is dead."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __repr__(self) -> str:
        return f"Identity(uid={self.uid}, held={self._fd is not None})"


def lease() -> Identity:
    """A uid for a new worker: a free one of the range as root, the app's own otherwise."""
    if os.geteuid() != 0:
        return Identity(os.geteuid(), None)
    global _next
    _lock_dir()
    with _LOCAL:
        busy = uids_running()
        for i in range(UID_SLOTS):
            uid = UID_BASE + (_next + i) % UID_SLOTS
            if uid in busy:
                continue
            fd = os.open(os.path.join(LOCK_DIR, str(uid)),
                         os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            _next = uid - UID_BASE + 1
            return Identity(uid, fd)
    raise ToolError(ErrorKind.SANDBOX, f"every jail uid of {UID_BASE}..{UID_BASE + UID_SLOTS - 1} "
                    "is in use (MODELWRIGHT_JAIL_UID_BASE, MODELWRIGHT_JAIL_UID_SLOTS)")


def _lock_dir() -> None:
    """The lock folder, root's alone: a folder someone else made there could hold every lock."""
    try:
        os.mkdir(LOCK_DIR, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(LOCK_DIR)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o077:
        raise ToolError(ErrorKind.SANDBOX, f"{LOCK_DIR} must be a folder of root's, mode 0700 "
                        "(MODELWRIGHT_JAIL_UID_LOCKS names another)")


def uids_running() -> set[int]:
    """The real, effective, saved and file-system uids of every live process on the machine
    (a zombie, which can do nothing, not counted)."""
    out: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                for line in f:
                    if line.startswith("State:") and line.split()[1] in ("Z", "X"):
                        break
                    if line.startswith("Uid:"):
                        out.update(int(x) for x in line.split()[1:])
                        break
        except (OSError, ValueError):
            continue  # gone meanwhile
    return out


def hand_tree(path: str, uid: int) -> None:
    """Give a scratch tree (a dead worker's, now restored) to `uid`, never through a link:
    lchown changes the link itself, and os.walk descends into no linked folder."""
    if os.geteuid() != 0:
        return
    os.chown(path, uid, uid, follow_symlinks=False)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                os.chown(os.path.join(root, name), uid, uid, follow_symlinks=False)
            except OSError:
                pass  # gone meanwhile: nothing of the dead worker runs, so only our own rmtree
