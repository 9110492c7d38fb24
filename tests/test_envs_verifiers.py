"""Modelwright's tasks as a verifiers environment (environments/modelwright), run by verifiers'
own `vf-eval` from its own venv (.venv-vf) against Modelwright's OpenEnv server on loopback,
the model a scripted OpenAI-compatible endpoint that makes the same calls as
`--policy script:FILE`: the rewards are eval's, each rollout has a fresh worker, and a forged
call earns its honest twin's reward.

verifiers 0.4.0 cannot be installed into .venv (it pins openai<3 and mcp==2.0.0), so these
tests need `make envs-venv` (PyPI) and are skipped, saying so, where .venv-vf is absent."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.scripted_openai import ScriptedOpenAI

from tests.security.test_trust_rewards import (
    BENIGN,
    FORGE_OK,
    MISSES,
    TASK,
    _via_eval,
    hostile,
    script,
)
from tests.test_envs import CALLS, _eval_cli
from tools import ToolSession
from training.envs.openenv_server import Background, EnvServer
from training.tasks import get_task

REPO = Path(__file__).resolve().parent.parent
VF = Path(os.environ.get("MODELWRIGHT_VF_VENV", REPO / ".venv-vf"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (VF / ".installed").is_file(),
                       reason=f"verifiers' own venv {VF} is absent: `make envs-venv` makes it "
                              "(docs/ENVIRONMENTS.md)"),  # fmt: skip
]
KEYS = ("reward", "success", "components", "steps", "calls", "tool_errors")


@pytest.fixture(scope="module")
def server(worker_pool):
    srv = EnvServer(["requests", "scene_editing", "primitive_placement"], [1, 2], max_steps=8,
                    session_factory=lambda: ToolSession(worker_pool))  # fmt: skip
    with Background(srv) as bg:
        yield bg


def vf_eval(server, calls: list[dict], task_ids: list[str], out: Path, rollouts: int = 1) -> list[dict]:
    """`vf-eval modelwright-env` on `task_ids` with the scripted model; its traces."""
    model = ScriptedOpenAI(calls)
    try:
        env = {**os.environ, "PATH": f"{VF / 'bin'}{os.pathsep}{os.environ['PATH']}",
               "SCRIPTED_KEY": "scripted"}  # fmt: skip
        cmd = [str(VF / "bin" / "vf-eval"), "modelwright-env",
               "--env.taskset.task-ids", json.dumps(task_ids),
               "--env.taskset.task.server-url", server.url,
               "--env.agent.harness.id", "null", "--env.agent.runtime.type", "subprocess",
               "--client.base-url", model.url, "--client.api-key-var", "SCRIPTED_KEY",
               "-m", "scripted", "-r", str(rollouts), "-c", "1", "--no-push", "-o", str(out)]  # fmt: skip
        res = subprocess.run(cmd, env=env, cwd=out.parent, capture_output=True, text=True, timeout=1800)
    finally:
        model.stop()
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    traces = [tr for path in sorted(out.glob("*/traces.jsonl"))
              for line in path.read_text().splitlines() for tr in json.loads(line)["traces"]]  # fmt: skip
    for tr in traces:
        assert tr["ok"] and not tr["errors"], tr["errors"]
    return traces


def test_vf_eval_scores_as_eval_does(server, tmp_path):
    report = _eval_cli(tmp_path, "requests,scene_editing", 2)
    by_task = {e["task"]: e for e in report["episodes"]}
    assert len(by_task) == 4
    traces = vf_eval(server, CALLS, list(by_task), tmp_path / "vf")
    assert sorted(tr["info"]["modelwright_task"] for tr in traces) == sorted(by_task)
    for tr in traces:
        ours = by_task[tr["info"]["modelwright_task"]]
        record = tr["info"]["modelwright_record"]
        assert tr["rewards"]["modelwright"]["score"] == ours["reward"]
        assert {k: record[k] for k in KEYS} == {k: ours[k] for k in KEYS}
        # the model was shown the task's own tools, with the product's schemas
        shown = {t["name"] for t in tr["nodes"][0]["tools"]}
        assert {"add_primitive", "set_material"} <= shown
    assert len({e["reward"] for e in by_task.values()}) > 1


def test_each_rollout_has_a_fresh_worker(server, tmp_path):
    traces = vf_eval(server, [CALLS[0]], [TASK], tmp_path / "vf", rollouts=2)
    assert len(traces) == 2
    firsts = [next(n["message"]["content"] for n in tr["nodes"]
                   if n.get("message", {}).get("role") == "user") for tr in traces]  # fmt: skip
    assert firsts[0] == firsts[1] and "Box" not in firsts[0]
    records = [tr["info"]["modelwright_record"] for tr in traces]
    assert records[0] == records[1] and records[0]["tool_errors"] == 0


def test_a_forged_call_earns_its_honest_twins_reward_through_verifiers(server, worker_pool, tmp_path):
    oracle = [dict(c) for c in get_task(TASK).oracle]
    rewards = {}
    for tag, code in (("forged", hostile(FORGE_OK)), ("honest", BENIGN)):
        plan = [script(code), *MISSES, *oracle]
        [tr] = vf_eval(server, [{"name": c["tool"], "arguments": c["args"]} for c in plan], [TASK],
                       tmp_path / tag)  # fmt: skip
        rec = tr["info"]["modelwright_record"]
        rewards[tag] = (tr["rewards"]["modelwright"]["score"], rec["success"], rec["components"])
    assert rewards["forged"] == rewards["honest"]
    honest_eval, _ = _via_eval([script(BENIGN), *MISSES, *oracle], worker_pool)
    assert rewards["honest"][0] == honest_eval[0]
    assert rewards["honest"][2]["validity"] < 1.0


def test_load_environment_is_verifiers_entry_point():
    """`load_environment(**kwargs)` builds the same environment vf-eval loads by its id."""
    code = ("import json\nfrom modelwright_env import load_environment\n"
            "env = load_environment(task_ids=['requests:1:110000'], task={'server_url': 'http://127.0.0.1:9'})\n"
            "drawn = load_environment(families=['requests'], levels=[1, 2], num_tasks=3, seed=5)\n"
            "print(json.dumps([type(env).__name__, [t.data.reset for t in env.taskset.load()],\n"
            "                  [t.data.reset for t in drawn.taskset.load()]]))\n")  # fmt: skip
    res = subprocess.run([str(VF / "bin" / "python"), "-c", code], capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    name, given, drawn = json.loads(res.stdout.strip().splitlines()[-1])
    assert name == "ModelwrightEnv" and given == [{"task_id": "requests:1:110000"}]
    assert drawn == [{"family": "requests", "level": lv, "split": "train", "seed": s}
                     for lv, s in ((1, 5), (2, 6), (1, 7))]  # fmt: skip
