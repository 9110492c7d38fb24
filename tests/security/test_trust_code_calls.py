"""Code calls judged from trusted facts only, and rewards that doing little cannot raise.

A `cadquery_script` has full Python in the policy's worker, so it can patch that worker to
answer every later call as it likes: a later script that raises comes back `ok` with a box
committed under the name it was asked for; an import of a file that was never there comes
back `ok`, naming an object the patch made. The verifier runs each code call again in a fresh
worker of its own, from the clean rebuild's state (and, for an import, the file as the trusted
side copied it before the call), so each forgery must earn exactly its honest twin's reward
through `tasks try`, `eval` and GRPO rollouts. Each test checks, as a control, that the
forgery worked inside the policy's worker.
"""

from __future__ import annotations

import json

import pytest

from tests.security.test_trust_rewards import (
    BENIGN,
    RUNTIME,
    _via_eval,
    _via_rollout,
    _via_try,
    hostile,
    script,
)
from tools import ToolSession, WorkerPool
from tools.runtime.verifier import CleanRoom
from training.rewards import INVALID_TOTAL
from training.tasks import get_task
from training.tasks.base import Task
from training.tasks.runner import run_calls
from training.tasks.spec import TaskSpec, call
from training.tasks.verifier import Verifier, verify

CAD_TASK = "cad_parts:1:0"
MATERIAL_TASK = "materials:1:0"
FAILING = "raise ValueError('no part')\n"

# The attack: every later script that raises is answered `ok`, with a 1 mm box
# committed under the name the call asked for.
FORGE_SCRIPTS = RUNTIME + """
import cadquery as cq
orig = rt._call
def forged(tool, args, mutating):
    try:
        return orig(tool, args, mutating)
    except Exception:
        if tool != 'cadquery_script':
            raise
        rt.state.parts.set(args['name'], cq.Workplane().box(1, 1, 1).val())
        rt.state.commit(tool, args, None)
        return rt._ok({'name': args['name'], 'valid': True})
rt._call = forged
"""
# A variant through the handler table instead of the dispatcher.
FORGE_HANDLER = RUNTIME + """
import cadquery as cq
orig = rt.handlers['cadquery_script']
def forged(args):
    try:
        return orig(args)
    except Exception:
        return rt.state.parts.set(args['name'], cq.Workplane().box(1, 1, 1).val())
rt.handlers['cadquery_script'] = forged
"""
# An import of a file that does not exist answers `ok`, naming the object the patch made.
FORGE_IMPORT = RUNTIME + """
import bpy
def ghost(args):
    mesh = bpy.data.meshes.new('Ghost')
    mesh.from_pydata([(0, 0, 0), (1, 0, 0), (0, 1, 0)], [], [(0, 1, 2)])
    ob = bpy.data.objects.new('Ghost', mesh)
    bpy.context.scene.collection.objects.link(ob)
    return {'imported': ['Ghost']}
rt.handlers['import_file'] = ghost
"""


def _key(v) -> tuple:
    return (v.total, v.success, v.components)


def _run(path: str, task_id: str, plan: list[dict], worker_pool, tmp_path, tag: str):
    if path == "try":
        return _via_try(plan, tmp_path, tag, task_id)
    if path == "eval":
        return _via_eval(plan, worker_pool, task_id)
    return _via_rollout(plan, worker_pool, task_id)


# The honest twin's plan is the same for both forgeries: run once per path in this process
# (the first forgery's test runs it; a test run alone runs its own).
_honest_twins: dict[str, tuple] = {}


@pytest.mark.parametrize("forge", ["dispatcher", "handler"])
@pytest.mark.parametrize("path", ["try", "eval", "rollout"])
def test_a_patched_worker_cannot_make_a_later_failing_script_count(path, forge, worker_pool,
                                                                  tmp_path):
    code = {"dispatcher": FORGE_SCRIPTS, "handler": FORGE_HANDLER}[forge]
    oracle = [dict(c) for c in get_task(CAD_TASK).oracle]
    failing = {"tool": "cadquery_script", "args": {"code": FAILING, "name": "Collar"}}
    forged_plan = [script(hostile(code)), failing, *oracle]
    honest_plan = [script(BENIGN), failing, *oracle]
    forged, forged_ok = _run(path, CAD_TASK, forged_plan, worker_pool, tmp_path, "forged")
    if path not in _honest_twins:
        _honest_twins[path] = _run(path, CAD_TASK, honest_plan, worker_pool, tmp_path, "honest")
    honest, honest_ok = _honest_twins[path]
    if forged_ok:  # control: in the policy's worker the failing script was answered `ok`
        assert forged_ok[1] is True and honest_ok[1] is False
    assert forged == honest
    assert honest[2]["validity"] < 1.0


@pytest.mark.parametrize("path", ["try", "eval", "rollout"])
def test_an_import_of_a_missing_file_counts_as_failed(path, worker_pool, tmp_path):
    task = get_task(MATERIAL_TASK)
    ghost = {"tool": "import_file", "args": {"path": "ghost.glb"}}
    forged_plan = [script(hostile(FORGE_IMPORT)), ghost, *task.oracle]
    honest_plan = [script(BENIGN), ghost, *task.oracle]
    forged, forged_ok = _run(path, MATERIAL_TASK, forged_plan, worker_pool, tmp_path, "forged")
    honest, honest_ok = _run(path, MATERIAL_TASK, honest_plan, worker_pool, tmp_path, "honest")
    if forged_ok:  # control: the policy's worker answered the import of nothing as a success
        assert forged_ok[1] is True and honest_ok[1] is False
    assert forged == honest
    assert honest[2]["validity"] < 1.0


def test_a_script_that_patches_its_worker_reaches_no_later_code_call(worker_pool):
    """Each code call runs again in a fresh worker: a mark a script leaves in its worker's
    interpreter is not there for the next script, which counts as failed without it."""
    task = get_task(CAD_TASK)
    mark = hostile("import builtins\nbuiltins._mw_mark = True\n")
    needs_mark = hostile("import builtins\n"
                         "if not getattr(builtins, '_mw_mark', False):\n"
                         "    raise ValueError('no mark')\n")
    with ToolSession(worker_pool) as s:
        s.reset()
        task.setup(s)
        calls = run_calls(s, [script(mark), {"tool": "cadquery_script",
                                             "args": {"code": needs_mark, "name": "Marked"}}])
        assert [c["ok"] for c in calls] == [True, True]  # control: the mark held there
        verdict = verify(task, s, calls)
    assert verdict.details["rebuild"]["reruns"] == 2
    assert verdict.components["validity"] == 0.5  # the second script failed on its own


def test_an_import_reads_the_file_as_it_was_before_the_call(worker_pool):
    """An honest import counts (the file was there); the file is vaulted before the call, so
    what the worker does to it afterwards changes nothing the verifier reads, and a vaulted
    copy that no longer matches its digest refuses the verdict."""
    task = get_task(MATERIAL_TASK)
    plan = [{"tool": "export", "args": {"format": "glb", "path": "bead.glb"}},
            {"tool": "delete", "args": {"name": "Bead"}},
            {"tool": "import_file", "args": {"path": "bead.glb"}}, *task.oracle]
    with ToolSession(worker_pool) as s:
        s.reset()
        task.setup(s)
        calls = run_calls(s, plan)
        assert all(c["ok"] for c in calls)
        (s.workspace / "bead.glb").write_bytes(b"not a glb any more")  # after the call
        honest = verify(task, s, calls)
        [entry] = [e for e in s.ledger.snapshot()[1] if e.tool == "import_file"]
        assert entry.inputs is not None and entry.inputs.names == ("bead.glb",)
        with open(entry.inputs.path + "/files/bead.glb", "ab") as f:
            f.write(b"\0")
        tampered = verify(task, s, calls)
    assert honest.success and honest.components["validity"] == 1.0
    assert tampered.total == INVALID_TOTAL and tampered.details["verifier"].startswith("refused")


def test_the_vault_is_the_trusted_sides_own_folder(worker_pool):
    """An import's files are vaulted outside every worker's scratch, for the trusted side only."""
    import os
    import stat

    with ToolSession(worker_pool) as s:
        assert s.call("add_primitive", {"kind": "cube", "name": "C", "dimensions": [1, 1, 1]}).ok
        assert s.call("export", {"format": "glb", "path": "c.glb"}).ok
        assert s.call("import_file", {"path": "c.glb"}).ok
        entry = s.ledger.snapshot()[1][-1]
        vault = s.ledger.vault
        assert entry.inputs is not None and entry.inputs.path.startswith(vault + os.sep)
        assert not vault.startswith(os.fspath(s.scratch))
        st = os.stat(vault)
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    assert not os.path.exists(vault)  # gone with the session


# -- doing little ---------------------------------------------------------------------------
def _score(worker_pool, task, plan: list[dict]):
    with ToolSession(worker_pool) as s:
        s.reset()
        task.setup(s)
        return verify(task, s, run_calls(s, plan))


def test_a_harmless_call_is_as_idle_as_no_call_and_below_a_failing_try(worker_pool):
    task = get_task(MATERIAL_TASK)
    bead = task.spec.start[0]["args"]
    nothing = _score(worker_pool, task, [])
    stay = _score(worker_pool, task, [{"tool": "transform", "args": {
        "name": "Bead", "location": bead["location"]}}])
    look = _score(worker_pool, task, [{"tool": "get_scene", "args": {}}])
    undone = _score(worker_pool, task, [  # two real changes that end where it started
        {"tool": "add_primitive", "args": {"kind": "cube", "name": "Tmp",
                                           "dimensions": [1, 1, 1], "location": [3, 3, 0.5]}},
        {"tool": "delete", "args": {"name": "Tmp"}}])
    failing = _score(worker_pool, task, [{"tool": "set_material", "args": {
        "name": "Nope", "color": "#20A0A0"}}])
    right = _score(worker_pool, task, task.oracle)
    assert stay.components["validity"] == look.components["validity"] == 0.0
    assert undone.components["validity"] == 0.0
    assert stay.total == look.total == undone.total == nothing.total
    assert nothing.total < failing.total < right.total


def test_recall_step_neither_fails_nor_counts(worker_pool):
    """`recall_step` is answered by the loop from the episode's own history: with it or
    without it, an episode scores the same."""
    from agents.loop.config import LoopConfig
    from agents.policies.simple import PlanPolicy, calls_from_plan
    from training.eval.harness import run_spec, task_spec

    task = get_task(MATERIAL_TASK)
    looks = [{"tool": "recall_step", "args": {"index": 0}},
             {"tool": "recall_step", "args": {"index": 99}}]  # a bad index: a harmless look
    verdicts, records = [], []
    for plan in ([*task.oracle], [*task.oracle, *looks]):
        with ToolSession(worker_pool) as s:
            record = run_spec(task_spec(MATERIAL_TASK), PlanPolicy(calls_from_plan(plan)), s,
                              config=LoopConfig(max_steps=len(plan) + 2))
        verdicts.append(record["_result"].verdict)
        records.append([c["tool"] for c in record["_result"].calls])
    assert "recall_step" in json.dumps(records[1])  # control: the looks were made
    assert _key(verdicts[0]) == _key(verdicts[1])
    assert verdicts[1].components["validity"] == 1.0, (verdicts[1], records)


def test_code_call_forgeries_earn_the_honest_reward_as_an_ordinary_user(ordinary_user,
                                                                       tmp_path):
    """Both forgeries at once, through `tasks try` run by an ordinary user (the jail maps the
    worker to that user, the vault is that user's): the reward is the honest twin's."""
    import os

    failing = {"tool": "cadquery_script", "args": {"code": FAILING, "name": "Collar"}}
    ghost = {"tool": "import_file", "args": {"path": "ghost.glb"}}
    oracle = [dict(c) for c in get_task(CAD_TASK).oracle]
    got = {}
    for tag, first in (("forged", hostile(FORGE_SCRIPTS + FORGE_IMPORT)), ("honest", BENIGN)):
        path = os.path.join(ordinary_user.home, f"{tag}.jsonl")
        with open(path, "w") as f:
            f.write("".join(json.dumps(c) + "\n" for c in [script(first), failing, ghost,
                                                              *oracle]))
        os.chown(path, ordinary_user.uid, -1)
        res = ordinary_user.python("-m", "studio.cli", "tasks", "try", CAD_TASK, "--calls", path,
                                   "--json")
        assert res.returncode == 0, res.stderr[-2000:]
        out = json.loads(res.stdout[res.stdout.index("{"):])
        got[tag] = (out["reward"], out["success"], out["components"])
    assert got["forged"] == got["honest"]
    assert got["honest"][2]["validity"] == 0.5  # 2 of 4 calls failed, as they should


class _CrashingRoom(CleanRoom):
    """A clean room whose next `crashes` code workers die of a real SIGSEGV (the test hooks'
    fault) where they would run the call again."""

    crashes = 0

    def _run_code(self, code, e):
        if self.crashes:
            self.crashes -= 1
            return code._fault("segfault")
        return super()._run_code(code, e)


def test_a_code_worker_that_crashes_gives_the_call_one_more_worker(worker_pool):
    """A crash of the worker running a code call again is the machine's, not the call's: the
    call is run once more in another fresh worker and keeps its honest reward. Two crashes in
    a row overturn it, and the record says why."""
    code = "result = cq.Workplane().box(20, 20, 5).faces('>Z').workplane().hole(4)\n"
    task = Task(id="recovery:holed-block", family="recovery", level=1, seed=0, spec=TaskSpec(
        prompt="Make the CAD part 'Block': a 20 mm block, 5 mm thick, with a 4 mm hole.",
        parameters={}, oracle=[call("cadquery_script", name="Block", code=code)],
        constraints=[{"kind": "holes", "object": "Block", "diameter": 4, "count": 1}],
        geometry={"kind": "parts", "parts": [{"name": "Block",
                                              "script": "import cadquery as cq\n" + code}]},
        geometry_min=0.99))
    s = ToolSession(worker_pool, deadline_s=120)
    try:
        calls = run_calls(s, task.oracle)
        assert [c["ok"] for c in calls] == [True]
        honest = verify(task, s, calls)
        assert honest.success and "retried" not in honest.details["rebuild"]
        room = _CrashingRoom(code_pool=WorkerPool(size=0, test_hooks=True, warm_render=False))
        verifier = Verifier(room=room)
        try:
            room.crashes = 1
            once = verifier.verify(task, s, calls)
            assert _key(once) == _key(honest)
            assert once.details["rebuild"]["retried"] == 1
            room.crashes = 2
            twice = verifier.verify(task, s, calls)
            assert not twice.success and twice.details["rebuild"]["overturned"] >= 1
            reruns = [c["rerun"] for c in twice.details["calls"] if "rerun" in c]
            assert reruns and "died during fault:segfault (exit -11)" in reruns[0]
        finally:
            room.close()
            room.code_pool.close()
    finally:
        s.close()
