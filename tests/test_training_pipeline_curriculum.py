"""The curriculum pipeline's config (configs/pipeline-smollm2-curriculum.yaml) and the report
figures it needs: success by level with 95 % intervals, each phrasing apart, GRPO - SFT pooled
over the levels above the first, the long-task eval, and no zero-shot stage when it is off.
(A --quick run of this pipeline took 39 min here under load, too long for the suite; so the
config and the report are tested, and tests/test_real_base.py runs the level-1 pipeline's stages.)"""

from __future__ import annotations

from pathlib import Path

import pytest

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
CONFIG = CONFIGS / "pipeline-smollm2-curriculum.yaml"
PLAN = CONFIGS / "pipeline-smollm2-curriculum-plan.yaml"  # whole-plan replies
STEPS = CONFIGS / "pipeline-smollm2-curriculum-steps.yaml"  # "Step k of n." replies


@pytest.mark.parametrize("CONFIG", [CONFIG, PLAN], ids=lambda p: p.stem)
def test_the_curriculum_config_validates_and_trains_every_training_family_at_levels_1_to_3(CONFIG):
    from training.pipeline import held_out_config, long_config, with_eval_families
    from training.tasks.base import held_out_families
    from training.tasks.families import FAMILIES
    from training.tasks.sampling import check_task_choices, demo_sampler, grpo_sampler
    from training.train_config import load_config

    training = [f for f in FAMILIES if not FAMILIES[f].held_out]
    for quick in (False, True):
        cfg = load_config(CONFIG, quick=quick)
        check_task_choices(cfg)
        assert cfg.tools is None  # every task shows its family's declared toolbox
        assert cfg.sft.select_checkpoint.split == "validation"
        assert cfg.eval.split == "test" and cfg.eval.phrasing == "both"
        assert grpo_sampler(cfg.grpo).families == training
        assert demo_sampler(cfg.demos).families == training
        assert cfg.grpo.oversample > 1 or quick
        assert cfg.grpo.curriculum.unlock
    cfg = with_eval_families(load_config(CONFIG))
    assert len(training) >= 31  # demonstrations and GRPO: every training family
    assert cfg.eval.families == training  # every training family scored
    assert cfg.eval.variant == "fast" and cfg.eval.quant == "f32"  # llama.cpp, float32's turns
    assert cfg.sft.per_device_train_batch_size == 1  # rows alone: torch's causal kernel
    assert cfg.demos.levels == cfg.grpo.tasks.levels == cfg.eval.levels == [1, 2, 3]
    assert cfg.eval.per_family % len(cfg.eval.levels) == 0  # as many tasks at each level
    assert set(cfg.sft.select_checkpoint.families) <= set(training)
    held = held_out_config(cfg)
    assert held.eval.families == held_out_families() and held.eval.levels == [1]
    assert held.tools is None
    long = long_config(cfg)
    assert set(long.eval.levels) == {4, 5} and long.eval.split == "test"
    assert long.eval.max_steps >= 25  # a level-5 task is up to 24 calls


def test_the_whole_plan_config_differs_only_in_its_replies_and_sft_length():
    """The plan variant is the curriculum run with the oracle writing a request's calls in one
    reply: room for such a reply (8 calls) in eval and GRPO, fewer SFT steps for fewer rows."""
    from training.train_config import load_config

    base, plan = load_config(CONFIG).model_dump(), load_config(PLAN).model_dump()
    assert (base["demos"]["calls_per_turn"], plan["demos"]["calls_per_turn"]) == (1, 0)
    assert plan["eval"]["max_tokens"] == plan["grpo"]["max_completion_length"] == 512
    for section, key in (("demos", "calls_per_turn"), ("eval", "max_tokens"),
                         ("grpo", "max_completion_length"), ("sft", "max_steps")):  # fmt: skip
        base[section].pop(key), plan[section].pop(key)
    base.pop("name", None), plan.pop("name", None)
    assert plan == base


def test_the_counted_steps_config_differs_only_in_its_demonstrations():
    """The counted-steps variant is the curriculum run, the oracle's replies saying which step
    they are: the same SFT, GRPO and eval, so its eval pairs with the one-call run's."""
    from training.train_config import load_config

    base, steps = load_config(CONFIG).model_dump(), load_config(STEPS).model_dump()
    assert (base["demos"]["count_steps"], steps["demos"]["count_steps"]) == (False, True)
    base["demos"].pop("count_steps"), steps["demos"].pop("count_steps")
    base.pop("name", None), steps.pop("name", None)
    assert steps == base


def _eval(rewards: dict[str, float]) -> dict:
    from training.eval.stats import stage_summary

    episodes = [{"task": t, "family": t.split(":")[0], "success": r == 1.0, "reward": r,
                 "calls": 2} for t, r in rewards.items()]  # fmt: skip
    return stage_summary({"episodes": episodes, "overall": {},
                          "levels": {"2": {"mean_calls": 2.0, "mean_prompt_tokens": 900.0}}})


def test_the_report_gives_levels_with_intervals_phrasings_and_grpo_minus_sft_above_level_1(
    tmp_path,
):
    from training.pipeline import build_report
    from training.train_config import TrainConfig

    cfg = TrainConfig.model_validate({
        "kind": "pipeline", "model": {"build_tiny": True}, "demos": {}, "sft": {}, "grpo": {},
        "eval": {"families": ["materials"], "levels": [1, 2, 3], "phrasing": "both",
                 "untrained": False, "long": {"families": ["materials"]}},
    })  # fmt: skip
    tasks = [f"materials:{lv}:{s}{tail}" for tail in ("", ":unseen")
             for lv in (1, 2, 3) for s in (0, 1, 2)]  # fmt: skip
    sft = _eval({t: 1.0 if t.startswith("materials:1") else 0.0 for t in tasks})
    grpo = _eval({t: 1.0 if ":3:" not in t else (0.5 if t.endswith("unseen") else 1.0)
                  for t in tasks})  # fmt: skip
    long = _eval({"materials:4:0": 1.0, "materials:5:1": 0.0})
    stages = {"eval_sft": {"result": sft, "seconds": 3.0, "stage_peak_rss_mb": 900},
              "eval_grpo": {"result": grpo, "seconds": 4.0, "stage_peak_rss_mb": 800},
              "eval_long_grpo": {"result": long, "seconds": 5.0}}  # fmt: skip
    report = build_report(cfg, tmp_path, stages, 12.0)
    assert set(report["stages"]) == {"sft", "grpo"}  # no zero-shot stage when it is off
    assert "sft_vs_untrained_mean_reward" not in report
    level2 = report["stages"]["grpo"]["levels"]["2"]
    assert level2["episodes"] == 6 and level2["success_rate"] == 1.0
    assert level2["success_rate_ci95"][0] < 1.0 == level2["success_rate_ci95"][1]
    assert level2["phrasings"]["unseen"]["episodes"] == 3
    assert level2["mean_prompt_tokens"] == 900.0  # the eval's calls and tokens per turn kept
    assert report["stages"]["grpo"]["phrasings"]["seen"]["success_rate"] == 1.0
    pooled = report["grpo_vs_sft_by_phrasing"]
    assert pooled["levels"] == [2, 3]
    assert pooled["seen"]["tasks"] == pooled["unseen"]["tasks"] == 6
    assert pooled["seen"]["mean_difference"] == 1.0
    assert pooled["unseen"]["mean_difference"] == 0.75
    assert report["long"]["levels"]["4"]["success_rate"] == 1.0
    assert report["stage_seconds"]["eval_long_grpo"] == 5.0
    assert report["stage_peak_rss_mb"]["eval_sft"] == 900
    assert "GRPO - SFT, levels 2, 3, unseen phrasings: mean reward +0.750" in report["summary"]
    assert "grpo level 3: success seen 100.0%" in report["summary"]
    assert "long tasks, level 5 (grpo): success 0.0% of 1" in report["summary"]
