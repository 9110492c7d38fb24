"""Reward forging: a policy with full Python in its worker patches everything it can reach.

The control in each test scores the same forged session the old way (checkers querying the
policy's own worker) and shows the forgery works there; the verifier must give exactly the
honest reward: the one the same real calls earn in a worker nobody patched.
"""

from __future__ import annotations

import json

import pytest

from tools import ToolSession
from tools.errors import ToolError
from training.tasks import get_task
from training.tasks.checks.verdict import evaluate_here, evaluate_task
from training.tasks.runner import run_calls
from training.tasks.verifier import verify

TASK = "primitive_placement:1:42"
CAD_TASK = "cad_parts:1:7"


@pytest.fixture(scope="module")
def hostile_pool():
    """Workers that serve one session each and are then killed: the code a test plants in
    one must not leak into another test's session (until every session forks a clean worker)."""
    from tools import WorkerPool

    pool = WorkerPool(size=1, test_hooks=True)
    yield pool
    pool.close()


def _exec(session, code: str) -> None:
    """Run arbitrary Python in the session's worker, as a hostile policy can (test hooks)."""
    reply, _, err = session._send({"op": "exec", "code": code}, 60, "exec")
    if err is not None:
        raise err
    if not reply.get("ok"):
        raise ToolError.from_dict(reply["error"])


def _solved(worker_pool, task) -> tuple[dict, bytes]:
    """The oracle's scene and its GLB export, made in a separate session."""
    with ToolSession(worker_pool) as s:
        s.reset()
        task.setup(s)
        run_calls(s, task.oracle)
        scene = s.scene()
        assert s.call("export", {"format": "glb", "path": "solved.glb"}).ok
        return scene, (s.workspace / "solved.glb").read_bytes()


FORGE = """
import cadquery, bpy, json, sys
SOLVED = json.loads(SOLVED_JSON)
def fake_scene(_a=None):
    return SOLVED
def fake_export(a):
    import os
    full = os.path.join(runtime.workspace, a["path"])
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb") as f:
        f.write(GLB)
    return {"path": a["path"], "format": a["format"], "objects": [], "bytes": len(GLB)}
def fake_query(a):
    return {"name": a.get("name"), "volume": 1.0, "valid": True, "solids": 1}
runtime.handlers["get_scene"] = fake_scene
runtime.handlers["export"] = fake_export
runtime.handlers["cad_query"] = fake_query
import tools.worker.scene as scene_mod, tools.worker.io as io_mod
scene_mod.get_scene = fake_scene
cadquery.Shape.Volume = lambda self: 1.0
cadquery.Shape.isValid = lambda self: True
cadquery.exporters.export = lambda *a, **k: None
bpy.types.Object.dimensions = property(lambda self: (1.0, 1.0, 1.0))
runtime.state.scene_hash = lambda: "forged"
"""


def _forge(session, scene: dict, glb: bytes) -> None:
    code = f"SOLVED_JSON = {json.dumps(json.dumps(scene))}\nGLB = {glb!r}\n" + FORGE
    _exec(session, code)


def _honest(worker_pool, task, steps):
    with ToolSession(worker_pool) as s:
        s.reset()
        task.setup(s)
        calls = run_calls(s, steps)
        return evaluate_task(task, s, calls)


def _same(a, b) -> None:
    assert (a.total, a.success, a.components) == (b.total, b.success, b.components)


def test_verifier_ignores_patched_scene_and_exporters(worker_pool, hostile_pool):
    task = get_task(TASK)
    scene, glb = _solved(worker_pool, task)
    honest = _honest(worker_pool, task, [])
    assert not honest.success
    with ToolSession(hostile_pool) as s:
        s.reset()
        task.setup(s)
        _forge(s, scene, glb)
        forged_in_place = evaluate_task(task, s, [])
        assert forged_in_place.success, "control: the forgery fools a checker in the policy's worker"
        _same(verify(task, s, []), honest)
        assert task.evaluate(s, []).success is False  # Task.evaluate is the verifier


def test_verifier_honest_for_a_half_solved_patched_scene(worker_pool, hostile_pool):
    task = get_task(TASK)
    scene, glb = _solved(worker_pool, task)
    wrong = [dict(step, args=dict(step["args"])) for step in task.oracle]
    first = wrong[0]["args"]
    if "location" in first:
        first["location"] = [v + 3.0 for v in first["location"]]
    honest = _honest(worker_pool, task, wrong)
    with ToolSession(hostile_pool) as s:
        s.reset()
        task.setup(s)
        calls = run_calls(s, wrong)
        _forge(s, scene, glb)
        assert evaluate_task(task, s, calls).success
        _same(verify(task, s, calls), honest)


def test_verifier_measures_cad_parts_from_breps_not_the_patched_kernel(worker_pool, hostile_pool):
    task = get_task(CAD_TASK)
    honest_solved = _honest(worker_pool, task, task.oracle)
    assert honest_solved.success
    with ToolSession(hostile_pool) as s:
        s.reset()
        task.setup(s)
        calls = run_calls(s, task.oracle)
        # Patch the kernel so that every measurement and export in this worker lies.
        _exec(s, "import cadquery\ncadquery.Shape.Volume = lambda self: 0.0\n"
                 "cadquery.Shape.isValid = lambda self: False\n"
                 "runtime.handlers['export'] = lambda a: {'path': a['path'], 'bytes': 0}")
        _same(verify(task, s, calls), honest_solved)


def test_forging_through_cadquery_script_lint_escape_gets_honest_reward(worker_pool, hostile_pool):
    """The realistic route: a `cadquery_script` that reaches real builtins past the AST lint
    (stdlib modules hold `sys`) and patches the runtime. Refused or run, the reward is honest."""
    task = get_task(TASK)
    scene, _glb = _solved(worker_pool, task)
    script = (
        "import dataclasses\n"
        "m = dataclasses.sys.modules\n"
        "sc = m['tools.worker.scene']\n"
        f"solved = m['json'].loads({json.dumps(json.dumps(scene))})\n"
        "rt = [o for o in m['gc'].get_objects() if 'WorkerRuntime' in repr(type(o))][0]\n"
        "rt.handlers['get_scene'] = lambda a=None: solved\n"
        "sc.get_scene = lambda a=None: solved\n"
        "result = cq.Workplane().box(0.01, 0.01, 0.01)\n"
        "show_object(result)\n"
    )
    benign = "result = cq.Workplane().box(0.01, 0.01, 0.01)\nshow_object(result)\n"
    with ToolSession(hostile_pool) as s:
        s.reset()
        task.setup(s)
        r = s.call("cadquery_script", {"code": script, "name": "Dust"})
        calls = [{"tool": "cadquery_script", "args": {"code": script, "name": "Dust"},
                  "ok": r.ok, "error_kind": r.error.kind.value if r.error else None,
                  "seq": r.seq}]
        if r.ok:  # the lint let it through: the policy's worker now lies about its scene
            assert s.scene() == scene
        forged = verify(task, s, calls)
    assert not forged.success
    if r.ok:
        with ToolSession(worker_pool) as s:
            s.reset()
            task.setup(s)
            assert s.call("cadquery_script", {"code": benign, "name": "Dust"}).ok
            _same(forged, evaluate_task(task, s, calls))


@pytest.mark.parametrize("tamper", ["manifest_escape", "brep_symlink", "commit_symlink",
                                    "garbage_blend"])
def test_tampered_commit_files_are_never_read(worker_pool, hostile_pool, tamper):
    """The worker rewrites its own commit to point the verifier outside its scratch, or
    fills it with garbage: the verifier rebuilds the episode from the ledger and never reads
    those files, so the reward is exactly the honest one."""
    task = get_task(TASK)
    code = {
        "manifest_escape": "import glob, json\np = sorted(glob.glob(runtime.scratch + "
                           "'/state/commits/[0-9]*'))[-1]\njson.dump({'X': '../../../../etc/passwd'},"
                           " open(p + '/parts.json', 'w'))",
        "brep_symlink": "import glob, json, os\np = sorted(glob.glob(runtime.scratch + "
                        "'/state/commits/[0-9]*'))[-1]\nn = 'a' * 24 + '.brep'\n"
                        "json.dump({'X': n}, open(p + '/parts.json', 'w'))\n"
                        "os.symlink('/etc/passwd', runtime.scratch + '/state/breps/' + n)",
        "commit_symlink": "import glob, os, shutil\np = sorted(glob.glob(runtime.scratch + "
                          "'/state/commits/[0-9]*'))[-1]\nos.remove(p + '/scene.blend')\n"
                          "os.symlink('/etc/passwd', p + '/scene.blend')",
        "garbage_blend": "import glob\np = sorted(glob.glob(runtime.scratch + "
                         "'/state/commits/[0-9]*'))[-1]\nopen(p + '/scene.blend', 'wb').write(b'BLENDER' * 99)",
    }[tamper]
    with ToolSession(hostile_pool) as s:
        s.reset()
        task.setup(s)
        calls = run_calls(s, task.oracle)
        _exec(s, code)
        verdict = verify(task, s, calls)
    _same(verdict, _honest(worker_pool, task, task.oracle))
    assert verdict.success and "verifier" not in verdict.details


@pytest.mark.parametrize("plant", ["symlink", "fifo"])
def test_deliverable_planted_as_link_or_fifo_is_not_delivered(hostile_pool, tmp_path, plant):
    """The deliverable is replaced by a link to a good file outside the workspace (or a FIFO
    that would block a reader): the verifier never reads the policy's workspace; the export
    call is run again in the clean worker, so the reward is the honest one either way."""
    task = get_task("deliverables:1:7")
    rel = task.spec.deliverables[0]["path"]
    outside = tmp_path / "good_copy"
    with ToolSession(hostile_pool) as s:
        s.reset()
        task.setup(s)
        calls = run_calls(s, task.oracle)
        assert verify(task, s, calls).success  # honest delivery counts
        target = s.workspace / rel
        outside.write_bytes(target.read_bytes())
        target.unlink()
        if plant == "symlink":
            target.symlink_to(outside)
            # the checkers run in place, in this process (the jailed checker's copy of the
            # workspace follows no link): the link would count
            assert evaluate_here(task, s, calls).success, "control: in place, the link counts"
        else:
            import os

            os.mkfifo(target)
        verdict = verify(task, s, calls)
    assert verdict.success and verdict.components["completeness"] == 1.0


def test_clean_workers_import_cadquery_only_while_the_scenes_have_cad_parts(worker_pool):
    """A clean worker serves one verification, so its start paces the verifier: spares skip
    CadQuery (most of a start) while the scenes verified have no CAD part, and one that lacks
    it still measures a CAD part from its B-reps (it imports CadQuery when the part loads)."""
    from tools.runtime.verifier import CleanRoom

    room = CleanRoom(size=1)
    try:
        assert room.pool.preload_cad is False
        for task_id, has_parts in ((CAD_TASK, True), (TASK, False)):
            task = get_task(task_id)
            with ToolSession(worker_pool) as s:
                s.reset()
                task.setup(s)
                calls = run_calls(s, task.oracle)
                base, entries = s.ledger.snapshot()
                with room.rebuild(base, entries) as (clean, _):
                    assert evaluate_task(task, clean, calls).success, task_id
            assert room.pool.preload_cad is has_parts  # the next spares follow this scene
    finally:
        room.close()
