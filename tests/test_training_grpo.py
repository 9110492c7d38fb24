"""Multi-turn GRPO on the tiny model with real TRL, PEFT and sandboxed tool workers."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from training.curriculum import Curriculum
from training.train_config import CurriculumSpec

TOOLS = ["add_primitive"]


@pytest.fixture(autouse=True)
def _one_torch_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)  # 2 threads on a busy 2-core box spin against each other
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def runtime():
    from training.grpo import build_runtime
    from training.train_config import GRPOSpec, TaskSampling

    spec = GRPOSpec(
        tasks=TaskSampling(families=["primitive_placement"], levels=[1]), render_size=128
    )
    rt = build_runtime(spec, seed=0, shown=TOOLS)
    yield rt
    rt.close()


def test_reset_shows_the_loops_first_observation(runtime):
    from agents.loop import EpisodeLoop, LoopConfig
    from agents.policies.simple import NonePolicy
    from training.grpo_env import make_environment_class
    from training.tasks import get_task

    env = make_environment_class(runtime)()
    observation = env.reset(slot=5)
    task = get_task(runtime.curriculum.task_for(5))
    assert env.task.id == task.id and task.split == "train"
    loop = EpisodeLoop(
        NonePolicy(),
        runtime.sessions[0],
        task.prompt,
        setup=task.setup,
        config=LoopConfig(max_steps=1, render_size=128),
    )
    loop.run()
    first = loop.history[1]["content"]
    texts = lambda parts: [p["text"] for p in parts if p["type"] == "text"]  # noqa: E731
    assert texts(observation) == texts(first)  # "Goal: ..." and the compact scene
    assert [p["type"] for p in observation] == ["text", "image", "text"]
    from agents.policies.hf_policy import decode_image

    shown = decode_image(next(p for p in first if p["type"] == "image_url"))
    assert observation[1]["image"].size == shown.size


def test_tools_are_typed_documented_methods_with_the_catalogue_schemas(runtime):
    import inspect

    from transformers.utils import get_json_schema

    from training.grpo_env import make_environment_class

    cls = make_environment_class(runtime)
    method = cls.add_primitive
    assert "kind" in inspect.signature(method).parameters
    schema = get_json_schema(method)
    assert schema["function"]["name"] == "add_primitive"
    assert set(schema["function"]["parameters"]["required"]) == {"kind", "name", "dimensions"}
    assert [t["function"]["name"] for t in runtime.tools] == TOOLS  # what the prompt renders


def test_a_crashed_worker_is_replayed_retried_and_logged(runtime, caplog):
    from training.grpo_env import make_environment_class

    env = make_environment_class(runtime)()
    env.reset(slot=1)
    first = env.add_primitive(kind="cube", name="A", dimensions=[1, 1, 1])
    assert '"created"' in first[0]["text"] and env.outcomes[-1].ok
    import time

    time.sleep(0.5)  # let the worker finish writing its undo commit (see the report)
    env._session.worker.proc.kill()  # the sandboxed worker dies under the next call
    before = runtime.crash_retries
    with caplog.at_level(logging.WARNING, logger="training.grpo_env"):
        result = env.add_primitive(kind="cube", name="B", dimensions=[1, 1, 1], location=[3, 0, 0])
    assert runtime.crash_retries == before + 1
    assert "crashed" in caplog.text and env.task.id in caplog.text
    assert all(o.ok for o in env.outcomes), result[0]["text"]
    names = {o["name"] for o in env._session.scene()["objects"]}
    assert {"A", "B"} <= names  # the replay rebuilt A before B was added


def test_curriculum_is_reproducible_and_prefers_tasks_solved_sometimes():
    spec = CurriculumSpec(floor=0.01, window=10)
    a = Curriculum(["primitive_placement", "materials"], [1, 2], seed=7, spec=spec)
    b = Curriculum(["primitive_placement", "materials"], [1, 2], seed=7, spec=spec)
    assert [a.task_for(s) for s in range(20)] == [b.task_for(s) for s in range(20)]
    assert a.task_for(3) == a.task_for(3)
    for i in range(10):
        a.record("primitive_placement:1:1", True)  # always solved
        a.record("materials:1:1", i % 2 == 0)  # solved half the time
        a.record("materials:2:1", False)  # never solved
    w = dict(zip(a.buckets, a.weights(), strict=True))
    assert (
        w["materials:1"] == pytest.approx(0.01 + 0.25) == w["primitive_placement:2"]
    )  # unseen: prior 0.5
    assert w["primitive_placement:1"] == pytest.approx(0.01) == w["materials:2"]
    c = Curriculum(["primitive_placement", "materials"], [1, 2], seed=7, spec=spec)
    c.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert [c.task_for(s) for s in range(20, 40)] == [a.task_for(s) for s in range(20, 40)]


def _teach(tmp_path: Path, model_dir: Path) -> Path:
    """A short SFT so the model emits add_primitive calls (a random model never does)."""
    from agents.policy import PolicyReply
    from training.demos import conversation_row, write_rows
    from training.sft import run_sft
    from training.train_config import load_config

    rows = []
    for i, kind in enumerate(["cube", "cylinder", "cone", "torus"] * 2):
        call = {
            "id": "c0",
            "type": "function",
            "function": {
                "name": "add_primitive",
                "arguments": json.dumps({"kind": kind, "name": f"P{i}", "dimensions": [1, 1, 1]}),
            },
        }
        messages = [
            {"role": "system", "content": "s"},
            {"role": "user", "content": f"Goal: add a {kind}."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "content": "ok"},
        ]
        row = conversation_row(messages, _shown_tools(), PolicyReply(text="Done.", tool_calls=[]))
        rows.append({**row, "episode_id": f"e{i}", "success": True})
    write_rows(rows, tmp_path / "teach.parquet")
    cfg = tmp_path / "teach.yaml"
    cfg.write_text(
        f"kind: sft\nmodel: {{path: {model_dir}}}\n"
        "lora: {r: 8, alpha: 16, target_modules: [q_proj, v_proj], modules_to_save: [lm_head]}\n"
        "run: {save_steps: 100, report_to: []}\n"
        f"sft: {{data: [{tmp_path / 'teach.parquet'}], max_steps: 24, learning_rate: 1.0e-2}}\n"
    )
    return run_sft(load_config(cfg), tmp_path / "teach").adapter_dir


def _shown_tools() -> list[dict]:
    from agents.loop import openai_tools
    from tools import catalogue

    return [t for t in openai_tools(catalogue()) if t["function"]["name"] in TOOLS]


def test_one_grpo_step_changes_the_adapter_and_masks_tool_tokens(tmp_path, tiny_model_dir, runtime):
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    from training.grpo import run_grpo
    from training.train_config import load_config

    adapter = _teach(tmp_path, tiny_model_dir)
    cfg = tmp_path / "grpo.yaml"
    cfg.write_text(
        f"kind: grpo\nmodel: {{path: {tiny_model_dir}}}\ntools: {TOOLS}\n"
        "run: {seed: 1, save_steps: 1, report_to: []}\n"
        "grpo: {tasks: {families: [primitive_placement], levels: [1]}, max_steps: 1,"
        " per_device_train_batch_size: 4, num_generations: 4, max_completion_length: 320,"
        " max_turns: 2, temperature: 1.3, learning_rate: 1.0e-2, render_size: 128}\n"
    )
    result = run_grpo(load_config(cfg), tmp_path / "run", adapter=adapter, runtime=runtime)
    assert result.steps == 1
    before, after = (
        load_file(str(adapter / "adapter_model.safetensors")),
        load_file(str(result.adapter_dir / "adapter_model.safetensors")),
    )
    assert before.keys() == after.keys()
    assert any(float((before[k] - after[k]).abs().max()) > 0 for k in before)
    metrics = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    for key in (
        "step",
        "loss",
        "reward",
        "time",
        "reward/validity",
        "reward/success",
        "time/update_s",
    ):
        assert key in metrics, key
    assert (tmp_path / "run" / "checkpoint-1" / "extra_state.json").is_file()  # the curriculum
    # Tool results inside completions carry no loss; the model's own tokens do.
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    roll = result.last_rollout
    masked, learnt = [], []
    for ids, mask in zip(roll["completion_ids"], roll["loss_mask"], strict=True):
        masked += [i for i, m in zip(ids, mask, strict=True) if not m]
        learnt += [i for i, m in zip(ids, mask, strict=True) if m]
    assert "<tool_response>" in tok.decode(masked) and "Scene:" in tok.decode(masked)
    assert "<tool_response>" not in tok.decode(learnt) and "<tool_call>" in tok.decode(learnt)
