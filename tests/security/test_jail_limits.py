"""Resource attacks hit the jail's caps, and nothing one session does reaches the next."""

from __future__ import annotations

from tools import ToolSession

from .conftest import run_probe

FORK_BOMB = r'''
import time
pids, err = [], None
for i in range(5000):
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        time.sleep(120)
        os._exit(0)
    pids.append(pid)
out["forked"] = len(pids)
out["errno"] = err
for pid in pids:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
'''

MEMORY_BOMB = r'''
attempt("alloc_5gb", lambda: len(bytearray(5 << 30)))
chunks = []
try:
    for i in range(200):
        chunks.append(bytearray(100 << 20))
except MemoryError:
    pass
out["held_mb"] = 100 * len(chunks)
del chunks
'''


def test_fork_bomb_hits_the_pids_cap(fresh_session):
    out = run_probe(fresh_session, FORK_BOMB, deadline_s=300)
    assert out["errno"] == 11 and out["forked"] < 256  # EAGAIN at RLIMIT_NPROC
    assert fresh_session.call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}).ok  # still serving


def test_memory_bomb_hits_the_memory_cap(fresh_session):
    out = run_probe(fresh_session, MEMORY_BOMB, deadline_s=300)
    assert out["alloc_5gb"].startswith("refused: MemoryError")
    assert out["held_mb"] < 4096
    assert fresh_session.call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}).ok


PATCH = ("import cadquery as cq\n"
         "cq.Workplane.box = lambda self, *a, **k: cq.Workplane().sphere(0.1)\n"
         "result = cq.Workplane().box(2, 2, 2)\n")
HONEST = "import cadquery as cq\nresult = cq.Workplane().box(2, 2, 2)\n"


def test_a_monkeypatch_does_not_reach_the_next_session(worker_pool):
    with ToolSession(worker_pool) as a:
        assert a.call("cadquery_script", {"code": PATCH, "name": "p"}).ok
        patched = a.call("cadquery_script", {"code": HONEST, "name": "q"})
        assert patched.output["volume"] < 1  # the patch holds within its own session
    with ToolSession(worker_pool) as b:
        r = b.call("cadquery_script", {"code": HONEST, "name": "q"})
        assert r.ok and abs(r.output["volume"] - 8.0) < 1e-6


def test_a_worker_never_serves_a_second_session(worker_pool):
    with ToolSession(worker_pool) as a:
        first = a._w()
    with ToolSession(worker_pool) as b:
        assert b._w() is not first
    assert not first.alive
