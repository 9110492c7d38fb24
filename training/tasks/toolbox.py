"""Each family's toolbox: the tools a prompt shows for its tasks when no list is configured.

The whole catalogue's signatures cost a small model ~1,900 tokens per prompt; a family's
toolbox is the scene basics plus every tool its oracle plans use on the first 64 seeds of each
level, in the catalogue's order. A task shows its level's toolbox (the basics and what that
level's plans use), so a level-1 prompt stays within a small model's 600 tokens while a
harder level shows more. The basics are shown everywhere, so choosing among tools is still
part of every task.
"""

from __future__ import annotations

from functools import cache

SCENE_BASICS = ("add_primitive", "transform", "set_material", "delete")
# Oracle plans sampled per level: enough that a level's rarer variants show (cad_parts level 2
# draws its shelled box about 1 time in 7; 6 seeds missed it). 64 seeds see every tool that
# seeds 64..1063 use, for every level of every family; built once per level (cached).
SEEDS = range(64)


@cache
def family_tools(name: str, level: int | None = None) -> tuple[str, ...]:
    """The family's toolbox; with `level`, that level's (what a task of it shows)."""
    from tools import catalogue
    from training.tasks.base import FAMILIES, get_task

    levels = FAMILIES[name].levels if level is None else [level]
    used = set(SCENE_BASICS)
    for level in levels:
        for seed in SEEDS:
            used.update(step["tool"] for step in get_task(f"{name}:{level}:{seed}").oracle)
    return tuple(spec["name"] for spec in catalogue() if spec["name"] in used)
