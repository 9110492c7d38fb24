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


def test_the_counted_steps_config_differs_in_its_demonstrations_and_grpo_draws_only():
    """The counted-steps variant is the curriculum run, the oracle's replies saying which step
    they are: the same SFT and eval, so its SFT eval pairs with the one-call run's. Its GRPO
    draws levels 2-3 from the first step (the one-call run's unlock bar was never reached)."""
    from training.rl.curriculum import Curriculum
    from training.tasks.sampling import check_task_choices
    from training.train_config import load_config

    for quick in (False, True):
        check_task_choices(load_config(STEPS, quick=quick))
    base, steps = load_config(CONFIG).model_dump(), load_config(STEPS).model_dump()
    assert (base["demos"]["count_steps"], steps["demos"]["count_steps"]) == (False, True)
    assert base["grpo"]["curriculum"]["unlock"] and not steps["grpo"]["curriculum"]["unlock"]
    assert steps["grpo"]["curriculum"]["level_weights"] == {2: 2, 3: 2}
    assert steps["grpo"]["max_steps"] == base["grpo"]["max_steps"] + 1
    base["demos"].pop("count_steps"), steps["demos"].pop("count_steps")
    for key in ("unlock", "level_weights"):
        base["grpo"]["curriculum"].pop(key), steps["grpo"]["curriculum"].pop(key)
    assert steps["grpo"]["save_steps"] == 1 and base["grpo"]["save_steps"] is None
    for key in ("max_steps", "save_steps"):
        base["grpo"].pop(key), steps["grpo"].pop(key)
    base.pop("name", None), steps.pop("name", None)
    assert steps == base

    # the draws: the one-call config's first slots are all level 1; this one's mostly 2-3
    def levels(path):
        cfg = load_config(path).grpo
        cur = Curriculum(cfg.tasks.families, cfg.tasks.levels, cfg.tasks.split, 0, cfg.curriculum)
        return [int(cur.task_for(slot).split(":")[1]) for slot in range(40)]

    assert set(levels(CONFIG)) == {1}
    drawn = levels(STEPS)
    assert set(drawn) == {1, 2, 3} and sum(lv > 1 for lv in drawn) > 2 * drawn.count(1)


def test_grpo_keeps_a_checkpoint_each_step_where_its_config_says_and_sft_keeps_the_runs():
    """`grpo.save_steps` overrides `run.save_steps` for GRPO only: the counted-steps run's
    SFT still checkpoints at 100, 200, 300 (its checkpoint choice), its GRPO every step, and a
    config without it (the one-call run) checkpoints GRPO at the run's interval as before."""
    from training.rl.grpo import grpo_args
    from training.sft.trainer import sft_args
    from training.train_config import load_config

    out = Path("/tmp/unused-run")
    steps, base = load_config(STEPS), load_config(CONFIG)
    assert grpo_args(steps.grpo, steps.run, out, use_cpu=True).save_steps == 1
    assert sft_args(steps.sft, steps.run, out, use_cpu=True).save_steps == 100
    assert base.grpo.save_steps is None
    assert grpo_args(base.grpo, base.run, out, use_cpu=True).save_steps == base.run.save_steps
