"""The same jail when the app runs as an ordinary user: `tools doctor` run as one.

As root, the test makes a system user (`mwtest`), gives it a readable copy of the interpreter
(the pyenv install sits under /root, which other users cannot enter) and runs the doctor as
that user through `runuser`; the properties asserted are those asserted as root.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig

import pytest

from tools import sandbox

USER = "mwtest"


def _user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run([shutil.which("useradd") or "useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        USER], check=True, capture_output=True)
        return pwd.getpwnam(USER)


def _readable_python(dest: str) -> str:
    """A copy of the interpreter and its stdlib outside /root; the venv's site-packages and
    this checkout are readable as they are."""
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
                        ignore=shutil.ignore_patterns("test", "site-packages", "__pycache__", "idlelib",
                                                      "tkinter", "turtledemo"), symlinks=True)
        os.chmod(dest, 0o755)
    return exe


@pytest.fixture(scope="module")
def doctor_as_user(tmp_path_factory):
    if os.geteuid() != 0:  # already an ordinary user: the rest of the suite is this case
        out = subprocess.run([sys.executable, "-m", "tools.doctor", "--json"], capture_output=True,
                             text=True, timeout=600)
        return json.loads(out.stdout), os.geteuid()
    if not shutil.which("runuser") or not shutil.which("useradd"):
        pytest.skip("runuser/useradd missing: cannot run the jail as an ordinary user")
    user = _user()
    exe = _readable_python("/tmp/modelwright-secure-python")
    home = tmp_path_factory.mktemp("mwtest")
    os.chmod(home.parent, 0o755)
    os.chmod(home, 0o755)
    os.chown(home, user.pw_uid, user.pw_gid)
    site = [p for p in sys.path if p.endswith("site-packages")]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home), "LANG": "C.UTF-8",
           "PYTHONPATH": os.pathsep.join([sandbox.PROJECT_ROOT, *site]), "OMP_NUM_THREADS": "1",
           "LD_LIBRARY_PATH": os.path.join(os.path.dirname(os.path.dirname(exe)), "lib")}
    out = subprocess.run([shutil.which("runuser"), "-u", USER, "--", exe, "-s", "-m", "tools.doctor", "--json"],
                         capture_output=True, text=True, timeout=600, env=env, cwd=str(home))
    assert out.stdout.strip(), out.stderr[-2000:]
    return json.loads(out.stdout), user.pw_uid


def test_ordinary_user_gets_the_same_jail(doctor_as_user):
    r, uid = doctor_as_user
    assert r["jailed"] and r["app_uid"] == uid != 0
    assert r["uid"] == sandbox.INSIDE_UID and r["host_uid"] == uid  # never root, in or out
    assert r["capabilities_dropped"] and r["cap_eff"] == "0000000000000000"
    assert r["seccomp"] == 2 and r["no_new_privs"]
    assert r["network_interfaces"] == ["lo"]
    assert r["memory_cap_mb"] and r["pids_cap"] and r["cpu_cap_s"]
    assert not r["sys_visible"] and r["proc_sys_entries"] == 0


def test_root_and_ordinary_user_see_the_same_properties(doctor_as_user):
    from tools.doctor import measure

    as_user, _ = doctor_as_user
    as_me = measure()
    for key in ("uid", "gid", "cap_eff", "cap_bnd", "seccomp", "no_new_privs", "network_interfaces",
                "memory_cap_mb", "pids_cap", "cpu_cap_s", "sys_visible", "proc_sys_entries"):
        assert as_user[key] == as_me[key], key
    assert as_me["host_uid"] != 0
