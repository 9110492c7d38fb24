"""A worker forked from the template jails itself before it reads its first request.

A worker started from scratch is jailed by bubblewrap (tools/sandbox/jail.py) and then imports
bpy and CadQuery. A worker forked from the template (tools/worker/template.py) has those
imports already, so it builds the same jail itself, in the order bubblewrap does:
- as root, it drops to its own host uid (the supervisor's lease) and no supplementary groups;
- it unshares a user namespace (the uid seen inside is `inside_uid`, mapped to that host uid
  alone), and mount, pid, network, ipc, uts and cgroup namespaces, and forks: the child is
  pid 1 of the new pid namespace, the parent stays as its wrapper and mirrors its exit. As
  root the template forks it into a new pid namespace already (one fork, no wrapper): it is
  pid 1 from the start, and its mount namespace (made as root) is not its user namespace's;
- the child builds a new root on a tmpfs from the supervisor's list of binds (the same list
  the bubblewrap command line is made from), with proc, a minimal /dev, an empty read-only
  /proc/sys, and pivots into it; every bind is nosuid and nodev, the root read-only;
- it drops every capability (bounding, ambient, effective, permitted, inheritable), sets
  no_new_privs, starts a session of its own, and loads the supervisor's seccomp filter last.
Nothing of the template's own state is reachable afterwards: the template never ran input
of any session, and its file descriptors are closed before the filter is loaded.
"""

from __future__ import annotations

import ctypes
import os
import platform
import signal
import stat

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.syscall.restype = ctypes.c_long

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 21, 1 << 24
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP = 1, 4, 24, 38, 22
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
SECCOMP_MODE_FILTER = 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_NR = {"x86_64": {"pivot_root": 155, "capset": 126},
       "aarch64": {"pivot_root": 41, "capset": 91}}
NAMESPACES = (os.CLONE_NEWUSER | os.CLONE_NEWNS | os.CLONE_NEWPID | os.CLONE_NEWNET
              | os.CLONE_NEWIPC | os.CLONE_NEWUTS | os.CLONE_NEWCGROUP)
BASE = "/run"  # the base tmpfs: the old root is reached under it at /oldroot until the pivot
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")


class JailError(Exception):
    """The jail could not be built: the child exits without running anything."""


def _check(rc: int, what: str) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise JailError(f"{what}: {os.strerror(e)}")


def _mount(src: str | None, dst: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)), f"mount {src} on {dst}")


def _prctl(*args: int) -> None:
    _check(_libc.prctl(*[ctypes.c_ulong(a) for a in args]), f"prctl {args[0]}")


def _syscall(name: str, *args) -> int:
    nr = _NR[platform.machine()][name]
    rc = _libc.syscall(ctypes.c_long(nr), *args)
    if rc < 0:
        raise JailError(f"{name}: {os.strerror(ctypes.get_errno())}")
    return rc


def die_with_parent() -> None:
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def enter(spec: dict, seccomp_program: bytes | None, pid_one: bool = False) -> None:
    """Jail this process (a fresh fork of the template, single-threaded); returns in the jailed
    process, pid 1 of its own pid namespace.

    With `pid_one` (as root: the template forked it into a new pid namespace, see
    tools/worker/template.py) it is pid 1 already: it mounts its namespace's /proc while it
    builds the view, and its user namespace owns no mount or pid namespace (it can mount
    nothing, even before its capabilities go). Otherwise it unshares the pid namespace too and
    forks: the parent never returns, it waits for the child and exits as it did."""
    as_root = os.geteuid() == 0
    if pid_one and not (as_root and os.getpid() == 1):
        raise JailError("a worker forked into its own pid namespace must be its pid 1, as root")
    if as_root:  # the view is built as root (reading what only root may), then root is gone
        host_uid = spec.get("uid")
        if not host_uid:
            raise JailError("a jailed worker started as root needs its own host uid")
        os.unshare(os.CLONE_NEWNS)
        _build_root(spec, proc=pid_one)
        os.setgroups([])
        os.setresgid(host_uid, host_uid, host_uid)
        os.setresuid(host_uid, host_uid, host_uid)
        # a uid change made the process non-dumpable, and its /proc files root's: its own again
        # (as after the exec that follows `setpriv` in a worker started from scratch)
        _prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    uid, gid = os.geteuid(), os.getegid()
    os.unshare(NAMESPACES & ~(os.CLONE_NEWNS | os.CLONE_NEWPID) if pid_one else NAMESPACES)
    inside = int(spec["inside_uid"])
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{inside} {uid} 1")
    _write("/proc/self/gid_map", f"{inside} {gid} 1")
    if not pid_one:
        pid = os.fork()
        if pid:
            _wrapper(pid)  # never returns
        die_with_parent()  # the wrapper's death (its own follows the template's)
        if as_root:
            _proc("/proc")
        else:
            _build_root(spec, proc=True)
    os.chdir(spec["chdir"])
    os.setsid()
    _drop_caps()
    _prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if seccomp_program is not None:
        _load_seccomp(seccomp_program)


def _wrapper(child: int) -> None:
    """The parent outside the new pid namespace: closes everything, waits, mirrors the exit."""
    os.closerange(0, 65536)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(1)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _build_root(spec: dict, proc: bool) -> None:
    """The new root, pivoted into and read-only; with `proc`, its /proc mounted (by pid 1 of
    the pid namespace it is for), else only the empty mount point for it."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", BASE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    for d in ("newroot", "oldroot"):
        os.mkdir(os.path.join(BASE, d), 0o755)
    _mount(os.path.join(BASE, "newroot"), os.path.join(BASE, "newroot"), None, MS_BIND | MS_REC)
    # bind sources are resolved in the old root before it moves (bubblewrap does the same)
    ops = _resolve(spec["fs"])
    _syscall("pivot_root", BASE.encode(), os.path.join(BASE, "oldroot").encode())
    os.chdir("/")
    _apply(ops)
    if proc:
        _proc("/newroot/proc")
    else:  # the host's, until pid 1 mounts its own over it (as the outer bubblewrap binds it)
        _bind("/oldroot/proc", "/newroot/proc", readonly=False)
    _dev(bool(spec.get("dri")), int(spec["tmpfs_bytes"]))
    _umount("/oldroot")
    os.chdir("/newroot")
    _syscall("pivot_root", b".", b".")
    _umount(".")
    os.chdir("/")
    _remount_ro("/")


def _umount(path: str) -> None:
    _check(_libc.umount2(path.encode(), MNT_DETACH), f"umount {path}")


def _resolve(args: list[str]) -> list[tuple]:
    """bubblewrap's filesystem arguments (jail._filesystem) as (op, source, dest, perms, size)."""
    ops: list[tuple] = []
    perms: int | None = None
    size: int | None = None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--perms":
            perms, i = int(args[i + 1], 8), i + 2
            continue
        if a == "--size":
            size, i = int(args[i + 1]), i + 2
            continue
        if a in ("--ro-bind", "--bind", "--dev-bind", "--symlink"):
            src, dst = args[i + 1], args[i + 2]
            if a != "--symlink":
                src = os.path.realpath(src)
            ops.append((a, src, dst, perms, size))
            i += 3
        elif a in ("--dir", "--tmpfs", "--remount-ro"):
            ops.append((a, None, args[i + 1], perms, size))
            i += 2
        else:
            raise JailError(f"unknown filesystem argument {a!r}")
        perms = size = None
    return ops


def _apply(ops: list[tuple]) -> None:
    for op, src, dst, perms, size in ops:
        target = "/newroot" + dst
        if op == "--dir":
            _mkdirs(target, perms if perms is not None else 0o755)
        elif op == "--symlink":
            _mkdirs(os.path.dirname(target), 0o755)
            os.symlink(src, target)
        elif op == "--tmpfs":
            _mkdirs(target, 0o755)
            opts = f"mode={perms if perms is not None else 0o755:o}" + (f",size={size}" if size else "")
            _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, opts)
        elif op == "--remount-ro":
            _remount_ro(target)
        else:
            _bind("/oldroot" + src, target, readonly=op == "--ro-bind", devices=op == "--dev-bind")


def _mkdirs(path: str, mode: int) -> None:
    if os.path.isdir(path):
        return
    _mkdirs(os.path.dirname(path), 0o755)
    os.mkdir(path, mode)
    os.chmod(path, mode)


def _bind(src: str, target: str, readonly: bool, devices: bool = False) -> None:
    st = os.stat(src)
    if stat.S_ISDIR(st.st_mode):
        _mkdirs(target, 0o755)
    elif not os.path.lexists(target):
        _mkdirs(os.path.dirname(target), 0o755)
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o444))
    _mount(src, target, None, MS_BIND | MS_REC)
    extra = MS_NOSUID | (0 if devices else MS_NODEV) | (MS_RDONLY if readonly else 0)
    for mnt in _mounts_under(target):
        _remount(mnt, extra)


def _mounts_under(target: str) -> list[str]:
    """`target` and every mount point below it, from this namespace's mountinfo."""
    out = [target]
    proc = "/oldroot/proc" if os.path.isdir("/oldroot/proc/self") else "/proc"  # before the last pivot
    with open(f"{proc}/self/mountinfo") as f:
        below = target.rstrip("/") + "/"
        for line in f:
            point = _unescape(line.split(maxsplit=5)[4])
            if point.startswith(below):
                out.append(point)
    return out


def _unescape(field: str) -> str:
    """mountinfo's octal escapes (\\040 for a space), without a codec import (none is reachable
    between the pivots)."""
    if "\\" not in field:  # nearly every line: the jail reads the whole table once per bind
        return field
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


_ST_TO_MS = {os.ST_RDONLY: MS_RDONLY, os.ST_NOSUID: MS_NOSUID, os.ST_NODEV: MS_NODEV,
             os.ST_NOEXEC: MS_NOEXEC, os.ST_NOATIME: MS_NOATIME, os.ST_NODIRATIME: MS_NODIRATIME,
             os.ST_RELATIME: MS_RELATIME}


def _remount(path: str, extra: int) -> None:
    """A bind remount keeping the flags the mount has (a user namespace may not clear them)."""
    try:
        have = os.statvfs(path).f_flag
    except OSError:
        return  # a mount point we cannot reach (under a dir closed to us): left as bound
    flags = extra
    for st, ms in _ST_TO_MS.items():
        if have & st:
            flags |= ms
    _mount(None, path, None, MS_BIND | MS_REMOUNT | flags)


def _remount_ro(path: str) -> None:
    for mnt in _mounts_under(path) if path != "/" else ["/"]:
        _remount(mnt, MS_RDONLY)


def _proc(target: str) -> None:
    """proc of the new pid namespace, its kernel knobs read-only (as `bwrap --proc`), and no
    /proc/sys at all."""
    _mkdirs(target, 0o755)
    _mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in ("sysrq-trigger", "irq", "bus"):
        p = os.path.join(target, name)
        if os.path.exists(p):
            _mount(p, p, None, MS_BIND | MS_REC)
            _remount(p, MS_RDONLY | MS_NOSUID | MS_NODEV)
    # an empty, read-only /proc/sys (bubblewrap's `--tmpfs /proc/sys --remount-ro /proc/sys`)
    _mount("tmpfs", f"{target}/sys", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4096")
    _remount(f"{target}/sys", MS_RDONLY | MS_NOSUID | MS_NODEV)


def _dev(dri: bool, tmpfs_bytes: int) -> None:
    """A minimal /dev (as `bwrap --dev`), the GPU nodes when there are some, a small /dev/shm;
    read-only but for the nodes themselves."""
    target = "/newroot/dev"
    _mkdirs(target, 0o755)
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    for name in DEV_NODES:
        if os.path.exists("/oldroot/dev/" + name):
            _bind("/oldroot/dev/" + name, f"{target}/{name}", readonly=False, devices=True)
    for name, to in (("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                     ("stderr", "/proc/self/fd/2"), ("fd", "/proc/self/fd"), ("core", "/proc/kcore")):
        os.symlink(to, f"{target}/{name}")
    if dri and os.path.isdir("/oldroot/dev/dri"):
        _bind("/oldroot/dev/dri", f"{target}/dri", readonly=False, devices=True)
    _mkdirs(f"{target}/shm", 0o755)
    _mount("tmpfs", f"{target}/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={tmpfs_bytes}")
    _remount(target, MS_RDONLY | MS_NOSUID | MS_NODEV)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _drop_caps() -> None:
    cap = 0
    while _libc.prctl(ctypes.c_ulong(PR_CAPBSET_DROP), ctypes.c_ulong(cap), ctypes.c_ulong(0),
                      ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0:
        cap += 1
    if cap < 38:  # CAP_PERFMON and below exist on every kernel this runs on
        raise JailError(f"could not drop capability {cap}: {os.strerror(ctypes.get_errno())}")
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _syscall("capset", ctypes.byref(header), ctypes.byref(data))


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _load_seccomp(program: bytes) -> None:
    if not program or len(program) % 8:
        raise JailError("the seccomp filter is empty or not whole instructions")
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _check(_libc.prctl(ctypes.c_ulong(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER),
                       ctypes.cast(ctypes.pointer(prog), ctypes.c_void_p), ctypes.c_ulong(0),
                       ctypes.c_ulong(0)), "seccomp")
