"""Periodic held-out evals during a training run (`run.eval_every`): real SFT on the tiny model,
real episodes on sandboxed tool workers, the run folder's eval reports and metrics rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_training_sft import demo_rows

from training.sft.demos import write_rows

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("demos") / "demos.parquet"
    write_rows(demo_rows(4), path)
    return path


def _config(tmp_path: Path, model: Path, demos: Path, steps: int, family: str) -> Path:
    cfg = tmp_path / "sft.yaml"
    cfg.write_text(
        f"kind: sft\nmodel: {{path: {model}}}\nlora: {{r: 4, alpha: 8}}\n"
        "tools: [add_primitive, set_material, delete]\n"
        "run: {seed: 3, save_steps: 1, eval_every: 2, report_to: [tensorboard]}\n"
        f"sft: {{data: [{demos}], max_steps: {steps}, learning_rate: 1.0e-3}}\n"
        f"eval: {{families: [{family}], levels: [1], per_family: 1, max_steps: 1, "
        "max_tokens: 16}\n"
    )
    return cfg


def _rows(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def test_every_second_checkpoint_and_the_last_are_evaluated_and_resume_keeps_them(
    tmp_path, tiny_model_dir, demos
):
    from training.eval.run_eval import task_ids
    from training.sft.trainer import run_sft
    from training.train_config import load_config

    held_out = task_ids(["primitive_placement"], [1], "test", 1)
    cfg = load_config(_config(tmp_path, tiny_model_dir, demos, 3, "primitive_placement"))
    run = tmp_path / "run"
    result = run_sft(cfg, run)
    assert result.steps == 3
    # Checkpoints 1, 2, 3: the 2nd is due (eval_every 2), and the last one always is.
    assert sorted(p.name for p in (run / "eval").iterdir()) == ["step-2.json", "step-3.json"]
    for step in (2, 3):
        report = json.loads((run / "eval" / f"step-{step}.json").read_text())
        assert report["step"] == step
        assert [e["task"] for e in report["episodes"]] == held_out
        assert report["schema_valid_calls"]["attempts"] >= 1
    rows = _rows(run)
    evals = [r for r in rows if any(k.startswith("eval/") for k in r)]
    assert [r["step"] for r in evals] == [2, 3]
    for r in evals:
        assert "eval/error" not in r, r
        assert r["eval/episodes"] == 1 and "time" in r
        assert 0.0 <= r["eval/valid_call_rate"] <= 1.0
        assert 0.0 <= r["eval/success_rate"] <= 1.0
        assert isinstance(r["eval/mean_reward"], float)
    # Each eval row follows the training row of its step (logged before the save); the
    # trainer's end-of-run summary comes last.
    shape = [(r["step"], "eval/mean_reward" in r) for r in rows]
    assert shape == [(1, False), (2, False), (2, True), (3, False), (3, True), (3, False)]
    assert any((run / "tensorboard" / "eval").iterdir())

    # A kill during the eval of checkpoint 2 and during the save of checkpoint 3: resuming
    # scores checkpoint 2 before training on, drops the stale step-3 report and row, and ends
    # with the rows an uninterrupted run wrote.
    (run / "checkpoint-3" / "COMPLETE").unlink()
    (run / "eval" / "step-2.json").unlink()
    killed = [r for r in rows if r["step"] < 2 or (r["step"] == 2 and r is not evals[0])]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in killed))
    resumed = run_sft(cfg, run, resume=True)
    assert resumed.resumed_from == 2 and resumed.steps == 3
    assert sorted(p.name for p in (run / "eval").iterdir()) == ["step-2.json", "step-3.json"]
    after = _rows(run)
    assert [(r["step"], "eval/mean_reward" in r) for r in after] == shape
    # Greedy decoding on the same weights: the re-run evals agree with the first ones.
    again = [r for r in after if "eval/mean_reward" in r]
    assert [r["eval/mean_reward"] for r in again] == [r["eval/mean_reward"] for r in evals]
    assert [r["eval/valid_call_rate"] for r in again] == [r["eval/valid_call_rate"] for r in evals]


def test_a_failing_eval_is_recorded_and_training_goes_on(tmp_path, tiny_model_dir, demos):
    from training.sft.trainer import run_sft
    from training.train_config import load_config

    cfg = load_config(_config(tmp_path, tiny_model_dir, demos, 2, "no_such_family"))
    result = run_sft(cfg, tmp_path / "run")
    assert result.steps == 2 and (result.adapter_dir / "adapter_model.safetensors").is_file()
    errors = [r for r in _rows(tmp_path / "run") if "eval/error" in r]
    assert [r["step"] for r in errors] == [2]
    assert "no_such_family" in errors[0]["eval/error"]
    assert not (tmp_path / "run" / "eval" / "step-2.json").exists()


def test_eval_every_without_an_eval_section_names_the_field(tmp_path, tiny_model_dir, demos):
    from training.train_config import ConfigError, load_config

    text = _config(tmp_path, tiny_model_dir, demos, 2, "materials").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text[: text.index("eval:")])
    with pytest.raises(ConfigError, match=r"run\.eval_every is 2 but the config has no eval"):
        load_config(bad)
    bad.write_text(text.replace("eval_every: 2", "eval_every: -1"))
    with pytest.raises(ConfigError, match=r"run\.eval_every: Input should be greater than"):
        load_config(bad)
    bad.write_text(text.replace("families: [materials]", "families: []"))
    with pytest.raises(ConfigError, match=r"eval\.families is empty"):
        load_config(bad)
    bad.write_text(text[: text.index("eval:")].replace("eval_every: 2", "eval_every: 0"))
    assert load_config(bad).run.eval_every == 0


def test_the_studio_plots_eval_rows_next_to_the_training_rows():
    from studio.training.metrics import RunMetrics

    metrics = RunMetrics(total_steps=4)
    rows = [
        {"step": 1, "loss": 2.0},
        {"step": 2, "loss": 1.5},
        {"step": 2, "eval/mean_reward": -0.5, "eval/success_rate": 0.0, "eval/episodes": 3},
        {"step": 4, "eval/error": "worker crashed"},
    ]
    assert metrics.add(rows) == 4
    assert metrics.series["loss"] == [(1.0, 2.0), (2.0, 1.5)]
    assert metrics.series["eval/mean_reward"] == [(2.0, -0.5)]
    assert metrics.series["eval/success_rate"] == [(2.0, 0.0)]
    assert "eval/episodes" not in metrics.series and metrics.last_step == 4
