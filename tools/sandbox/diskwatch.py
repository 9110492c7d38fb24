"""The disk cap of a worker: its scratch, the only place it writes on disk, is bounded.

`MODELWRIGHT_WORKER_DISK_MB` (tools/sandbox/jail.py `Limits.disk_mb`) caps what one worker's
scratch holds: commits, snapshots and stashes, exports, its temp files, its shader cache and
its log. Two ways, one behaviour:

- **As root (a hard bound):** each scratch is a file system of its own: an ext4 in a sparse
  image file of exactly the cap, beside the scratch (`wNNNN.img`, outside every jail),
  loop-mounted on the scratch folder before the worker first starts (nosuid, nodev, discard).
  The kernel refuses a write past it (ENOSPC), so the host's free space drops by at most the
  cap per worker, whatever the worker does: many files, hard links, a file it unlinked and
  holds open. `discard` gives back to the host what the worker deletes. The mount outlives a
  crash (a restored worker takes the same file system over) and goes with the session.
  Each image is a sparse copy of a pristine one that mkfs made once for the pool; copy +
  mount ~5 ms of CPU. A tmpfs was not taken: it is RAM that the memory watch
  (tools/sandbox/memwatch.py) does not count while unmapped, so a worker could hold its memory cap
  and its disk cap in RAM at once.
- **As an ordinary user (a watch), or where loop devices fail:** an ordinary user cannot mount,
  and a tmpfs made inside the jail (bubblewrap `--size --tmpfs`) dies with the worker, while
  the trusted side reads the scratch from the host and restores a crashed worker from it. So
  the supervisor sums the blocks of the scratch tree (one walk by folder descriptor, no link
  followed, each inode once) and of the regular files the jail's processes hold open there
  (an unlinked file is in no folder), every WALK_EVERY_S and after every reply. A sample: a
  burst can pass the cap by what the worker writes between two readings.

Either way, past the cap (less than `slack()` left), the supervisor stops the worker: the call
fails with a one-line typed `crash` naming the cap, and the session restarts the worker from
its last commit, after `make_room` removed from the scratch what is not the session's state
(workspace and temp files, partial commits, then older undo points, then snapshots).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import stat
import subprocess
import tempfile
import threading

log = logging.getLogger("modelwright.tools")
ENV = "MODELWRIGHT_WORKER_DISK_MB"
DEFAULT_MB = 8192
WALK_EVERY_S = 1.0
MAX_ENTRIES = 50_000  # a walk past this many files stops the worker (inodes are disk too; ~1.8 s)
KEEP_TOP = ("state", "shader-cache", "worker.log")  # what make_room keeps (the session's state)
LOG_KEEP = 1 << 20  # a log past this is removed by make_room too (the worker writes it)
_SBIN = "/usr/sbin:/sbin:/usr/bin:/bin"


def slack(cap_mb: int) -> int:
    """Bytes left free at which a scratch counts as full (the stop comes before ENOSPC's
    second write, and honest tools need a little room to fail cleanly)."""
    return min(16 << 20, (cap_mb << 20) // 16)


def image_of(scratch: str) -> str:
    return scratch.rstrip("/") + ".img"


def _tool(name: str) -> str | None:
    return shutil.which(name, path=_SBIN)


def _run(argv: list[str]) -> None:
    r = subprocess.run(argv, capture_output=True, timeout=60)
    if r.returncode != 0:
        msg = r.stderr.decode(errors="replace").strip().splitlines()
        raise OSError(f"{os.path.basename(argv[0])}: {msg[-1] if msg else f'exit {r.returncode}'}")


_PROBE_LOCK = threading.Lock()


def can_mount() -> bool:
    """Whether scratches get a file system of their own here (root, with loop devices)."""
    with _PROBE_LOCK:
        return _can_mount()


@functools.cache
def _can_mount() -> bool:
    if os.geteuid() != 0 or os.environ.get("MODELWRIGHT_WORKER_DISK_MOUNT") == "0":
        return False
    if not all(_tool(t) for t in ("mkfs.ext4", "mount", "umount")):
        log.warning("no mkfs.ext4/mount: the worker disk cap is a watch, not a file system")
        return False
    with tempfile.TemporaryDirectory(prefix="modelwright-diskprobe-") as d:
        where = os.path.join(d, "s")
        os.mkdir(where)
        try:
            _mount(where, 16, 0)
        except OSError as e:
            log.warning("a worker's scratch cannot be a loop file system here (%s): the disk "
                        "cap is a watch", e)
            return False
        unmount(where)
    return True


def _mount(scratch: str, cap_mb: int, uid: int) -> None:
    image = image_of(scratch)
    fd = os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        _fill(fd, os.path.dirname(image.rstrip("/")), cap_mb)
    except (OSError, subprocess.SubprocessError):
        os.close(fd)
        os.unlink(image)
        raise
    os.close(fd)
    try:
        # noinit_itable: no background zeroing of inode tables, which would allocate the image
        _run([_tool("mount"), "-t", "ext4", "-o", "loop,nosuid,nodev,discard,noinit_itable",
              image, scratch])
    except (OSError, subprocess.SubprocessError):
        os.unlink(image)
        raise
    os.chown(scratch, uid, uid)  # the file system's root: the worker's (its image is root's)
    try:
        os.rmdir(os.path.join(scratch, "lost+found"))
    except OSError:
        pass


# A pristine file system of each cap, made once per folder of scratches (a pool's root) by
# mkfs and copied, sparse, into each new scratch's image: 4 MB of metadata, ~1.4 ms of CPU
# against ~8 ms for running mkfs.ext4 per worker (bench_trust.py: every CPU-millisecond of a
# worker's start competes with the episodes beside it).
PRISTINE = ".pristine-{cap}.img"
_PRISTINE_LOCK = threading.Lock()


def _fill(fd: int, folder: str, cap_mb: int) -> None:
    """Make the open, empty image `fd` a fresh ext4 of `cap_mb`: a copy of the folder's
    pristine one (made on first use), only its data extents written."""
    src = _pristine(folder, cap_mb)
    with open(src, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        os.ftruncate(fd, size)  # sparse: the host pays only for what is written
        for start, length in _extents(f.fileno(), size):
            done = 0
            while done < length:
                n = os.copy_file_range(f.fileno(), fd, length - done, start + done, start + done)
                if n <= 0:
                    raise OSError(f"copying the scratch file system stopped at {start + done}")
                done += n


def _pristine(folder: str, cap_mb: int) -> str:
    path = os.path.join(folder, PRISTINE.format(cap=int(cap_mb)))
    with _PRISTINE_LOCK:
        if os.path.isfile(path) and not os.path.islink(path):
            return path
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.ftruncate(fd, cap_mb << 20)
        finally:
            os.close(fd)
        try:
            _run([_tool("mkfs.ext4"), "-q", "-F", "-m", "0", "-O", "^has_journal",
                  "-E", "root_owner=0:0,nodiscard", tmp])
            os.rename(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        return path


def _extents(fd: int, size: int) -> list[tuple[int, int]]:
    """(offset, length) of each data extent of a sparse file."""
    out, off = [], 0
    while off < size:
        try:
            start = os.lseek(fd, off, os.SEEK_DATA)
        except OSError:  # ENXIO: only a hole is left
            break
        end = os.lseek(fd, start, os.SEEK_HOLE)
        out.append((start, end - start))
        off = end
    return out


def provide(scratch: str, cap_mb: int, uid: int) -> bool:
    """Give the fresh, empty `scratch` its own file system of `cap_mb`, owned by `uid`, where
    the machine allows (see the module docstring); False: it is watched instead."""
    if not can_mount() or os.path.ismount(scratch):
        return os.path.ismount(scratch)
    try:
        _mount(scratch, cap_mb, uid)
    except (OSError, subprocess.SubprocessError) as e:
        log.warning("scratch %s is watched, not mounted: %s", scratch, e)
        return False
    return True


def unmount(scratch: str) -> None:
    """Unmount a scratch's own file system (if it has one) and remove its image."""
    if os.path.ismount(scratch):
        try:
            _run([_tool("umount") or "umount", scratch])
        except (OSError, subprocess.SubprocessError):
            try:  # busy (a process of the jail not yet reaped): detach; it goes when idle
                _run([_tool("umount") or "umount", "-l", scratch])
            except (OSError, subprocess.SubprocessError) as e:
                log.warning("scratch %s not unmounted: %s", scratch, e)
                return
    try:
        os.unlink(image_of(scratch))
    except FileNotFoundError:
        pass


def unmount_under(root: str) -> None:
    """Unmount every scratch file system under `root` (a pool's, before it is removed)."""
    root = os.path.realpath(root).rstrip("/") + "/"
    try:
        with open("/proc/self/mountinfo") as f:
            points = [_unescape(line.split()[4]) for line in f]
    except OSError:
        return
    for p in sorted({p for p in points if p.startswith(root)}, reverse=True):
        unmount(p)


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n") \
        .replace("\\134", "\\")


# ---- how full ---------------------------------------------------------------------------------

def usage(scratch: str, pids: list[int]) -> tuple[int, int | None, str | None]:
    """(bytes used, bytes free where the scratch is its own file system else None, a reason the
    reading itself fails the worker or None)."""
    if os.path.ismount(scratch):
        st = os.statvfs(scratch)
        return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_bavail * st.f_frsize, None
    return (*_walked(scratch, pids), )


def _walked(scratch: str, pids: list[int]) -> tuple[int, None, str | None]:
    """Blocks of the scratch tree and of the files the jail holds open on its file system."""
    blocks: dict[tuple[int, int], int] = {}
    problem: list[str] = []
    entries = 0
    try:
        dev = os.stat(scratch).st_dev
    except OSError:
        return 0, None, None

    def hidden(e: OSError) -> None:  # a folder that vanished mid-walk is no secret
        if isinstance(e, PermissionError):
            problem.append("it hid a folder from the disk watch (no permission)")

    for _, dirs, files, dfd in os.fwalk(scratch, follow_symlinks=False, onerror=hidden):
        for name in dirs + files:
            entries += 1
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except OSError:
                continue
            blocks[(st.st_dev, st.st_ino)] = st.st_blocks * 512
        if entries > MAX_ENTRIES:
            return sum(blocks.values()), None, f"it made more than {MAX_ENTRIES} files"
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if st.st_dev == dev and stat.S_ISREG(st.st_mode):
                blocks[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    return sum(blocks.values()), None, problem[0] if problem else None


def over(scratch: str, cap_mb: int, pids: list[int]) -> tuple[str | None, int]:
    """Why the worker on `scratch` must stop (its disk is full), or None; and the bytes used."""
    used, free, problem = usage(scratch, pids)
    if problem:
        return problem, used
    full = free < slack(cap_mb) if free is not None else used > (cap_mb << 20) - slack(cap_mb)
    if not full:
        return None, used
    return (f"its disk space ({cap_mb} MB, the cap {ENV}) was full: write smaller or fewer "
            "files"), used


# ---- room after a stop ------------------------------------------------------------------------

def make_room(scratch: str, cap_mb: int, upto: int | None) -> int:
    """Before a restored worker starts on `scratch`: if it holds more than half the cap, remove
    what is not the session's state, then undo points older than the one restored, then
    snapshots and stashes, until it holds at most half. Never follows a link (the tree is the
    dead worker's). Returns the bytes used after."""
    goal = (cap_mb << 20) // 2

    def used() -> int:
        return usage(scratch, [])[0]

    if used() <= goal:
        return used()
    state = os.path.join(scratch, "state")
    commits = os.path.join(state, "commits")
    _remove_except(scratch, KEEP_TOP)
    log_path = os.path.join(scratch, "worker.log")
    try:
        if os.lstat(log_path).st_size > LOG_KEEP:
            os.unlink(log_path)
    except OSError:
        pass
    _remove_except(state, ("commits", "snapshots", "breps", "stash"))
    names = _listdir(commits)
    keep = sorted((n for n in names if n.isdigit() and (upto is None or int(n) <= upto)), key=int)
    _remove_except(commits, tuple(keep))
    if used() <= goal:
        return used()
    # the restored commit's chain: its last checkpoint (a scene.blend) and the entries after it
    base = next((i for i in range(len(keep) - 1, -1, -1)
                 if os.path.isfile(os.path.join(commits, keep[i], "scene.blend"))), 0)
    _remove_except(commits, tuple(keep[base:]))
    if used() <= goal:
        return used()
    _remove_except(state, ("commits", "breps"))
    return used()


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path) if not os.path.islink(path) else []
    except OSError:
        return []


def _remove_except(folder: str, keep: tuple[str, ...]) -> None:
    if os.path.islink(folder) or not os.path.isdir(folder):
        return
    for name in _listdir(folder):
        if name in keep:
            continue
        path = os.path.join(folder, name)
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                shutil.rmtree(path, ignore_errors=True)  # by descriptor: no link followed
            else:
                os.unlink(path)
        except OSError:
            continue
