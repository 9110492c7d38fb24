"""How a worker process is jailed: bubblewrap in a user namespace, with seccomp and caps dropped.

Everything in a worker is hostile (model code, user scripts, imported files, Blender data), so
the jail, not the script lint of tools/worker/script_guard.py, is the boundary. It gives the worker:
- a user namespace with an unprivileged uid/gid inside, mapped to an unprivileged uid outside
  too: as root, an outer bubblewrap builds the filesystem view and `setpriv` drops to the
  worker's own host uid (tools/sandbox/identity.py: one per live worker, from a reserved range) before
  the inner bubblewrap unshares the user namespace, because a jail whose uid maps to host root
  may still write /proc/sys and is exempt from RLIMIT_NPROC;
- no capabilities (bounding set empty), no_new_privs, the seccomp filter of tools/sandbox/seccomp.py;
- no network (an empty network namespace), its own pid/ipc/uts namespaces, no /sys, an empty
  read-only /proc/sys;
- read-only binds of only the interpreter, its stdlib, site-packages and the project's `tools`
  package (not the checkout, not .git, not the caller's cwd), and scratch as the only
  writable place.
Memory, process and CPU caps are rlimits the worker sets on itself before it runs anything
(tools/worker/main.py): cgroup v2 delegation is not available on every machine (not here).
The jail's memory as a whole, shared memory included, is watched from outside
(tools/sandbox/memwatch.py); its disk (the scratch) is a capped file system as root, and watched as
an ordinary user (tools/sandbox/diskwatch.py).
Where the jail cannot be built, untrusted input is refused (`require_jail`) unless the user
opts in with MODELWRIGHT_ALLOW_UNJAILED_CODE=1.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
from dataclasses import dataclass, field

from tools.errors import ErrorKind, ToolError
from tools.sandbox import identity, seccomp

log = logging.getLogger("modelwright.sandbox")
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE_DIR = os.path.join(PROJECT_ROOT, "tools")
SYSTEM_RO = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache",
             "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/fonts", "/etc/alternatives",
             "/etc/localtime", "/usr/share/glvnd", "/etc/glvnd"]
ALLOW_UNJAILED_ENV = "MODELWRIGHT_ALLOW_UNJAILED_CODE"
INSIDE_UID = 65534  # the uid the worker sees, whoever runs the app
TMPFS_BYTES = 64 << 20


def _env_int(name: str, default: int):
    return field(default_factory=lambda: int(os.environ.get(name, str(default))))


@dataclass(frozen=True)
class Limits:
    """Per-worker caps, read from the environment when a worker starts; a worker serves one
    session, so these are per-session caps. `memory_mb` is RLIMIT_DATA per process inside,
    and the whole jail's cap, shared memory included, of tools/sandbox/memwatch.py."""
    memory_mb: int = _env_int("MODELWRIGHT_WORKER_MEMORY_MB", 4096)
    max_procs: int = _env_int("MODELWRIGHT_WORKER_MAX_PROCS", 256)  # RLIMIT_NPROC
    cpu_s: int = _env_int("MODELWRIGHT_WORKER_CPU_S", 4 * 3600)  # RLIMIT_CPU
    # what the scratch may hold, of tools/sandbox/diskwatch.py (and RLIMIT_FSIZE, when under 4 GiB)
    disk_mb: int = _env_int("MODELWRIGHT_WORKER_DISK_MB", 8192)

    def argv(self) -> list[str]:
        return ["--memory-mb", str(self.memory_mb), "--max-procs", str(self.max_procs),
                "--cpu-s", str(self.cpu_s), "--disk-mb", str(self.disk_mb)]


def _is_root() -> bool:
    return os.geteuid() == 0


@functools.cache
def python_paths() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(read-only dirs/files to bind, site-packages dirs the worker must put on sys.path);
    computed once: every worker start needs them twice (its binds and its PYTHONPATH)."""
    paths = sysconfig.get_paths()
    binds = {paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"],
             os.path.join(paths["stdlib"], "lib-dynload"), PACKAGE_DIR,
             os.path.join(sys.prefix, "pyvenv.cfg")}
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    ldlib = sysconfig.get_config_var("LDLIBRARY") or ""
    for name in (ldlib, ldlib + ".1.0", "libpython3.so"):
        if libdir and name:
            binds.add(os.path.join(libdir, name))
    binds.update(_loaded_libpython())
    site = [p for p in sys.path if os.path.basename(p.rstrip("/")) in ("site-packages", "dist-packages")
            and os.path.isdir(p)]
    binds.update(site)
    out = set()
    for p in binds:
        if not p or not os.path.exists(p):
            continue
        out.add(os.path.abspath(p))
        out.add(os.path.realpath(p))
    return tuple(sorted(p for p in out if not _under_system(p))), tuple(site)


def _loaded_libpython() -> set[str]:
    """The libpython this interpreter really mapped (RPATH or LD_LIBRARY_PATH may point
    elsewhere than LIBDIR, e.g. for a copied interpreter)."""
    try:
        with open("/proc/self/maps") as f:
            return {line.split()[-1] for line in f if "/libpython" in line and line.split()[-1].startswith("/")}
    except OSError:
        return set()


def _under_system(p: str) -> bool:
    return any(p == s or p.startswith(s + "/") for s in ("/usr", "/bin", "/lib", "/lib64", "/sbin"))


def _executable_links(made: set[str]) -> list[str]:
    """--symlink/--ro-bind args that recreate sys.executable's chain of links to the binary."""
    args: list[str] = []
    p = os.path.abspath(sys.executable)
    for _ in range(16):
        if not os.path.islink(p):
            if not _under_system(p):
                args += ["--ro-bind", p, p]
            return args
        target = os.readlink(p)
        args += _parents(p, made) + ["--symlink", target, p]
        p = os.path.normpath(os.path.join(os.path.dirname(p), target))
    return args


def _filesystem(scratch: str, writable: list[str], readonly: tuple[str, ...] = ()) -> list[str]:
    args: list[str] = ["--size", str(TMPFS_BYTES), "--tmpfs", "/tmp", "--dir", "/run"]
    for p in SYSTEM_RO:
        if os.path.lexists(p):
            args += ["--ro-bind", p, p]
    made: set[str] = {"/tmp"}
    ro, _ = python_paths()
    for p in ro:
        args += _parents(p, made) + ["--ro-bind", p, p]
    args += _executable_links(made)
    for p in readonly:  # more of the project, e.g. `training/` for the geometry checker
        args += _parents(p, made) + ["--ro-bind", p, p]
    for p in [scratch, *writable]:
        args += _parents(p, made) + ["--bind", p, p]
    return args


def _parents(path: str, made: set[str]) -> list[str]:
    """World-traversable parent dirs, so an unprivileged bwrap can reach binds under /root."""
    args: list[str] = []
    parts = os.path.dirname(path).strip("/").split("/")
    for i in range(1, len(parts) + 1):
        d = "/" + "/".join(parts[:i])
        if parts[0] and d not in made:
            made.add(d)
            args += ["--perms", "0755", "--dir", d]
    return args


def _inner(fs: list[str], seccomp_fd: int | None, uid: int) -> list[str]:
    cmd = ["bwrap", "--unshare-all", "--unshare-user", "--uid", str(uid), "--gid", str(uid),
           "--disable-userns", "--cap-drop", "ALL", "--die-with-parent", "--new-session", *fs,
           "--proc", "/proc", "--tmpfs", "/proc/sys", "--remount-ro", "/proc/sys", "--dev", "/dev"]
    if os.path.isdir("/dev/dri"):  # the GPU for EGL rendering: see the threat model in the README
        cmd += ["--dev-bind", "/dev/dri", "/dev/dri"]
    # tmpfs is RAM that RLIMIT_DATA does not count: a small /dev/shm, the rest of /dev read-only
    cmd += ["--size", str(TMPFS_BYTES), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    # bwrap's own root is an uncapped tmpfs that an unprivileged bwrap leaves writable by the
    # jail (/etc, /run made for binds): writes there are RAM no limit counts. Read-only, last.
    cmd += ["--remount-ro", "/"]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    return cmd


def wrap(argv: list[str], scratch: str, writable: list[str], seccomp_fd: int | None = None,
         uid: int | None = None, readonly: tuple[str, ...] = ()) -> list[str]:
    """The command line that runs `argv` jailed, with `scratch` and `writable` read-write, as
    host uid `uid` (root only: an identity.lease()'s; an ordinary user's workers are that user);
    `readonly`: more paths bound read-only (the project's `training/` for its checker)."""
    return _command(argv, scratch, writable, seccomp_fd, uid, readonly) if mode() == "bwrap" else argv


def _command(argv: list[str], scratch: str, writable: list[str], seccomp_fd: int | None,
             uid: int | None, readonly: tuple[str, ...] = ()) -> list[str]:
    fs = _filesystem(scratch, writable, readonly)
    if not _is_root():
        return [*_inner(fs, seccomp_fd, INSIDE_UID), "--chdir", scratch, "--", *argv]
    outer = ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts",
             "--unshare-cgroup-try", "--die-with-parent", "--new-session",
             "--bind", "/proc", "/proc", "--dev", "/dev", *fs]
    if os.path.isdir("/dev/dri"):
        outer += ["--dev-bind", "/dev/dri", "/dev/dri"]
    if uid is None or uid == 0:
        raise ValueError("a jailed worker started as root needs its own host uid")
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    inner = _inner(["--bind", "/", "/"], seccomp_fd, INSIDE_UID)
    return [*outer, "--", *drop, *inner, "--chdir", scratch, "--", *argv]


def self_jail_spec(scratch: str, uid: int | None, readonly: tuple[str, ...] = ()) -> dict:
    """What a worker forked from the template needs to build this jail itself
    (tools/worker/selfjail.py): the same binds as `wrap`'s bubblewrap command, its host uid as
    root, the uid it sees inside, whether to bind the GPU, the size of its small tmpfs."""
    if _is_root() and (uid is None or uid == 0):
        raise ValueError("a jailed worker started as root needs its own host uid")
    return {"fs": _filesystem(scratch, [], readonly), "uid": uid if _is_root() else None, "inside_uid": INSIDE_UID,
            "dri": os.path.isdir("/dev/dri"), "tmpfs_bytes": TMPFS_BYTES, "chdir": scratch}


def give_to_jail(path: str, uid: int) -> None:
    """Make a dir the jail writes into owned by the worker's host uid (as root only)."""
    if _is_root():
        os.chown(path, uid, uid, follow_symlinks=False)


def traversable(root: str) -> None:
    """A pool's root dir must be searchable by its workers' uids, not listable (as root each
    worker is its own uid; its scratch inside is 0700, its own)."""
    if _is_root():
        os.chmod(root, 0o711)


def seccomp_fd() -> int | None:
    """A fresh fd holding the compiled filter, for `bwrap --seccomp FD`; the caller closes it."""
    return _filter_fd() if mode() == "bwrap" else None


def _filter_fd() -> int:
    fd = os.memfd_create("mw-seccomp")  # close-on-exec; Popen pass_fds hands it on
    try:
        os.write(fd, _program())
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


@functools.cache
def _program() -> bytes:
    return seccomp.program()


def mode() -> str:
    """'bwrap' when the full jail starts here, else 'none'; probed once per process (under a
    lock: workers booting side by side would otherwise each probe)."""
    with _MODE_LOCK:
        return _mode()


_MODE_LOCK = threading.Lock()


@functools.cache
def _mode() -> str:
    if os.environ.get("MODELWRIGHT_SANDBOX") == "none":
        return "none"
    problem = why_unjailed()
    if problem is None:
        return "bwrap"
    log.warning("the worker jail does not work here (%s): untrusted code is refused unless %s=1",
                problem, ALLOW_UNJAILED_ENV)
    return "none"


def why_unjailed() -> str | None:
    """Why the jail cannot start here, or None when a jailed `true` runs."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed"
    if _is_root() and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    if seccomp.native_arch() is None:
        return f"no seccomp filter for {os.uname().machine}"
    import tempfile

    try:
        who = identity.lease()
    except (ToolError, OSError) as e:
        return f"no host uid for a worker: {e}"
    with tempfile.TemporaryDirectory(prefix="modelwright-probe-") as d:
        traversable(d)
        give_to_jail(d, who.uid)
        try:
            fd = _filter_fd()
        except OSError as e:
            who.release()
            return f"cannot hand bubblewrap a seccomp filter: {e}"
        try:
            cmd = _command(["true"], d, [], fd, who.uid)
            r = subprocess.run(cmd, capture_output=True, timeout=30, pass_fds=(fd,))
        except (subprocess.SubprocessError, OSError) as e:
            return str(e)
        finally:
            os.close(fd)
            who.release()
    if r.returncode != 0:
        return r.stderr.decode(errors="replace").strip().splitlines()[-1:] or f"exit {r.returncode}"
    return None


def jailed() -> bool:
    return mode() == "bwrap"


def unjailed_allowed() -> bool:
    return os.environ.get(ALLOW_UNJAILED_ENV) == "1"


def require_jail(what: str) -> None:
    """Refuse untrusted input (`what`) when workers run unjailed, unless the user opted in."""
    if jailed() or unjailed_allowed():
        return
    raise ToolError(ErrorKind.SANDBOX, f"{what} runs untrusted code, and the worker jail does not "
                    f"work on this machine (see `modelwright tools doctor`); install bubblewrap, "
                    f"or set {ALLOW_UNJAILED_ENV}=1 to run it unjailed at your own risk")


def worker_env(scratch: str) -> dict[str, str]:
    _, site = python_paths()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": scratch,
        "TMPDIR": os.path.join(scratch, "tmp"),
        "PYTHONPATH": os.pathsep.join([PROJECT_ROOT, *site]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "LANG": "C.UTF-8",
    }
    for key in ("LD_LIBRARY_PATH", "MW_WORKER_DEBUG", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS",
                "LP_NUM_THREADS", "MODELWRIGHT_OCCT_THREADS"):
        if key in os.environ:
            env[key] = os.environ[key]
    env.setdefault("OMP_NUM_THREADS", "1")
    return env
