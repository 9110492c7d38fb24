"""Each family's toolbox: the tools a prompt shows for its tasks when no list is configured.

The whole catalogue's signatures cost a small model ~1,900 tokens per prompt. A family
declares its toolbox (`Family.toolbox`, in its own module): the scene basics plus every tool its
oracle plans use on the first 64 seeds of each level, in the catalogue's order
(`measured_tools` measures it; tests/test_toolbox.py keeps the declaration equal to it). A task
shows its level's toolbox (the basics and what that level's plans use, measured here), so a
level-1 prompt stays within a small model's 600 tokens while a harder level shows more. The
basics are shown everywhere, so choosing among tools is still part of every task.
"""

from __future__ import annotations

from functools import cache

SCENE_BASICS = ("add_primitive", "transform", "set_material", "delete")
# Oracle plans sampled per level: enough that a level's rarer variants show (cad_parts level 2
# draws its shelled box about 1 time in 7; 6 seeds missed it). 64 seeds see every tool that
# seeds 64..1063 use, for every level of every family; built once per level (cached).
SEEDS = range(64)


def family_tools(name: str, level: int | None = None) -> tuple[str, ...]:
    """The family's declared toolbox; with `level`, that level's (what a task of it shows)."""
    from training.tasks.families import FAMILIES

    return FAMILIES[name].toolbox if level is None else measured_tools(name, level)


@cache
def measured_tools(name: str, level: int | None = None) -> tuple[str, ...]:
    """The basics and the tools the family's oracle plans use (with `level`, that level's)."""
    from tools import catalogue
    from training.tasks.base import get_task
    from training.tasks.families import FAMILIES

    levels = FAMILIES[name].levels if level is None else [level]
    used = set(SCENE_BASICS)
    for level in levels:
        for seed in SEEDS:
            used.update(step["tool"] for step in get_task(f"{name}:{level}:{seed}").oracle)
    return tuple(spec["name"] for spec in catalogue() if spec["name"] in used)
