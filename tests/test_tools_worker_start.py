"""How a worker starts: CadQuery loads on first use unless the worker is a spare, and a
one-shot command's `boot()` starts a worker now without keeping a spare after it. What is
loaded is asserted, never how long it took."""

import pytest

from tools import ToolSession, WorkerPool

# Raises in the worker (a failed op) when CadQuery's presence there is not `expected`.
PROBE = ("import sys\nfrom tools.errors import ErrorKind, ToolError\n"
         "if ('cadquery' in sys.modules) != {expected}:\n"
         "    raise ToolError(ErrorKind.VALIDATION, 'cadquery loaded: ' + str('cadquery' in sys.modules))\n")


def cadquery_loaded(session: ToolSession, expected: bool) -> None:
    session._send_test_op({"op": "exec", "code": PROBE.format(expected=expected)})


@pytest.fixture
def booting_pool():
    pool = WorkerPool(size=0, test_hooks=True)
    yield pool
    pool.close()


def test_a_booted_worker_loads_cadquery_on_first_use_and_leaves_no_spare(booting_pool):
    booting_pool.boot()
    with ToolSession(booting_pool) as s:
        assert not booting_pool._idle and not booting_pool._warming  # taken; none replaces it
        assert s.versions["cadquery"]  # reported without loading it
        cadquery_loaded(s, False)
        assert s.call("add_primitive", {"kind": "cube", "name": "c", "dimensions": [1, 1, 1]}).ok
        cadquery_loaded(s, False)  # Blender tools never need it
        r = s.call("cad_box", {"name": "b", "length": 10, "width": 10, "height": 10})
        assert r.ok, r.error
        cadquery_loaded(s, True)
        script = "import cadquery as cq\nresult = cq.Workplane().box(1, 2, 3)"
        r = s.call("cadquery_script", {"name": "s", "code": script})
        assert r.ok, r.error
    assert not booting_pool._idle and not booting_pool._warming


def test_a_spare_preloads_cadquery(worker_pool):
    assert worker_pool.preload_cad  # a pool that keeps spares boots them with CadQuery in
    with ToolSession(worker_pool) as s:
        cadquery_loaded(s, True)
