"""Helpers of the security suite: run hostile Python inside a worker past the script lint.

The AST check of `cadquery_script` is a lint, not the boundary: these payloads reach real
`os`/`importlib` through stdlib modules' private references, then run a probe with real
builtins. What the probe can DO is what the jail must make harmless.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from dataclasses import dataclass

import pytest

from tools import ToolSession

# Each stage one ends with `imp`, the worker's real importlib.import_module.
BYPASSES = {
    "dataclasses.sys": "import dataclasses\nimp = dataclasses.sys.modules['importlib'].import_module\n",
    "random._os": "import random\nimp = random._os.sys.modules['importlib'].import_module\n",
    "typing.sys": "import typing\nimp = typing.sys.modules['importlib'].import_module\n",
    "operator.attrgetter": (
        "import operator, collections\n"
        "g = operator.attrgetter('__globals__')(collections.namedtuple)\n"
        "imp = g['_sys'].modules['importlib'].import_module\n"),
    "generator frames": (
        "def gen():\n    yield me.gi_frame.f_back.f_back.f_globals\n"
        "me = gen()\ng = next(me)\n"
        "imp = g['os'].sys.modules['importlib'].import_module\n"),
}


def payload(probe: str, report: str, params: dict, bypass: str = "dataclasses.sys") -> str:
    """A cadquery_script that escapes the lint, runs `probe` with real builtins, and writes
    the probe's `out` dict as JSON to `report` (a path in the session's workspace)."""
    return (BYPASSES[bypass]
            + "bi = imp('builtins')\n"
            + f"bi.exec({PRELUDE + probe + EPILOGUE!r}, "
            + f"{{'__builtins__': bi, 'REPORT': {report!r}, 'PARAMS': {json.dumps(params)!r}}})\n"
            + "import cadquery as cq\nresult = cq.Workplane().box(1, 1, 1)\n")


PRELUDE = '''
import ctypes, errno, json, os, socket, sys
PARAMS = json.loads(PARAMS)
out = {}
libc = ctypes.CDLL(None, use_errno=True)

def attempt(name, fn):
    try:
        out[name] = "ok: " + repr(fn())[:200]
    except BaseException as e:
        out[name] = "refused: " + type(e).__name__ + " " + str(e)[:200]

def sys_call(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if r == -1:
        err = ctypes.get_errno()
        raise OSError(err, errno.errorcode.get(err, str(err)))
    return r
'''
EPILOGUE = '''
with open(REPORT, "w") as f:
    json.dump(out, f)
'''


def run_probe(session, probe: str, params: dict | None = None, bypass: str = "dataclasses.sys",
              deadline_s: float = 60) -> dict:
    """Run `probe` in the session's worker through `bypass`; the probe's `out` dict."""
    name = f"report-{uuid.uuid4().hex[:8]}.json"
    report = os.path.join(str(session.workspace), name)
    code = payload(probe, report, params or {}, bypass)
    r = session.call("cadquery_script", {"code": code, "name": "probe"}, deadline_s=deadline_s)
    assert r.ok, f"the payload itself failed (the lint changed?): {r.error}"
    with open(report) as f:
        return json.load(f)


@pytest.fixture
def hostile_session():
    """A session on its own worker with the test hooks, killed afterwards (the planted code
    must not outlive it)."""
    from tools import WorkerPool

    pool = WorkerPool(size=0, test_hooks=True, prewarm=False)
    s = ToolSession(pool, deadline_s=60)
    yield s
    s.close()
    pool.close()


@pytest.fixture
def fresh_session(worker_pool):
    """A session of its own (for attacks that may break the worker)."""
    s = ToolSession(worker_pool, deadline_s=60)
    yield s
    s.close()


# ---- the jail as an ordinary user -------------------------------------------------------------

USER = "mwtest"
SECURITY_DIR = os.path.dirname(os.path.abspath(__file__))


@dataclass
class OrdinaryUser:
    """A system user that runs this checkout's Python through `runuser` (the suite runs as root)."""

    name: str
    uid: int
    exe: str  # a copy of the interpreter it can read
    env: dict
    home: str  # its HOME (cwd); it writes only there and in its TMPDIR

    def python(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([shutil.which("runuser"), "-m", "-u", self.name, "--", self.exe, "-s",
                               *args],
                              capture_output=True, text=True, timeout=timeout, env=self.env,
                              cwd=self.home)

    def can_read(self, path: str) -> bool:
        return subprocess.run([shutil.which("runuser"), "-u", self.name, "--", "test", "-r", path,
                               "-a", "(", "!", "-d", path, "-o", "-x", path, ")"],
                              capture_output=True).returncode == 0


def _user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run([shutil.which("useradd") or "useradd", "--system", "--no-create-home",
                        "--shell", "/usr/sbin/nologin", USER], check=True, capture_output=True)
        return pwd.getpwnam(USER)


def _readable_python(dest: str) -> str:
    """A copy of the interpreter and its stdlib outside /root (a pyenv install sits under
    /root, which other users cannot enter)."""
    base = sys.base_prefix
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    exe = os.path.join(dest, "bin", version)
    if not os.path.exists(exe):
        os.makedirs(os.path.join(dest, "bin"), exist_ok=True)
        shutil.copy2(os.path.realpath(os.path.join(base, "bin", version)), exe)
        libdir = sysconfig.get_config_var("LIBDIR")
        os.makedirs(os.path.join(dest, "lib"), exist_ok=True)
        for name in os.listdir(libdir):
            if name.startswith("libpython"):
                shutil.copy2(os.path.join(libdir, name), os.path.join(dest, "lib", name))
        shutil.copytree(os.path.join(base, "lib", version), os.path.join(dest, "lib", version),
                        ignore=shutil.ignore_patterns("test", "site-packages", "__pycache__",
                                                      "idlelib", "tkinter", "turtledemo"),
                        symlinks=True)
        os.chmod(dest, 0o755)
    return exe


def _linked_copy(src: str, dest: str) -> None:
    """A copy of `src` the user can reach: hard links where the file system allows (the
    venv's site-packages is GBs), else real copies."""
    def link(s, d):
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)
    shutil.copytree(src, dest, copy_function=link, symlinks=True, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for d, _, _ in os.walk(dest):
        os.chmod(d, 0o755)


def _readable_code(user: OrdinaryUser, root: str) -> tuple[str, list[str]]:
    """(checkout root, site-packages dirs) that the user can read: the real ones where it can
    (a checkout under /work), else linked copies under /tmp (CI may clone under /root)."""
    from tools.sandbox import jail

    code = jail.PROJECT_ROOT
    site = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
    needed = [os.path.join(jail.PROJECT_ROOT, "tools", "__init__.py"),
              os.path.join(SECURITY_DIR, "conftest.py")]
    if not all(user.can_read(p) for p in needed):
        code = os.path.join(root, "checkout")
        _linked_copy(jail.PACKAGE_DIR, os.path.join(code, "tools"))
        _linked_copy(SECURITY_DIR, os.path.join(code, "tests", "security"))
    readable = []
    for i, p in enumerate(site):
        if not user.can_read(p):
            copy = os.path.join(root, "site", str(i), "site-packages")
            _linked_copy(p, copy)
            p = copy
        readable.append(p)
    return code, readable


@pytest.fixture(scope="session")
def ordinary_user():
    """The `mwtest` user, set up to run this checkout's workers (only when the suite is root)."""
    # Requested only by a suite run as root (as an ordinary user the suite itself is the
    # unprivileged run). The tools come with util-linux and passwd, which setup installs.
    assert os.geteuid() == 0, "ordinary_user is for a suite run as root"
    missing = [t for t in ("runuser", "useradd") if not shutil.which(t)]
    assert not missing, f"{', '.join(missing)} missing: install util-linux and passwd (make setup does)"
    pw = _user()
    exe = _readable_python(os.path.join(tempfile.gettempdir(), "modelwright-secure-python"))
    base = tempfile.mkdtemp(prefix="modelwright-mwtest-")  # /tmp/pytest-of-root is 0700
    os.chmod(base, 0o755)
    home, tmp = os.path.join(base, "home"), os.path.join(base, "tmp")  # HOME is not TMPDIR
    for d in (home, tmp):
        os.mkdir(d, 0o700)
        os.chown(d, pw.pw_uid, pw.pw_gid)
    user = OrdinaryUser(USER, pw.pw_uid, exe, {}, home)
    code, site = _readable_code(user, base)
    user.env = {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": tmp, "LANG": "C.UTF-8",
                "PYTHONPATH": os.pathsep.join([code, os.path.join(code, "tests"), *site]),
                "OMP_NUM_THREADS": "1",
                "LD_LIBRARY_PATH": os.path.join(os.path.dirname(os.path.dirname(exe)), "lib")}
    yield user
    shutil.rmtree(base, ignore_errors=True)
