"""Modelwright's tasks as environments for other trainers (training/envs/): the same calls
give the same records and rewards as `modelwright eval`, each episode has a fresh worker, and
a forged call earns its honest twin's reward through the environment too."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.security.test_trust_rewards import (
    BENIGN,
    FORGE_OK,
    MISSES,
    TASK,
    _via_eval,
    hostile,
    script,
)
from tools import ToolSession
from training.envs.core import EnvError, EpisodeEnv
from training.envs.trl_env import environment, task_dataset, task_ids
from training.tasks import TaskError, get_task

# One script for every task: a cube where the README's goal asks for it, then a colour.
CALLS = [
    {"name": "add_primitive",
     "arguments": {"kind": "cube", "name": "Box", "dimensions": [1, 1, 1], "location": [1, 0, 0.5]}},
    {"name": "set_material", "arguments": {"name": "Box", "color": "#D03030"}},
]


@pytest.fixture
def env(worker_pool):
    e = EpisodeEnv(max_steps=8, session_factory=lambda: ToolSession(worker_pool))
    yield e
    e.close()


def _eval_cli(tmp_path, families: str, per_family: int) -> dict:
    from studio.cli import build_app

    path = tmp_path / "calls.jsonl"
    path.write_text("".join(json.dumps({"tool": c["name"], "args": c["arguments"]}) + "\n"
                            for c in CALLS))  # fmt: skip
    out = tmp_path / "report.json"
    res = CliRunner().invoke(build_app(), [
        "eval", "--policy", f"script:{path}", "--families", families, "--per-family",
        str(per_family), "--split", "test", "--no-record", "--json", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    return json.loads(out.read_text())


def test_the_env_and_trl_class_score_as_eval_does(env, worker_pool, tmp_path):
    report = _eval_cli(tmp_path, "requests,scene_editing", 2)
    by_task = {e["task"]: e for e in report["episodes"]}
    assert len(by_task) == 4
    Env = environment(["requests", "scene_editing"], levels=[1, 2])
    Env.max_steps = 8
    trl = Env.__new__(Env)  # the TRL class on the test's worker pool
    trl._env = EpisodeEnv(max_steps=8, session_factory=lambda: ToolSession(worker_pool), name="trl")
    rewards = set()
    for task_id, ours in by_task.items():
        obs = env.reset(task_id)
        assert get_task(task_id).prompt in obs.text and "Scene:" in obs.text
        for call in CALLS:
            step = env.step(call)
            assert not step.done and step.text
        record = env.finish()
        first = trl.reset(task_id=task_id, prompt=[])
        assert first == obs.text
        for call in CALLS:
            getattr(trl, call["name"])(**call["arguments"])
        trl_reward = trl.get_reward()
        keys = ("reward", "success", "components", "steps", "calls", "tool_errors")
        assert {k: record[k] for k in keys} == {k: ours[k] for k in keys}, task_id
        assert trl_reward == ours["reward"]
        rewards.add(ours["reward"])
    trl._env.close()
    assert len(rewards) > 1  # the tasks differ, so the comparison is not of one constant


def test_each_episode_has_a_fresh_worker(env):
    """What one episode made is not in the next one's scene, even on the same task."""
    obs = env.reset(TASK)
    assert "Box" not in obs.text
    after = env.step(CALLS[0])
    assert '"Box"' in after.text or "Box" in after.text
    env.finish()
    again = env.reset(TASK)
    assert again.text == obs.text and "Box" not in again.text


def test_a_forged_call_earns_its_honest_twins_reward_through_the_env(env, worker_pool):
    oracle = [dict(c) for c in get_task(TASK).oracle]
    rewards = {}
    for tag, code in (("forged", hostile(FORGE_OK)), ("honest", BENIGN)):
        env.reset(TASK)
        for c in [script(code), *MISSES, *oracle]:
            env.step({"name": c["tool"], "arguments": c["args"]})
        record = env.finish()
        rewards[tag] = (record["reward"], record["success"], record["components"])
    assert rewards["forged"] == rewards["honest"]
    honest_eval, _ = _via_eval([script(BENIGN), *MISSES, *oracle], worker_pool)
    assert rewards["honest"][0] == honest_eval[0]
    assert rewards["honest"][2]["validity"] < 1.0


def test_a_budget_that_runs_out_ends_the_episode(worker_pool):
    env = EpisodeEnv(max_steps=1, session_factory=lambda: ToolSession(worker_pool))
    env.reset(TASK)
    obs = env.step(CALLS[0])
    assert obs.done and obs.record["steps"] == 1
    assert env.finish() is obs.record
    with pytest.raises(EnvError, match="after the episode ended"):
        env.step(CALLS[0])


def test_misuse_is_one_clear_error(env):
    with pytest.raises(EnvError, match="before reset"):
        env.step(CALLS[0])
    with pytest.raises(TaskError, match="nosuch"):
        env.reset("nosuch:1:0")
    env.reset(TASK)
    with pytest.raises(EnvError, match="needs a name"):
        env.step({"arguments": {}})
    # a malformed call is the model's mistake: it comes back as the tool's error, as in eval
    obs = env.step({"name": "add_primitive", "arguments": {"kind": "cube"}})
    assert not obs.done and "name" in obs.text.lower()


def test_the_trl_class_reads_as_tools():
    """TRL exposes the public methods as tools and renders their schemas from the signatures
    and docstrings (transformers' get_json_schema); the dataset's rows carry their task."""
    from transformers.utils import get_json_schema

    Env = environment(["requests"], levels=[1])
    assert set(Env.tool_names) == {"add_primitive", "transform", "set_material", "delete",
                                   "duplicate", "get_scene", "measure"}  # fmt: skip
    schema = get_json_schema(Env.add_primitive)["function"]
    props = schema["parameters"]["properties"]
    assert schema["parameters"]["required"] == ["kind", "name", "dimensions"]
    assert props["kind"]["enum"][:2] == ["cube", "cylinder"]
    assert props["dimensions"] == {"type": "array", "items": {"type": "number"},
                                   "description": "3 values"}  # fmt: skip
    ids = task_ids(Env, 6)
    assert len(ids) == 6 and all(i.startswith("requests:1:") for i in ids)
    assert ids == task_ids(Env, 6)  # seeded
    ds = task_dataset(Env, 6)
    assert ds["task_id"] == ids and ds[0]["prompt"][-1] == {"role": "user", "content": ""}
    with pytest.raises(ValueError, match="unknown families"):
        environment(["nosuch"])
