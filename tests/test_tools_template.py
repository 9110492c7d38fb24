"""Workers forked from the worker template (tools/sandbox/template.py, tools/worker/template.py).

The jail a fork builds itself is held to every attempt of tests/security/test_jail_escape.py
(forked and from scratch alike); here: that workers do come from the template, that nothing
one session did reaches the next worker, that a dead template is replaced, that a crash's exit
code still reaches the caller, and that with the template off workers start from scratch."""

from __future__ import annotations

import os
import signal

import pytest

from tools import ToolSession, WorkerPool
from tools.errors import ToolError
from tools.runtime import supervisor
from tools.sandbox import template

MARK = ("import tools.worker.state as st\nfrom tools.errors import ErrorKind, ToolError\n"
        "if hasattr(st, 'MW_MARK'):\n"
        "    raise ToolError(ErrorKind.VALIDATION, 'a mark from an earlier session')\n"
        "st.MW_MARK = 1\n")


@pytest.fixture
def pool():
    p = WorkerPool(size=0, test_hooks=True, prewarm=False)
    yield p
    p.close()


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def test_a_worker_is_forked_from_the_template_and_serves_calls(pool):
    s = ToolSession(pool, deadline_s=60)
    try:
        w = s._w()
        assert w.forked is not None
        tpl = template.shared(supervisor._launch)
        assert _parent(w.proc.pid) == tpl.proc.pid  # the template's child, not the supervisor's
        r = s.call("add_primitive", {"kind": "cube", "name": "Box", "location": [1, 0, 0.5], "dimensions": [1, 1, 1]})
        assert r.ok, r.error
        assert [o["name"] for o in s.call("get_scene", {}).output["objects"]] == ["Box"]
    finally:
        s.close()


def _ns(pid: int, kind: str) -> str:
    return os.readlink(f"/proc/{pid}/ns/{kind}")


def _nspid(pid: int) -> list[int]:
    with open(f"/proc/{pid}/status") as f:
        return [int(x) for line in f if line.startswith("NSpid:") for x in line.split()[1:]]


def _owner(pid: int, kind: str) -> str:
    """The user namespace that owns `pid`'s namespace of `kind` (ioctl NS_GET_USERNS)."""
    import fcntl

    fd = os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY)
    try:
        owner = fcntl.ioctl(fd, 0xB701)
    finally:
        os.close(fd)
    try:
        return os.readlink(f"/proc/self/fd/{owner}")
    finally:
        os.close(owner)


def test_as_root_a_worker_is_pid_1_of_its_namespace_with_no_wrapper(pool):
    s = ToolSession(pool, deadline_s=60)
    try:
        w = s._w()
        tpl = template.shared(supervisor._launch)
        assert _parent(w.proc.pid) == tpl.proc.pid
        if os.geteuid() != 0:  # another user: the template's child is the wrapper of pid 1
            (inner,) = [int(p) for p in open(f"/proc/{w.proc.pid}/task/{w.proc.pid}/children").read().split()]
            assert _nspid(w.proc.pid) == [w.proc.pid] and _nspid(inner) == [inner, 1]
            assert s.call("get_scene", {}).ok
            return
        assert _nspid(w.proc.pid) == [w.proc.pid, 1]  # the worker itself: pid 1, no process between
        assert _ns(w.proc.pid, "pid") != _ns(tpl.proc.pid, "pid")
        # the template's own children are in its namespace again: the next worker gets a new one
        t = ToolSession(pool, deadline_s=60)
        try:
            assert _nspid(t._w().proc.pid)[-1] == 1
            assert _ns(t._w().proc.pid, "pid") not in (_ns(w.proc.pid, "pid"), _ns(tpl.proc.pid, "pid"))
            assert _parent(t._w().proc.pid) == tpl.proc.pid
        finally:
            t.close()
        # its mount and pid namespaces were made as root: its user namespace owns neither, so
        # even a capability of that user namespace (the jail drops them all) mounts nothing
        assert _ns(w.proc.pid, "user") != _ns(tpl.proc.pid, "user")
        assert _ns(w.proc.pid, "mnt") != _ns(tpl.proc.pid, "mnt")
        for kind in ("mnt", "pid"):
            assert _owner(w.proc.pid, kind) == _ns(tpl.proc.pid, "user") != _ns(w.proc.pid, "user")
        assert _owner(w.proc.pid, "net") == _ns(w.proc.pid, "user")  # and its network is its own
        assert s.call("get_scene", {}).ok
    finally:
        s.close()


def test_nothing_of_one_session_reaches_the_next_worker(pool):
    a = ToolSession(pool, deadline_s=60)
    a.call("add_primitive", {"kind": "cube", "name": "Left", "location": [0, 0, 0], "dimensions": [1, 1, 1]})
    a._send_test_op({"op": "exec", "code": MARK})
    with pytest.raises(ToolError, match="earlier session"):  # the mark holds within a worker
        a._send_test_op({"op": "exec", "code": MARK})
    a.close()
    b = ToolSession(pool, deadline_s=60)
    try:
        assert b._w().forked is not None
        b._send_test_op({"op": "exec", "code": MARK})  # a new fork: the interpreter never saw it
        assert b.call("get_scene", {}).output["objects"] == []
    finally:
        b.close()


def test_a_dead_template_is_started_again(pool):
    s = ToolSession(pool, deadline_s=60)
    first = template.shared(supervisor._launch)
    s.close()
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait(timeout=30)
    s = ToolSession(pool, deadline_s=60)
    try:
        second = template.shared(supervisor._launch)
        assert second is not first and second.proc.pid != first.proc.pid
        assert s._w().forked is not None and _parent(s._w().proc.pid) == second.proc.pid
        assert s.call("get_scene", {}).ok
    finally:
        s.close()


def test_a_forked_worker_that_crashes_reports_its_exit_and_recovers(pool):
    s = ToolSession(pool, deadline_s=60)
    try:
        s.call("add_primitive", {"kind": "cube", "name": "Kept", "location": [0, 0, 0], "dimensions": [1, 1, 1]})
        r = s._fault("exit")
        assert not r.ok and r.error.kind.value == "crash" and "(exit 3)" in r.error.message, r.error
        assert [o["name"] for o in s.call("get_scene", {}).output["objects"]] == ["Kept"]
    finally:
        s.close()


def test_with_the_template_off_workers_start_from_scratch(pool, monkeypatch):
    monkeypatch.setenv(template.ENV, "0")
    s = ToolSession(pool, deadline_s=60)
    try:
        assert s._w().forked is None
        assert _parent(s._w().proc.pid) == os.getpid()  # bubblewrap, the supervisor's own child
        assert s.call("get_scene", {}).ok
    finally:
        s.close()


def test_a_fork_restored_after_a_crash_resets_to_an_empty_scene(pool):
    """A restored fork loaded a session's commit, not the template's empty scene: its next
    reset reads the factory settings again (the studio's New after a crash)."""
    s = ToolSession(pool, deadline_s=60)
    try:
        s.call("add_primitive", {"kind": "cube", "name": "Kept", "location": [0, 0, 0], "dimensions": [1, 1, 1]})
        assert not s._fault("exit").ok  # the worker is replaced by a fork restored from its commit
        assert [o["name"] for o in s.call("get_scene", {}).output["objects"]] == ["Kept"]
        s.reset()
        assert s.call("get_scene", {}).output["objects"] == []
    finally:
        s.close()


def _threads(pid: int) -> list[str]:
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            out.append(f.read().strip())
    return out


@pytest.mark.skipif(not template.renderer_in_template(), reason="a GPU here: each worker starts its own renderer")
def test_a_fork_renders_with_the_renderer_the_template_started(pool):
    """The template drew once before it forks; a fork copies one thread, so the template must
    hold no Mesa thread a fork would need (its disk-cache queue is off), and a fork's renders
    (solid, wireframe, a camera, a second scene state) draw the scene it holds."""
    s = ToolSession(pool, deadline_s=60)
    try:
        tpl = template.shared(supervisor._launch)
        assert tpl.renderer_warm
        assert not [t for t in _threads(tpl.proc.pid) if t.startswith("disk$")]
        w = s._w()
        assert w.forked is not None
        empty = s.render(views=["top"], size=64)
        assert empty.ok, empty.error
        assert s.call("add_primitive", {"kind": "cube", "name": "Box", "location": [0, 0, 0],
                                        "dimensions": [1, 1, 1]}).ok  # fmt: skip
        assert s.call("set_material", {"name": "Box", "color": "#ff0000"}).ok
        for kw in ({}, {"shading": "wireframe"},
                   {"camera": {"location": [4, -4, 3], "target": [0, 0, 0], "lens_mm": 35}}):
            r = s.render(views=["top"], size=64, **kw)
            assert r.ok, (kw, r.error)
            assert r.images[0] != empty.images[0], kw  # the cube is drawn
        from io import BytesIO

        from PIL import Image

        solid = Image.open(BytesIO(s.render(views=["top"], size=64).images[0])).convert("RGB")
        r_, g_, b_ = solid.getpixel((32, 32))
        assert r_ > 2 * max(g_, b_), solid.getpixel((32, 32))  # red from above, at the centre
    finally:
        s.close()


def test_a_template_started_soon_is_the_one_a_later_worker_forks_from(pool):
    """`start_template_soon` (an eval, before it loads its model) boots the template in the
    background; the first worker forks from that one, not from one of its own."""
    import time

    template.close_shared()
    supervisor.start_template_soon()
    deadline = time.monotonic() + 300
    while template.WORKERS not in template._shared:  # booting, off the caller's thread
        assert time.monotonic() < deadline, "the template did not start"
        time.sleep(0.05)
    started = template._shared[template.WORKERS]
    s = ToolSession(pool, deadline_s=60)
    try:
        assert template.shared(supervisor._launch) is started
        assert s._w().forked is not None and _parent(s._w().proc.pid) == started.proc.pid
        assert s.call("get_scene", {}).ok
    finally:
        s.close()


OCCT_POOL = ("import os\nfrom OCP.OSD import OSD_ThreadPool\n"
             "with open(os.path.join(runtime.workspace, 'occt.txt'), 'w') as f:\n"
             "    f.write(str(OSD_ThreadPool.DefaultPool_s().NbThreads()))\n")


def test_a_forks_cad_runs_on_its_one_thread(pool):
    """CadQuery asks OCCT for parallel booleans; in a worker OCCT's pool holds one thread (the
    caller's: tools/occt.py), so a 196-hole plate's booleans start no thread in the fork. A
    parallel boolean crashed forked workers now and then (SIGSEGV inside OCCT)."""
    s = ToolSession(pool, deadline_s=300)
    try:
        w = s._w()
        assert w.forked is not None
        before = sorted(_threads(w.proc.pid))
        r = s.call("cadquery_script", {"name": "Plate", "code": (
            "result = cq.Workplane().box(66, 66, 5).faces('>Z').workplane()"
            ".rarray(4, 4, 14, 14).hole(2)\n")})
        assert r.ok, r.error
        s._send_test_op({"op": "exec", "code": OCCT_POOL})
        assert (s.workspace / "occt.txt").read_text() == "1"
        assert sorted(_threads(w.proc.pid)) == before
    finally:
        s.close()
