"""Reward forgery from inside the policy's worker: every component must be the honest one.

A `cadquery_script` that escapes the AST lint has full Python in the worker. Each attack here
is paired with an honest twin: the same calls, with a benign script in the hostile one's place
(or one that fails where the hostile one only claims success). The verifier rebuilds the
episode from the trusted side's ledger in a clean worker, so both must score exactly the same
in every path that scores episodes: `tasks try`, `eval` (run_spec) and GRPO rollouts
(run_groups). Each test also checks, as a control, that the attack did work inside the
policy's own worker (the forged replies said what the attacker wanted).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from agents.loop.config import LoopConfig
from agents.policies.simple import PlanPolicy, calls_from_plan
from tools import ToolSession
from tools.trust import confined
from training.eval.harness import episode_scheduler, run_spec, task_spec
from training.rl.rollouts import run_groups
from training.tasks import get_task
from training.tasks.runner import run_calls
from training.tasks.verifier import verify

TASK = "primitive_placement:1:42"


def hostile(probe: str) -> str:
    """A script that runs `probe` with real builtins past the lint, then makes its part."""
    return ("import dataclasses\nimp = dataclasses.sys.modules['importlib'].import_module\n"
            "bi = imp('builtins')\n"
            f"bi.exec({probe!r}, {{'__builtins__': bi}})\n"
            "result = cq.Workplane().box(1, 1, 1)\n")


BENIGN = "result = cq.Workplane().box(1, 1, 1)\n"
RUNTIME = ("import gc\n"
           "rt = [o for o in gc.get_objects() if type(o).__name__ == 'WorkerRuntime'][0]\n")
# Every later call that fails is answered as a success (the `ok` flags validity counts).
FORGE_OK = RUNTIME + """
orig = rt._call
def forged(tool, args, mutating):
    try:
        return orig(tool, args, mutating)
    except Exception:
        return rt._ok({})
rt._call = forged
"""
# A copy of the scene as it is now, planted as the highest-named commit.
PLANT = RUNTIME + """
import os, shutil
d = os.path.join(rt.scratch, 'state', 'commits')
last = sorted(n for n in os.listdir(d) if n.isdigit())[-1]
shutil.copytree(os.path.join(d, last), os.path.join(d, '999999'))
"""
# The script's part is never committed, yet the call answers that it made it.
NO_PART = RUNTIME + "rt.state.commit = lambda *a, **k: None\n"
FAILING = "raise ValueError('no part')\n"
MISSES = [{"tool": "transform", "args": {"name": "Nope", "location": [0, 0, 1]}},
          {"tool": "set_material", "args": {"name": "Nope", "color": "#ff0000"}}]


def script(code: str) -> dict:
    return {"tool": "cadquery_script", "args": {"code": code, "name": "Dust"}}


def _started(session, task, plan: list[dict]) -> list[dict]:
    """The task's start state in `session`, then `plan` run there; the call records."""
    session.reset()
    task.setup(session)
    return run_calls(session, plan)


def _key(v) -> tuple:
    return (v.total, v.success, v.components)


def _via_try(plan: list[dict], tmp_path, tag: str, task: str = TASK) -> tuple[tuple, list[bool]]:
    from studio.cli import build_app

    path = tmp_path / f"{tag}.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in plan))
    res = CliRunner().invoke(build_app(), ["tasks", "try", task, "--calls", str(path), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output[res.output.index("{"):])
    return (out["reward"], out["success"], out["components"]), []


def _via_eval(plan: list[dict], worker_pool, task: str = TASK) -> tuple[tuple, list[bool]]:
    with ToolSession(worker_pool) as s:
        record = run_spec(task_spec(task), PlanPolicy(calls_from_plan(plan)), s,
                          config=LoopConfig(max_steps=len(plan) + 2))
    result = record["_result"]
    return _key(result.verdict), [c["ok"] for c in result.calls]


def _via_rollout(plan: list[dict], worker_pool, task: str = TASK) -> tuple[tuple, list[bool]]:
    with episode_scheduler(1, lambda: ToolSession(worker_pool)) as scheduler:
        [[rollout]] = run_groups(scheduler, [(0, task)], 1,
                                 lambda seed, greedy=False: PlanPolicy(calls_from_plan(plan)),
                                 LoopConfig(max_steps=len(plan) + 2))
    return _key(rollout.result.verdict), [c["ok"] for c in rollout.result.calls]


@pytest.mark.parametrize("path", ["try", "eval", "rollout"])
def test_forged_ok_flags_earn_exactly_the_honest_reward(path, worker_pool, tmp_path):
    oracle = [dict(c) for c in get_task(TASK).oracle]
    forged_plan = [script(hostile(FORGE_OK)), *MISSES, *oracle]
    honest_plan = [script(BENIGN), *MISSES, *oracle]
    run = {"try": lambda p, t: _via_try(p, tmp_path, t),
           "eval": lambda p, t: _via_eval(p, worker_pool),
           "rollout": lambda p, t: _via_rollout(p, worker_pool)}[path]
    forged, forged_ok = run(forged_plan, "forged")
    honest, honest_ok = run(honest_plan, "honest")
    if forged_ok:  # control: inside the policy's worker the misses were answered as successes
        assert forged_ok[1:3] == [True, True] and honest_ok[1:3] == [False, False]
    assert forged == honest
    assert honest[2]["validity"] < 1.0 and honest[2]["recovery"] < 1.0


def test_a_planted_commit_is_never_what_is_scored(worker_pool):
    """The script plants a copy of the solved scene as the highest-named commit, then the
    policy destroys the scene: the verifier scores the scene the calls made, not the plant."""
    task = get_task(TASK)
    tail = [{"tool": "clear_scene", "args": {}}]
    verdicts = {}
    for tag, code in (("forged", hostile(PLANT)), ("honest", BENIGN)):
        with ToolSession(worker_pool) as s:
            s.reset()
            task.setup(s)
            calls = run_calls(s, [*task.oracle, script(code), *tail])
            if tag == "forged":  # control: the plant is there, above every real commit
                assert confined.is_file(s.scratch, "state/commits/999999/parts.json")
            verdicts[tag] = verify(task, s, calls)
    assert _key(verdicts["forged"]) == _key(verdicts["honest"])
    assert verdicts["honest"].success is False


def test_a_script_counts_only_if_its_part_is_in_the_commit(worker_pool):
    """A script that answers success without its part ever being committed is worth exactly
    what a script that fails is worth."""
    task = get_task(TASK)
    verdicts = {}
    for tag, code in (("forged", hostile(NO_PART)), ("honest", FAILING)):
        with ToolSession(worker_pool) as s:
            s.reset()
            task.setup(s)
            calls = run_calls(s, [script(code), *task.oracle])
            assert calls[0]["ok"] is (tag == "forged")  # control: the forged one says it ran
            verdicts[tag] = verify(task, s, calls)
    assert _key(verdicts["forged"]) == _key(verdicts["honest"])
    assert verdicts["forged"].components["validity"] < 1.0


def test_a_call_record_not_in_the_ledger_counts_as_failed(worker_pool):
    """`calls` come from the caller: a record without the ledger's seq for it (or naming
    another tool) is not evidence that anything ran."""
    task = get_task(TASK)
    with ToolSession(worker_pool) as s:
        calls = _started(s, task, task.oracle)
        honest = verify(task, s, calls)
        made_up = [*calls, {"tool": "add_primitive", "args": {}, "ok": True}]
        renamed = [dict(calls[0], tool="delete"), *calls[1:]]
        assert verify(task, s, made_up).components["validity"] < honest.components["validity"]
        assert verify(task, s, renamed).components["validity"] < honest.components["validity"]


def test_a_long_history_folds_into_a_vaulted_base_and_still_scores_honestly(worker_pool,
                                                                          monkeypatch):
    """Past the ledger's cap the history so far becomes a base commit, vaulted by the trusted
    side; the rebuild starts there and the reward is the one the whole history earns."""
    from tools.trust import ledger

    task = get_task(TASK)
    with ToolSession(worker_pool) as s:
        calls = _started(s, task, task.oracle)
        full = verify(task, s, calls)
    monkeypatch.setattr(ledger, "MAX_ENTRIES", 1)
    with ToolSession(worker_pool) as s:
        calls = _started(s, task, [*task.oracle, {"tool": "get_scene", "args": {}}])
        base, entries = s.ledger.snapshot()
        assert base is not None and [e.tool for e in entries] == ["get_scene"]
        folded = verify(task, s, calls)
    assert "verifier" not in folded.details
    assert folded.components["constraints"] == full.components["constraints"] == 1.0
