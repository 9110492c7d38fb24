"""The packaged pretrained base (SmolLM2-135M-Instruct) driving the real loop: a zero-shot
generation goes through the parser as a typed no-call, a short LoRA SFT on oracle
demonstrations makes it answer a level-1 task in the call format where it did not before, and
`modelwright run` records the real model's token ids. Real Blender workers, real weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agents.policies.hf_policy import DEFAULT_LOCAL_MODEL

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TRAIN = [f"primitive_placement:1:{s}" for s in range(8)]
HELD = "primitive_placement:1:110003"  # a test-split seed: never trained on
SHOWN = ["add_primitive", "transform", "set_material", "delete"]


def _first_turns(ids: list[str]) -> list[dict]:
    """Oracle episodes of `ids` through the eval harness, captured turn by turn."""
    from training.eval.oracle import OraclePolicy
    from training.eval.run_eval import run_episodes
    from training.sft.demos import CapturingPolicy

    sink: list[dict] = []
    lock = threading.Lock()
    report = run_episodes(ids, lambda: CapturingPolicy(OraclePolicy(), sink, lock, SHOWN), 4)
    assert report["overall"]["success_rate"] == 1.0
    return sorted(sink, key=lambda d: (d["task_id"], d["turn"]))


@pytest.fixture(scope="module")
def captured(base_data_env):
    return _first_turns([*TRAIN, HELD])


@pytest.fixture(scope="module")
def base(base_data_env):
    from agents.policies.hf_policy import HFPolicyConfig, load_model

    return load_model(HFPolicyConfig(model=DEFAULT_LOCAL_MODEL, dtype="bfloat16"))


def _greedy(model, processor, turn: dict, adapter_label: str = ""):
    from agents.policies.hf_policy import HFPolicy

    policy = HFPolicy.from_loaded(model, processor, model=adapter_label or DEFAULT_LOCAL_MODEL,
                                  max_tokens=72, tools=SHOWN)  # fmt: skip
    messages, tools, _ = turn["conversation"]
    return policy.act(messages, tools)


def _held_first_turn(captured: list[dict]) -> dict:
    return next(t for t in captured if t["task_id"] == HELD and t["turn"] == 0)


def test_zero_shot_reply_is_a_typed_no_call_with_its_tokens(base, captured):
    model, processor = base
    reply = _greedy(model, processor, _held_first_turn(captured))
    # The instruct model answers in prose: no call, said as such, nothing invented.
    assert reply.tool_calls == [] and reply.raw["no_call"] == "prose"
    assert reply.text and reply.text == reply.raw["completion"]
    ids = reply.tokens.completion_ids
    assert ids and processor.decode(ids, skip_special_tokens=True).strip() == reply.text
    assert len(reply.tokens.logprobs) == len(ids)
    # The prompt is the level-1 prompt in the Hermes format, within the small model's budget.
    prompt = processor.decode(reply.tokens.prompt_ids)
    assert "<tool_call>" in prompt and "add_primitive(kind:" in prompt and "data:image" not in prompt
    assert len(reply.tokens.prompt_ids) <= 600


@pytest.fixture(scope="module")
def sft_adapter(base_data_env, captured, tmp_path_factory):
    """A LoRA adapter from a short SFT of the base on the oracle's turns of TRAIN."""
    from training.pipeline import _demo_rows
    from training.sft.demos import write_rows
    from training.sft.trainer import run_sft
    from training.train_config import TrainConfig

    out = tmp_path_factory.mktemp("real-sft")
    # First turns only: the format of a call is what is tested, and they are the short rows.
    train = [t for t in captured if t["task_id"] != HELD and t["turn"] == 0]
    report = {"episodes": [{"task": t, "success": True, "reward": 1.0} for t in TRAIN]}
    write_rows(_demo_rows(train, report, "", first_turn=0), out / "demos.parquet")
    config = TrainConfig.model_validate({
        "kind": "sft", "model": {"path": DEFAULT_LOCAL_MODEL, "dtype": "bfloat16"},
        "tools": SHOWN, "run": {"seed": 0, "save_steps": 1000, "report_to": [], "cpu_threads": 1},
        "lora": {"r": 16, "alpha": 32, "target_modules": [
            "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]},
        "sft": {"data": [str(out / "demos.parquet")], "max_steps": 6, "learning_rate": 2e-3,
                "per_device_train_batch_size": 2},
    })  # fmt: skip
    result = run_sft(config, out / "run")
    assert result.steps == 6
    return result.adapter_dir


@pytest.mark.timeout(1500)  # the base's SFT steps and generations on a loaded 2-core machine
def test_short_sft_teaches_the_call_format(base, captured, sft_adapter):
    from peft import PeftModel

    model, processor = base
    turn = _held_first_turn(captured)
    before = _greedy(model, processor, turn)
    tuned = PeftModel.from_pretrained(model, str(sft_adapter)).eval()
    try:
        after = _greedy(tuned, processor, turn, adapter_label="sft")
    finally:
        tuned.unload()  # the module-scoped base stays the base for other tests
    assert before.tool_calls == []
    assert "<tool_call>" in after.raw["completion"]
    assert [c.name for c in after.tool_calls] == ["add_primitive"]
    assert isinstance(after.tool_calls[0].arguments, dict)


@pytest.mark.timeout(1500)
def test_run_records_the_real_models_token_ids(base_data_env, sft_adapter, tmp_path):
    from agents.store import Store

    store_dir = tmp_path / "store"
    env = {**os.environ, "MODELWRIGHT_DATA_DIR": str(base_data_env), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "studio.cli", "run", "--task", HELD, "--policy", "hf",
         "--model", DEFAULT_LOCAL_MODEL, "--adapter", str(sft_adapter), "--max-tokens", "72",
         "--max-steps", "2", "--data-dir", str(store_dir), "--json"],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-2000:]  # 1: the episode ran and failed
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["success"] is (proc.returncode == 0)
    store = Store(store_dir)
    episode = store.episode(summary["episode_id"])
    assert episode.policy.startswith("hf:")
    steps = store.steps(episode.id)
    assert steps and steps[0].token_ids, "the first turn's generated ids are recorded"
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(Path(base_data_env) / "models" / DEFAULT_LOCAL_MODEL)
    text = tok.decode(steps[0].token_ids, skip_special_tokens=True)
    assert steps[0].tool in text and "<tool_call>" in text
    assert len(steps[0].logprobs) == len(steps[0].token_ids)


@pytest.mark.timeout(1500)
def test_eval_in_lockstep_waves_reports_what_one_by_one_does(base, sft_adapter):
    """`eval.batch`: the episodes of a wave generate each turn as one left-padded batch. For a
    trained adapter's short, confident calls the replies are those one at a time (same
    rewards, steps, valid calls); wrong padding, positions or row order would change them. (In
    long, unsure zero-shot replies bf16 rounding of another batch shape can flip a near-tie:
    benchmarks/bench_pipeline.py counts them.)"""
    from peft import PeftModel

    from training.eval.run_eval import evaluate_loaded
    from training.train_config import TrainConfig

    model, processor = base
    tuned = PeftModel.from_pretrained(model, str(sft_adapter)).eval()
    reports = {}
    try:
        for batch in (1, 2):
            config = TrainConfig.model_validate({
                "kind": "sft", "model": {"path": DEFAULT_LOCAL_MODEL}, "tools": SHOWN,
                "sft": {"data": ["unused.parquet"]},
                "eval": {"families": ["primitive_placement"], "levels": [1], "split": "test",
                         "per_family": 3, "max_steps": 2, "max_tokens": 72, "batch": batch},
            })  # fmt: skip
            reports[batch] = evaluate_loaded(config, tuned, processor, label="sft")
    finally:
        tuned.unload()

    def seen(report):
        return [(e["task"], e["reward"], e["success"], e["steps"], e["calls"])
                for e in sorted(report["episodes"], key=lambda e: e["task"])]  # fmt: skip

    assert seen(reports[2]) == seen(reports[1])
    assert reports[2]["schema_valid_calls"] == reports[1]["schema_valid_calls"]
    assert "lockstep_batches" not in reports[1]
    sizes = reports[2]["lockstep_batches"]
    # Waves of 2 and 1 episodes: every turn of the first wave's live episodes is one batch.
    assert sizes[0] == 2 and sum(sizes) == sum(e["steps"] for e in reports[2]["episodes"])
