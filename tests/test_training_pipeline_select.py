"""The pipeline's SFT checkpoint choice: complete checkpoints only, scored on validation seeds
(never the held-out test seeds the report scores), with real episodes of the tiny model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path


def test_sft_checkpoint_is_chosen_on_validation_seeds_among_complete_ones(tmp_path, tiny_model_dir):
    from training.eval.run_eval import task_ids
    from training.pipeline import select_sft_checkpoint
    from training.runs import COMPLETE
    from training.train_config import TrainConfig

    out = tmp_path / "pipe"
    for step, complete in ((50, True), (100, True), (150, False)):  # 150: killed mid-save
        ckpt = out / "sft" / f"checkpoint-{step}"
        shutil.copytree(tiny_model_dir, ckpt)
        if complete:
            (ckpt / COMPLETE).write_text(str(step))
    families = ["materials"]
    cfg = TrainConfig.model_validate(
        {
            "kind": "pipeline",
            "model": {"path": str(tiny_model_dir)},
            "tools": ["set_material"],
            "demos": {"families": families},
            "sft": {"full_finetune": True, "select_checkpoint": {"per_family": 1}},
            "grpo": {},
            "eval": {"families": families, "per_family": 3, "max_steps": 1, "max_tokens": 8},
        }
    )
    result = select_sft_checkpoint(cfg, out, tiny_model_dir)
    assert [c["step"] for c in result["candidates"]] == [50, 100]
    # A random model: 0 valid calls everywhere, equal rewards, so the later step wins the tie.
    assert result["chosen"]["step"] == 100
    assert result["chosen"]["base"] == str(out / "sft" / "checkpoint-100")
    validation = task_ids(families, [1], "validation", 1)
    for step in (50, 100):
        report = json.loads((out / f"eval-select-sft-{step}.json").read_text())
        assert [e["task"] for e in report["episodes"]] == validation
    assert not (out / "eval-select-sft-150.json").exists()
    assert set(validation).isdisjoint(task_ids(families, [1], "test", 3))
    assert Path(result["chosen"]["base"]).is_dir()


def test_held_out_family_is_scored_on_its_test_seeds_with_its_tools_shown(tmp_path, tiny_model_dir):
    from training.eval.run_eval import task_ids
    from training.pipeline import build_report, evaluate_model, held_out_config
    from training.tasks import FAMILIES
    from training.tasks.base import family_tools
    from training.train_config import TrainConfig

    HELD_OUT_FAMILY = "mesh_reconstruction"  # one of the held-out families
    assert FAMILIES[HELD_OUT_FAMILY].held_out
    cfg = TrainConfig.model_validate(
        {
            "kind": "pipeline",
            "model": {"path": str(tiny_model_dir)},
            "tools": ["set_material"],
            "demos": {"families": ["materials"]},
            "sft": {},
            "grpo": {},
            "eval": {"families": ["materials"], "per_family": 1, "max_steps": 1, "max_tokens": 8,
                     "held_out_per_family": 1,
                     "held_out_families": [HELD_OUT_FAMILY]},  # default: every held-out one
        }
    )  # fmt: skip
    held = held_out_config(cfg)
    assert held.eval.families == [HELD_OUT_FAMILY] and held.eval.split == "test"
    assert held.tools is None  # each task shows its family's declared toolbox
    out = tmp_path / "pipe"
    out.mkdir()
    summary = evaluate_model(held, tiny_model_dir, None, "held-out-sft", out)
    report = json.loads((out / "eval-held-out-sft.json").read_text())
    assert [e["task"] for e in report["episodes"]] == task_ids([HELD_OUT_FAMILY], [1], "test", 1)
    main = evaluate_model(cfg, tiny_model_dir, None, "sft", out)
    stages = {f"eval_{n}": {"result": main} for n in ("untrained", "sft", "grpo")}
    stages.update({f"held_out_{n}": {"result": summary} for n in ("sft", "grpo")})
    full = build_report(cfg, out, stages, 1.0)
    assert full["held_out_family"]["family"] == HELD_OUT_FAMILY
    assert full["held_out_family"]["grpo_vs_sft_mean_reward"]["tasks"] == 1
    assert full["held_out_family"]["tools"] == {
        HELD_OUT_FAMILY: list(family_tools(HELD_OUT_FAMILY))}
    assert f"held-out family {HELD_OUT_FAMILY} (1 test episodes" in full["summary"]


def test_eval_stages_in_float32_run_their_episodes_turns_side_by_side_as_one_by_one(
        tmp_path, tiny_text_dir):  # fmt: skip
    """`eval.dtype: float32` with 2 workers: each greedy turn starts from its episode's
    cached prefix and the episodes' turns run on their own threads (`turns_alongside`); every
    episode's reward, steps, tokens out and prompt tokens per turn are those of one worker."""
    import torch

    from training.pipeline import evaluate_model
    from training.train_config import TrainConfig

    def run(workers: int) -> dict:
        cfg = TrainConfig.model_validate({
            "kind": "pipeline", "model": {"path": str(tiny_text_dir), "dtype": "bfloat16"},
            "tools": ["set_material", "add_primitive"], "demos": {"families": ["materials"]},
            "sft": {}, "grpo": {},
            "eval": {"families": ["materials", "primitive_placement"], "per_family": 2,
                     "max_steps": 2, "max_tokens": 12, "dtype": "float32", "workers": workers},
        })  # fmt: skip
        evaluate_model(cfg, tiny_text_dir, None, f"w{workers}", tmp_path)
        return json.loads((tmp_path / f"eval-w{workers}.json").read_text())

    threads = torch.get_num_threads()
    one, two = run(1), run(2)
    assert torch.get_num_threads() == threads  # the eval gives the stage its threads back

    def seen(report: dict) -> list:
        return sorted((e["task"], e["reward"], e["steps"], e["tokens_out"], e["prompt_tokens"])
                      for e in report["episodes"])  # fmt: skip

    assert len(one["episodes"]) == 4 and seen(two) == seen(one)
    assert "cpu" not in one and two["cpu"]["turns_alongside"] is True


def test_an_eval_stage_stopped_part_way_runs_only_the_rest_and_reports_the_whole(
        tmp_path, tiny_text_dir):  # fmt: skip
    """Each finished episode is journalled as it ends; after a stop (here: the journal cut back
    to 2 of 4 episodes and a line cut short) the stage runs the other 2 and its report is the
    uninterrupted one's: every episode, its calls tally, in the stage's order. A journal of
    another eval setting is not reused, and a fresh run (no --resume) drops the journals."""
    from training.pipeline import drop_eval_journals, evaluate_model
    from training.train_config import TrainConfig

    def config(max_tokens: int) -> TrainConfig:
        return TrainConfig.model_validate({
            "kind": "pipeline", "model": {"path": str(tiny_text_dir), "dtype": "bfloat16"},
            "tools": ["set_material", "add_primitive"], "demos": {"families": ["materials"]},
            "sft": {}, "grpo": {},
            "eval": {"families": ["materials", "primitive_placement"], "per_family": 2,
                     "max_steps": 2, "max_tokens": max_tokens, "dtype": "float32"},
        })  # fmt: skip

    def seen(report: dict) -> list:
        return [(e["task"], e["reward"], e["steps"], e["tokens_out"], e["prompt_tokens"])
                for e in report["episodes"]]  # fmt: skip

    whole_summary = evaluate_model(config(12), tiny_text_dir, None, "sft", tmp_path)
    whole = json.loads((tmp_path / "eval-sft.json").read_text())
    journal = tmp_path / "eval-sft.episodes.jsonl"
    lines = journal.read_text().splitlines()
    assert len(lines) == 1 + 4
    journal.write_text("\n".join(lines[:3]) + "\n" + lines[3][:40])  # stopped mid-write

    summary = evaluate_model(config(12), tiny_text_dir, None, "sft", tmp_path)
    resumed = json.loads((tmp_path / "eval-sft.json").read_text())
    assert resumed["resumed"] == {"episodes_before": 2, "episodes_run": 2}
    assert seen(resumed) == seen(whole)
    assert resumed["schema_valid_calls"] == whole["schema_valid_calls"]
    assert summary == whole_summary

    other = evaluate_model(config(10), tiny_text_dir, None, "sft", tmp_path)  # another setting
    assert "resumed" not in json.loads((tmp_path / "eval-sft.json").read_text())
    assert other["episodes"] == 4

    drop_eval_journals(tmp_path)  # what a run without --resume does first
    assert not journal.exists() and (tmp_path / "eval-sft.json").exists()
