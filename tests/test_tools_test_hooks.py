"""The worker's test ops (tools/worker/test_hooks.py) exist only in a worker started with test
hooks: any other worker refuses each of them as an unknown op, and goes on serving."""

import pytest

from tools import ErrorKind, ToolSession, WorkerPool

TEST_OPS = ({"op": "fault", "kind": "abort"}, {"op": "probe", "write": ["/tmp/x"]},
            {"op": "exec", "code": "import os; os.abort()"}, {"op": "hash_check"})


@pytest.fixture(scope="module")
def plain_pool():
    pool = WorkerPool(size=1, test_hooks=False, warm_render=False)
    yield pool
    pool.close()


def test_a_worker_without_test_hooks_refuses_their_ops(plain_pool):
    with ToolSession(plain_pool, deadline_s=60) as s:
        for request in TEST_OPS:
            reply, _, err = s._send(request, 60, request["op"])
            assert err is None and reply["ok"] is False, request
            assert reply["error"]["kind"] == ErrorKind.VALIDATION.value
            assert f"unknown worker op {request['op']!r}" in reply["error"]["message"]
        # none of them ran: the worker that would have aborted still serves
        assert s.call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}).ok


def test_a_worker_with_test_hooks_runs_them(session):
    out = session._send_test_op({"op": "hash_check"})
    assert out["full"] == session.scene_hash()
    assert session._send_test_op({"op": "exec", "code": "runtime.state.head()"}) == {}
    r = session._fault("no such fault")
    assert r.error.kind == ErrorKind.VALIDATION and "unknown fault" in r.error.message
