"""How a worker starts: forked from the worker template it has CadQuery already; started
from scratch (no template) CadQuery loads on first use unless the worker is a spare; a
one-shot command's `boot()` starts a worker now without keeping a spare after it. What is
loaded is asserted, never how long it took."""

import os

import pytest

from tools import ToolSession, WorkerPool

# Raises in the worker (a failed op) when CadQuery's presence there is not `expected`.
PROBE = ("import sys\nfrom tools.errors import ErrorKind, ToolError\n"
         "if ('cadquery' in sys.modules) != {expected}:\n"
         "    raise ToolError(ErrorKind.VALIDATION, 'cadquery loaded: ' + str('cadquery' in sys.modules))\n")


def cadquery_loaded(session: ToolSession, expected: bool) -> None:
    session._send_test_op({"op": "exec", "code": PROBE.format(expected=expected)})


@pytest.fixture
def booting_pool(monkeypatch):
    """A pool whose workers start from scratch: the lazy CadQuery import is theirs."""
    from tools.sandbox import template

    monkeypatch.setenv(template.ENV, "0")
    pool = WorkerPool(size=0, test_hooks=True)
    yield pool
    pool.close()


def test_a_worker_forked_from_the_template_has_cadquery_already():
    pool = WorkerPool(size=0, test_hooks=True, prewarm=False)
    try:
        with ToolSession(pool) as s:
            assert s._w().forked is not None
            cadquery_loaded(s, True)  # imported once, in the template: no first-use wait
            assert s.call("cad_box", {"name": "b", "length": 10, "width": 10, "height": 10}).ok
    finally:
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


def test_the_shader_cache_seed_is_taken_once_through_checked_names_and_copied_per_worker(
        tmp_path, monkeypatch):
    from tools.sandbox import shader_cache

    monkeypatch.setenv(shader_cache.ENV, str(tmp_path / "seed"))
    worker = tmp_path / "w1"  # what a worker left in its cache folder at `ready`
    bucket = worker / "shader-cache" / shader_cache.SUB / "ab"
    bucket.mkdir(parents=True)
    (bucket / ("c" * 38)).write_bytes(b"compiled")
    (bucket / ("d" * 38)).symlink_to("/etc/passwd")  # a link is never followed
    (bucket / "not-mesa").write_bytes(b"x")  # a name Mesa does not write is left out
    assert shader_cache.take_seed(str(worker))
    seeded = tmp_path / "seed" / shader_cache.SUB
    assert sorted(p.name for p in seeded.rglob("*") if p.is_file()) == ["c" * 38]
    (bucket / ("c" * 38)).write_bytes(b"changed")
    assert not shader_cache.take_seed(str(worker))  # once: a later worker changes nothing
    assert (seeded / "ab" / ("c" * 38)).read_bytes() == b"compiled"

    fresh = tmp_path / "w2"
    fresh.mkdir()
    shader_cache.give(str(fresh), os.geteuid())  # a private copy, which the worker may change at will
    copy = fresh / "shader-cache" / shader_cache.SUB / "ab" / ("c" * 38)
    assert copy.read_bytes() == b"compiled" and not copy.samefile(seeded / "ab" / ("c" * 38))
    assert not shader_cache.take_seed(str(tmp_path / "empty"))  # nothing compiled: no seed


def test_a_worker_starts_from_its_own_copy_of_the_seed(tmp_path, monkeypatch):
    from tools.sandbox import shader_cache, template

    monkeypatch.setenv(shader_cache.ENV, str(tmp_path / "seed"))
    # the seed is for workers that start their own renderer: from scratch, or forked from a
    # template that has none (with a GPU, or MODELWRIGHT_TEMPLATE_RENDERER=0)
    monkeypatch.setenv(template.RENDER_ENV, "0")
    template.close_shared()
    pool = WorkerPool(size=0, test_hooks=True)
    try:
        with ToolSession(pool) as first:  # no seed yet: its warm-up render seeds it
            assert first.call("render", {}).ok
        seeded = sorted(p.name for p in (tmp_path / "seed").rglob("*") if p.is_file())
        assert seeded
        with ToolSession(pool) as second:
            own = second.scratch / "shader-cache" / shader_cache.SUB
            assert set(seeded) <= {p.name for p in own.rglob("*") if p.is_file()}
    finally:
        pool.close()
        template.close_shared()  # the next test's template starts its renderer again


LEAVES_NOTHING = """
import os, signal, sys, time
from tools import ToolSession, WorkerPool
from tools.sandbox import template
pool = WorkerPool(size=0, prewarm=False)
with ToolSession(pool) as s:
    assert s.call("add_primitive", {"kind": "cube", "name": "c", "dimensions": [1, 1, 1]}).ok
first = template._shared[template.WORKERS]
print("home", first.home, sorted(os.listdir(os.path.join(first.home, "tmp"))), flush=True)
os.kill(first.proc.pid, signal.SIGKILL)  # a template that dies on its own keeps its log
while first.alive:
    time.sleep(0.05)
with ToolSession(pool) as s:  # the next session starts another template
    assert s.call("add_primitive", {"kind": "cube", "name": "d", "dimensions": [1, 1, 1]}).ok
print("second", template._shared[template.WORKERS].home, flush=True)
pool.close()
"""


def test_a_template_leaves_no_folder_behind_when_its_process_exits(tmp_path):
    """Blender's session folder is made in the template's home, and the home is removed when
    the supervisor's process exits (the template is killed, so Blender never removes it); a
    template that died on its own keeps its home, for its log."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, "-c", LEAVES_NOTHING], env=env, cwd=root,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    first_home, listing = lines["home"].split(" ", 1)
    assert Path(first_home).parent == tmp_path
    assert "blender_" in listing  # Blender's folder was in the home, not in /tmp
    second_home = Path(lines["second"])
    assert second_home.parent == tmp_path and not second_home.exists()  # removed at exit
    assert sorted(p.name for p in tmp_path.iterdir()) == [Path(first_home).name]
    assert (Path(first_home) / "template.log").exists()  # the dead one's log stays
