"""A task shows its level's toolbox: the scene basics plus what that level's oracle plans use."""

from __future__ import annotations

import random

from training.tasks import FAMILIES, get_task
from training.tasks.toolbox import SCENE_BASICS, family_tools, measured_tools


def test_every_sampled_oracle_plan_fits_its_levels_toolbox() -> None:
    rng = random.Random(31)  # seeds beyond the ones the toolbox was built from
    for family, spec in FAMILIES.items():
        whole = set(family_tools(family))
        for level in spec.levels:
            box = family_tools(family, level)
            assert set(SCENE_BASICS) <= set(box) <= whole
            for seed in rng.sample(range(100, 200_000), 3):
                used = {step["tool"] for step in get_task(f"{family}:{level}:{seed}").oracle}
                assert used <= set(box), (family, level, seed, used - set(box))


def test_a_level_one_toolbox_is_smaller_than_the_familys() -> None:
    """cad_parts' first level needs one CAD tool; its whole toolbox has many (the 600-token
    level-1 prompt depends on showing only the level's)."""
    assert len(family_tools("cad_parts", 1)) < len(family_tools("cad_parts"))
    assert family_tools("primitive_placement", 1) == family_tools("primitive_placement")


def test_each_familys_declared_toolbox_is_what_its_oracle_plans_use() -> None:
    """The toolbox a family declares in its module is the basics plus its plans' tools, in the
    catalogue's order: a plan that starts using a new tool makes this fail until it is declared."""
    for name, spec in FAMILIES.items():
        assert spec.toolbox == measured_tools(name), name
