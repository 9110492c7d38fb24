"""The memory cap counts the whole jail, shared memory included (tools/sandbox/memwatch.py).

RLIMIT_DATA counts neither MAP_SHARED nor memfd pages and is per process: each attack below
touches three times the cap that way, and must end in a typed `crash` naming the cap, with
the session serving again after (a restarted worker). The cap is made small for the test
(MODELWRIGHT_WORKER_MEMORY_MB, read when a worker starts) so that the attacks stay cheap.
"""

from __future__ import annotations

import json
import os

import pytest

from tools import ErrorKind, ToolSession, WorkerPool

from .conftest import payload

CAP_MB = 1536

TOUCH = r'''
import mmap
cap = PARAMS["cap_mb"] << 20
size = 3 * cap
how = PARAMS["how"]
step = 64 << 20
held = []  # three memfds of the cap each: RLIMIT_FSIZE bounds one file, not their number
if how == "memfd_mmap":
    for i in range(3):
        fd = os.memfd_create("hog")
        os.ftruncate(fd, cap)
        held.append(mmap.mmap(fd, cap, mmap.MAP_SHARED))
        for off in range(0, cap, 4096):
            held[-1][off] = 1
elif how == "memfd_write":  # never mapped: only the fd holds it
    block = b"x" * step
    for i in range(3):
        held.append(os.memfd_create("hog"))
        for off in range(0, cap, step):
            os.pwrite(held[-1], block, off)
elif how == "shared_anonymous":
    m = mmap.mmap(-1, size, mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    for off in range(0, size, 4096):
        m[off] = 1
elif how == "forks":  # each child under RLIMIT_DATA, together three times the cap
    import time
    kids = []
    for i in range(6):
        pid = os.fork()
        if pid == 0:
            held = bytearray(cap // 2)
            for off in range(0, len(held), 4096):
                held[off] = 1
            time.sleep(600)
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.waitpid(pid, 0)
import time
time.sleep(600)  # held until the watch stops the worker: the call never ends on its own
'''


@pytest.fixture
def small_cap_pool(monkeypatch):
    monkeypatch.setenv("MODELWRIGHT_WORKER_MEMORY_MB", str(CAP_MB))
    pool = WorkerPool(size=0, test_hooks=True)
    yield pool
    pool.close()


def attack(pool: WorkerPool, how: str) -> dict:
    """Touch 3x the cap `how`; what the session answered, and what it holds after."""
    with ToolSession(pool, deadline_s=300) as s:
        assert s.call("add_primitive", {"kind": "cube", "name": "Kept", "dimensions": [1, 1, 1]}).ok
        code = payload(TOUCH, str(s.workspace / "never.json"), {"cap_mb": CAP_MB, "how": how})
        r = s.call("cadquery_script", {"code": code, "name": "hog"})
        return {"ok": r.ok, "kind": r.error and r.error.kind.value,
                "message": r.error and r.error.message, "restarts": s.restarts,
                "after": [o["name"] for o in s.scene()["objects"]]}


def check(out: dict) -> None:
    assert not out["ok"] and out["kind"] == ErrorKind.CRASH.value, out
    assert f"more than {CAP_MB} MB" in out["message"] and "\n" not in out["message"]
    assert out["restarts"] == 1
    assert out["after"] == ["Kept"]  # the restarted worker serves, from the last commit


@pytest.mark.parametrize("how", ["memfd_mmap", "memfd_write", "shared_anonymous", "forks"])
def test_shared_and_forked_memory_over_the_cap_stops_the_worker(small_cap_pool, how):
    check(attack(small_cap_pool, how))


@pytest.mark.skipif(os.geteuid() != 0, reason="as an ordinary user the suite itself is this case")
def test_the_cap_holds_when_the_app_runs_as_an_ordinary_user(ordinary_user):
    r = ordinary_user.python("-m", "security.test_jail_memory", "memfd_mmap")
    assert r.returncode == 0 and r.stdout.strip(), r.stderr[-3000:]
    check(json.loads(r.stdout.strip().splitlines()[-1]))


def test_an_honest_session_under_the_cap_is_left_alone(small_cap_pool):
    from tools.sandbox import memwatch

    with ToolSession(small_cap_pool, deadline_s=120) as s:
        assert s.call("cadquery_script", {"code": "import cadquery as cq\nresult = cq.Workplane().box(1, 2, 3)\n",
                                          "name": "b"}).ok
        assert s.render(size=64).ok
        w = s._w()
        used = memwatch.WATCH.check(w)
        assert used is not None and used < CAP_MB << 20 and w.alive and s.restarts == 0


if __name__ == "__main__":  # the attack as whoever runs it (the ordinary-user test above)
    import sys

    os.environ["MODELWRIGHT_WORKER_MEMORY_MB"] = str(CAP_MB)
    main_pool = WorkerPool(size=0, test_hooks=True)
    try:
        print(json.dumps(attack(main_pool, sys.argv[1])))
    finally:
        main_pool.close()
