"""The same jail when the app runs as an ordinary user: `tools doctor` run as one.

As root, the test runs the doctor as the system user `mwtest` (conftest's `ordinary_user`: a
readable copy of the interpreter, of the checkout and site-packages where the user cannot read
them, through `runuser`); the properties asserted are those asserted as root. The escape
attempts of test_jail_escape.py run as that user too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tools.sandbox import jail


@pytest.fixture(scope="module")
def doctor_as_user(request):
    if os.geteuid() != 0:  # already an ordinary user: the rest of the suite is this case
        out = subprocess.run([sys.executable, "-m", "tools.cli.doctor", "--json"], capture_output=True,
                             text=True, timeout=600)
        return json.loads(out.stdout), os.geteuid()
    user = request.getfixturevalue("ordinary_user")  # conftest: mwtest, readable copies, runuser
    out = user.python("-m", "tools.cli.doctor", "--json")
    assert out.stdout.strip(), out.stderr[-2000:]
    return json.loads(out.stdout), user.uid


def test_ordinary_user_gets_the_same_jail(doctor_as_user):
    r, uid = doctor_as_user
    assert r["jailed"] and r["app_uid"] == uid != 0
    assert r["uid"] == jail.INSIDE_UID and r["host_uid"] == uid  # never root, in or out
    assert r["outside_uid"] == uid  # the host's truth, not the uid map's intermediate 0
    assert r["scratch_mode"] == "0o700" and r["scratch_uid"] == uid  # private to that user
    assert r["capabilities_dropped"] and r["cap_eff"] == "0000000000000000"
    assert r["seccomp"] == 2 and r["no_new_privs"]
    assert r["network_interfaces"] == ["lo"]
    assert r["memory_cap_mb"] and r["pids_cap"] and r["cpu_cap_s"]
    assert not r["sys_visible"] and r["proc_sys_entries"] == 0


def test_root_and_ordinary_user_see_the_same_properties(doctor_as_user):
    from tools.cli.doctor import measure

    as_user, _ = doctor_as_user
    as_me = measure()
    for key in ("uid", "gid", "cap_eff", "cap_bnd", "seccomp", "no_new_privs", "network_interfaces",
                "memory_cap_mb", "pids_cap", "cpu_cap_s", "sys_visible", "proc_sys_entries"):
        assert as_user[key] == as_me[key], key
    assert as_me["host_uid"] != 0
