"""How a worker process is jailed: bubblewrap where it exists, `unshare` otherwise.

The jail gives the worker no network, a read-only view of only what Python, Blender and
CadQuery need (no /etc/passwd, no home directory), and its scratch dir as the only writable
place. Where neither tool works, workers run unjailed and a warning says so; the script
checks in tools/worker/jail.py still refuse file access and forbidden imports.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
import sysconfig

log = logging.getLogger("modelwright.sandbox")
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYSTEM_RO = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache", "/etc/ld.so.conf",
             "/etc/ld.so.conf.d", "/etc/fonts", "/etc/alternatives", "/etc/localtime", "/usr/share/glvnd",
             "/etc/glvnd", "/etc/ssl/certs"]


def _python_roots() -> list[str]:
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.realpath(sys.base_prefix), PROJECT_ROOT}
    for key in ("purelib", "platlib", "stdlib"):
        roots.add(sysconfig.get_paths()[key])
    for p in sys.path:
        p = os.path.realpath(p) if p else ""
        if p and os.path.isdir(p) and not p.startswith(("/usr", "/lib")):
            roots.add(p)
    return sorted(roots)


@functools.cache
def mode() -> str:
    """'bwrap', 'unshare' or 'none', probed once per process."""
    if os.environ.get("MODELWRIGHT_SANDBOX") == "none":
        return "none"
    if shutil.which("bwrap"):
        try:
            subprocess.run(["bwrap", "--unshare-all", "--ro-bind", "/", "/", "true"], check=True,
                           capture_output=True, timeout=10)
            return "bwrap"
        except (subprocess.SubprocessError, OSError):
            pass
    if shutil.which("unshare"):
        try:
            subprocess.run(["unshare", "--user", "--net", "--map-root-user", "true"], check=True,
                           capture_output=True, timeout=10)
            log.warning("bubblewrap is unavailable: workers get no network (unshare) but can read the "
                        "filesystem; install bubblewrap for the full jail")
            return "unshare"
        except (subprocess.SubprocessError, OSError):
            pass
    log.warning("no sandbox tool works here (bubblewrap, unshare): workers run unjailed")
    return "none"


def wrap(argv: list[str], scratch: str, writable: list[str]) -> list[str]:
    """The command line that runs `argv` jailed, with `scratch` and `writable` read-write."""
    m = mode()
    if m == "bwrap":
        cmd = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--proc", "/proc",
               "--dev", "/dev", "--tmpfs", "/tmp", "--dir", "/run"]
        for p in SYSTEM_RO:
            if os.path.lexists(p):
                cmd += ["--ro-bind", p, p]
        if os.path.isdir("/dev/dri"):
            cmd += ["--dev-bind", "/dev/dri", "/dev/dri"]
        for p in _python_roots():
            if os.path.isabs(p) and os.path.exists(p) and not any(p == s or p.startswith(s + "/") for s in ("/usr", "/bin", "/lib")):
                cmd += ["--ro-bind", p, p]
        for p in [scratch, *writable]:
            cmd += ["--bind", p, p]
        cmd += ["--chdir", scratch, "--setenv", "HOME", scratch, "--setenv", "TMPDIR", os.path.join(scratch, "tmp")]
        return cmd + argv
    if m == "unshare":
        return ["unshare", "--user", "--net", "--map-root-user", "--kill-child", *argv]
    return argv


def worker_env(scratch: str) -> dict[str, str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": scratch,
        "TMPDIR": os.path.join(scratch, "tmp"),
        "PYTHONPATH": PROJECT_ROOT,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "LANG": "C.UTF-8",
    }
    for key in ("MW_WORKER_DEBUG", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS", "LP_NUM_THREADS"):
        if key in os.environ:
            env[key] = os.environ[key]
    env.setdefault("OMP_NUM_THREADS", "1")
    return env
