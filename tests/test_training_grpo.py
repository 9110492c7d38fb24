"""Multi-turn GRPO on the tiny model with real TRL, PEFT and sandboxed tool workers."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from training.curriculum import Curriculum
from training.train_config import CurriculumSpec

TOOLS = ["add_primitive"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def runtime():
    from training.grpo import build_runtime
    from training.train_config import GRPOSpec, TaskSampling

    spec = GRPOSpec(
        tasks=TaskSampling(families=["primitive_placement"], levels=[1]),
        render_size=128,
        rollout_workers=2,  # rollouts share slots: states are parked and taken (switch)
    )
    rt = build_runtime(spec, seed=0, shown=TOOLS)
    yield rt
    rt.close()


def test_reset_shows_the_loops_first_observation(runtime, session):
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
        session,
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


def test_a_crashed_worker_is_restarted_and_the_call_retried_and_logged(runtime, caplog):
    from training.grpo_env import make_environment_class

    env = make_environment_class(runtime)()
    env.reset(slot=1)
    first = env.add_primitive(kind="cube", name="A", dimensions=[1, 1, 1])
    assert '"created"' in first[0]["text"] and env.outcomes[-1].ok
    env._session.scene_hash()  # a round trip: the worker answers in order, so A is committed
    env._session.worker.proc.kill()  # the sandboxed worker dies under the next call
    before = runtime.crash_retries
    with caplog.at_level(logging.WARNING, logger="training.grpo_env"):
        result = env.add_primitive(kind="cube", name="B", dimensions=[1, 1, 1], location=[3, 0, 0])
    assert runtime.crash_retries == before + 1
    assert "crashed" in caplog.text and env.task.id in caplog.text
    assert all(o.ok for o in env.outcomes), result[0]["text"]
    names = {o["name"] for o in env._session.scene()["objects"]}
    assert {"A", "B"} <= names  # the restarted worker had A (its last commit) before B


def _names(env) -> set[str]:
    env._acquire()
    return {o["name"] for o in env._session.scene()["objects"]}


def test_rollouts_sharing_worker_slots_keep_their_own_states(runtime, session):
    from training.grpo_env import make_environment_class

    cls = make_environment_class(runtime)
    envs = [cls() for _ in range(4)]
    slots = [10, 10, 11, 11]  # two tasks, two rollouts each, on 2 worker slots
    runtime.prepare(slots)
    seen = [env.reset(slot=s) for env, s in zip(envs, slots, strict=True)]
    assert [env._slot for env in envs] == [0, 1, 0, 1]
    assert seen[0][1]["image"] is seen[1][1]["image"]  # each first view is rendered once
    start = [_names(env) for env in envs]
    before = (runtime.switches, runtime.replays)
    cube = {"kind": "cube", "dimensions": [0.5, 0.5, 0.5]}
    envs[0].add_primitive(**cube, name="A0", location=[3, 0, 0])
    envs[2].add_primitive(**cube, name="A2", location=[0, 3, 0])  # same slot as envs[0]
    envs[1].add_primitive(**cube, name="B1", location=[3, 3, 0])
    envs[1].undo(steps=1)  # its own history only
    envs[0].add_primitive(**cube, name="C0", location=[-3, 0, 0])
    assert all(o.ok for env in envs for o in env.outcomes), [o.text for o in envs[1].outcomes]
    verdicts = runtime.verdicts(envs)  # computed on both slots at once
    grown = [_names(env) - s for env, s in zip(envs, start, strict=True)]
    assert grown == [{"A0", "C0"}, set(), {"A2"}, set()]
    assert runtime.switches > before[0] and runtime.replays == before[1]  # no replays
    # The same reward as the rollout's calls replayed on a worker of its own.
    session.reset()
    envs[0].task.setup(session)
    for o in envs[0].outcomes:
        session.call(o.call.name, o.call.arguments)
    calls = [o.for_checker() for o in envs[0].outcomes]
    assert verdicts[0].total == envs[0].task.evaluate(session, calls).total

    # A slot whose worker cannot be used any more gets a fresh one; its rollouts are replayed.
    runtime.session(1).close()
    retries = runtime.crash_retries
    envs[1].add_primitive(**cube, name="D1", location=[0, -3, 0])
    assert runtime.crash_retries == retries + 1 and runtime.replays == before[1] + 1
    assert envs[1].outcomes[-1].ok and _names(envs[1]) - start[1] == {"D1"}
    assert _names(envs[3]) == start[3] and runtime.replays == before[1] + 2


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


def _teach(tmp_path: Path, model_dir: Path, runtime) -> Path:
    """Overfit the tiny model (every weight) on one rollout's first prompt with two answers
    in equal measure: the oracle call (full reward) and a bare "Done." (no call, no reward).
    A random model never calls a tool; a model taught one answer only writes it 8 times out
    of 8 (a group without a gradient). Taught both, its first token is a coin flip, so a
    seeded group of 8 holds both rewards on any machine (float noise moves p, not the flips)."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from agents.loop import DEFAULT_SYSTEM
    from training.grpo_env import make_environment_class

    env = make_environment_class(runtime)()
    observation = env.reset(slot=0)
    messages = [
        {"role": "system", "content": DEFAULT_SYSTEM},
        {"role": "user", "content": [{"type": "text", "text": ""}, *observation]},
    ]
    target = (
        '<tool_call>\n{"name": "add_primitive", "arguments": '
        + json.dumps(env.task.oracle[0]["args"])
        + "}\n</tool_call><|im_end|>"
    )
    processor = AutoProcessor.from_pretrained(model_dir)
    model = AutoModelForImageTextToText.from_pretrained(model_dir)
    prompt = processor.apply_chat_template(
        messages,
        tools=runtime.tools,
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
        return_tensors="pt",
    )
    batches = []
    for answer in (target, "Done.<|im_end|>"):
        ids = processor.tokenizer(answer, add_special_tokens=False, return_tensors="pt")
        ids = ids["input_ids"]
        batch = dict(prompt)
        batch["input_ids"] = torch.cat([prompt["input_ids"], ids], 1)
        batch["attention_mask"] = torch.ones_like(batch["input_ids"])
        batch["mm_token_type_ids"] = torch.cat(
            [prompt["mm_token_type_ids"], torch.zeros_like(ids)], 1)
        labels = batch["input_ids"].clone()
        labels[:, : prompt["input_ids"].shape[1]] = -100
        batches.append((batch, labels, ids.shape[1]))
    tokens = sum(n for *_, n in batches)
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(120):
        opt.zero_grad()
        # Both answers in one step, weighted by their length: the loss is a per-token mean,
        # and unweighted the short answer's first token would outweigh the long one's ~20:1.
        for batch, labels, n in batches:
            (model(**batch, labels=labels).loss * n / tokens).backward()
        opt.step()
    out = tmp_path / "taught"
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def _blank_png() -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (256, 256), (90, 90, 90)).save(buf, format="PNG")
    return buf.getvalue()


def _shown_tools() -> list[dict]:
    from agents.loop import openai_tools
    from tools import catalogue

    return [t for t in openai_tools(catalogue()) if t["function"]["name"] in TOOLS]


def test_one_grpo_step_changes_the_adapter_and_masks_tool_tokens(tmp_path, tiny_model_dir, runtime):
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    from training.grpo import run_grpo
    from training.train_config import load_config

    taught = _teach(tmp_path, tiny_model_dir, runtime)
    # Both prompt slots of this one-step run get the task the model was taught on.
    task = runtime.curriculum.task_for(0)
    runtime.curriculum.load_state_dict({"assigned": {"0": task, "1": task}})
    cfg = tmp_path / "grpo.yaml"
    cfg.write_text(
        f"kind: grpo\nmodel: {{path: {taught}}}\ntools: {TOOLS}\n"
        "run: {seed: 1, save_steps: 1, report_to: []}\n"
        "grpo: {tasks: {families: [primitive_placement], levels: [1]}, max_steps: 1,"
        " per_device_train_batch_size: 8, num_generations: 8, max_completion_length: 800,"
        " max_turns: 2, temperature: 1.0, learning_rate: 1.0e-2, render_size: 128}\n"
    )
    result = run_grpo(load_config(cfg), tmp_path / "run", runtime=runtime)
    assert result.steps == 1
    metrics = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert metrics["reward_std"] > 0, metrics  # a group with different rewards: a gradient
    assert 0 < metrics["reward/success"] < 1, metrics  # both taught answers were sampled
    after = load_file(str(result.adapter_dir / "adapter_model.safetensors"))
    lora_b = [t for k, t in after.items() if "lora_B" in k]
    assert lora_b and any(float(t.abs().max()) > 0 for t in lora_b)  # B starts at zero
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
