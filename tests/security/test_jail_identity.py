"""Distinct identities: as root, every live worker (the verifier's included) runs as a host
uid of its own, and its scratch is 0700 under that uid; `tools doctor` reports that uid.

A jailed script cannot even name another worker's scratch (its mount namespace holds its own
alone); what the uids add is the next wall: a process that got out of its namespaces, or any
other process of the machine as `nobody`, still finds every other live scratch closed. The
escaped worker is played by `setpriv` to worker A's host uid, outside every namespace.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tools import ToolSession, WorkerPool
from tools.runtime.verifier import CleanRoom
from tools.sandbox import identity

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="host uids are root's to hand out")


def _jail_uids(worker) -> set[int]:
    """Every uid (real, effective, saved, fs) of the worker's host processes but its
    outer bubblewrap's (root, the one that builds the mounts before setpriv drops)."""
    uids: set[int] = set()
    for pid in worker.host_pids():
        with open(f"/proc/{pid}/status") as f:
            line = next(x for x in f if x.startswith("Uid:"))
        uids |= {int(u) for u in line.split()[1:]} - {0}
    return uids


def _as(uid: int, *cmd: str) -> int:
    return subprocess.run([shutil.which("setpriv"), f"--reuid={uid}", f"--regid={uid}",
                           "--clear-groups", "--", *cmd], capture_output=True).returncode


@pytest.fixture
def verifier_session():
    room = CleanRoom(size=0)
    s = ToolSession(room.pool)
    yield s
    s.close()
    room.close()


def test_each_worker_and_the_verifier_run_as_their_own_host_uid(worker_pool, verifier_session):
    with ToolSession(worker_pool) as a, ToolSession(worker_pool) as b:
        ua, ub, uv = (_jail_uids(s._w()) for s in (a, b, verifier_session))
        assert len(ua) == len(ub) == len(uv) == 1, (ua, ub, uv)
        assert len(ua | ub | uv) == 3
        for u in ua | ub | uv:
            assert identity.UID_BASE <= u < identity.UID_BASE + identity.UID_SLOTS
        for s, (u,) in ((a, ua), (b, ub), (verifier_session, uv)):
            st = os.lstat(s.scratch)
            assert st.st_mode & 0o777 == 0o700 and st.st_uid == u
        (escaped,) = ua
        for other in (b, verifier_session):
            target = str(other.scratch)
            assert _as(escaped, "ls", target) != 0
            assert _as(escaped, "touch", os.path.join(target, "planted")) != 0
            assert _as(escaped, "cat", os.path.join(target, "worker.log")) != 0
            assert not os.path.exists(os.path.join(target, "planted"))
            assert _as(65534, "touch", os.path.join(target, "planted")) != 0  # nor `nobody`
        assert _as(escaped, "touch", os.path.join(str(a.scratch), "mine")) == 0  # its own: yes


def test_a_restarted_worker_gets_a_fresh_uid_and_owns_the_restored_scratch(worker_pool):
    with ToolSession(worker_pool) as s:
        assert s.call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}).ok
        (before,) = _jail_uids(s._w())
        assert s._fault("abort").error.kind.value == "crash"
        assert s.call("add_primitive", {"kind": "cube", "name": "B", "dimensions": [1, 1, 1]}).ok
        (after,) = _jail_uids(s._w())
        assert after != before  # a uid just freed is the last one handed out again
        owners = {os.lstat(os.path.join(d, n)).st_uid for d, ds, fs in os.walk(s.scratch)
                  for n in ds + fs}
        assert owners == {after}, owners  # nothing of the dead uid's is left to it


def test_a_uid_is_held_while_its_worker_lives_and_free_after():
    import fcntl

    pool = WorkerPool(size=0)
    try:
        w = pool.spawn()
        uid = w.identity.uid
        fd = os.open(os.path.join(identity.LOCK_DIR, str(uid)), os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # what another supervisor would try
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            pool.release(w)
            assert uid not in identity.uids_running()
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free for the next worker
        finally:
            os.close(fd)
    finally:
        pool.close()


def test_doctor_reports_the_true_host_uid():
    from tools.cli.doctor import measure, verdict

    r = measure()
    assert r["outside_uid"] == r["host_uid"] != 0
    assert identity.UID_BASE <= r["host_uid"] < identity.UID_BASE + identity.UID_SLOTS
    assert r["scratch_mode"] == "0o700" and r["scratch_uid"] == r["host_uid"]
    assert verdict(r) == []
