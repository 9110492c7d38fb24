"""Hung and crashed workers: the caller gets a typed error and the scene as it was."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tools import ErrorKind

HANG = "import cadquery as cq\nwhile True:\n    pass\n"


def build(session):
    assert session.call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 2, 3]}).ok
    assert session.call("cad_box", {"name": "B", "length": 4, "width": 5, "height": 6}).ok
    assert session.call("snapshot", {"name": "s1"}).ok
    return session.scene_hash()


def test_python_hang_times_out_within_deadline(session):
    before = build(session)
    r = session.call("cadquery_script", {"code": HANG, "name": "X"}, deadline_s=2)
    assert r.error.kind == ErrorKind.TIMEOUT and "deadline" in r.error.message
    # The call returned before its replacement worker was taken: the restart runs in the
    # background (the next call waits for it), so a timeout costs the deadline, not a restart.
    assert session.worker is None and session._recovery is not None
    assert session.scene_hash() == before
    assert session.call("cad_query", {"name": "B"}).output["volume"] == pytest.approx(120)
    assert session.call("restore", {"name": "s1"}).ok  # snapshots survive the restart


@pytest.mark.parametrize("kind", ["hang_c"])
def test_c_level_hang_is_killed(session, kind):
    before = build(session)
    r = session._fault(kind, deadline_s=1.5)
    assert r.error.kind == ErrorKind.TIMEOUT
    assert session.scene_hash() == before


@pytest.mark.parametrize("kind", ["abort", "segfault", "exit"])
def test_crash_is_reported_and_scene_restored(session, kind):
    before = build(session)
    r = session._fault(kind)
    assert r.error.kind == ErrorKind.CRASH and "restarted" in r.error.message
    assert session.scene_hash() == before
    assert session.call("transform", {"name": "A", "location": [1, 0, 0]}).ok  # the session goes on
    assert session.call("undo", {}).ok and session.scene_hash() == before


def test_kill_9_from_outside_mid_call(session):
    before = build(session)
    victim = session.worker
    pids = victim.host_pids()

    jailed = [pid for pid in pids if _in_a_pid_namespace(pid)]  # not bubblewrap's or a wrapper
    assert jailed

    def killer():
        time.sleep(0.5)
        for pid in jailed:
            os.kill(pid, signal.SIGKILL)

    import threading

    threading.Thread(target=killer, daemon=True).start()
    r = session.call("cadquery_script", {"code": HANG, "name": "X"}, deadline_s=20)
    assert r.error.kind == ErrorKind.CRASH
    assert session.scene_hash() == before
    assert session.restarts >= 1 and session.worker is not victim


def _in_a_pid_namespace(pid: int) -> bool:
    """Whether `pid` runs in a pid namespace below this one (the jail's): NSpid has two ids."""
    with open(f"/proc/{pid}/status") as f:
        return any(line.startswith("NSpid:") and len(line.split()) > 2 for line in f)


SUPERVISOR = """
import sys, time
from tools import ToolSession, WorkerPool
pool = WorkerPool(size=1, prewarm=False)
s = ToolSession(pool)
print(" ".join(str(p) for p in s.worker.host_pids()), flush=True)
time.sleep(600)
"""


def test_workers_die_with_their_supervisor(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", SUPERVISOR], stdout=subprocess.PIPE, text=True,
                         cwd=os.path.dirname(os.path.dirname(__file__)))
    pids = [int(x) for x in p.stdout.readline().split()]
    # the worker (as root pid 1 of its namespace, the template's child; else with its wrapper)
    assert pids and all(os.path.exists(f"/proc/{pid}") for pid in pids)
    p.kill()
    p.wait()
    deadline = time.monotonic() + 120  # a margin for a loaded machine, not a measurement
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
