"""A task shows its family's declared toolbox (#49): chosen by its author without looking at a
solution, the same for every level and seed. The oracle plans are only checked against it."""

from __future__ import annotations

from functools import cache

import pytest

from agents.policies.chat_format import tool_block
from tools import catalogue
from tools.specs import openai_tools
from training.eval.spec import task_spec
from training.tasks import FAMILIES, get_task
from training.tasks.base import family_tools
from training.tasks.toolbox import KITS, SCENE_BASICS, declare

SEEDS = range(64)  # enough that every level's rarer variants show (cad_parts L2's shell: ~1 in 7)
# The largest toolbox's signatures, as the Hermes format shows them (agents/policies/
# chat_format.py), in characters: ~3.2 a token of SmolLM2's tokenizer on these signatures,
# so about 1,300 tokens (measured: sweeps_lofts, 17 tools, 3,922 characters, 1,226 tokens;
# the whole catalogue is 8,822 and 2,748).
BUDGET_CHARS = 4_200


@cache
def oracle_tools(family: str, level: int) -> frozenset[str]:
    """The tools the family's oracle plans call at `level` on seeds 0..63: a check only."""
    return frozenset(step["tool"] for seed in SEEDS
                     for step in get_task(f"{family}:{level}:{seed}").oracle)  # fmt: skip


def test_every_familys_toolbox_covers_what_its_oracle_plans_call_at_every_level() -> None:
    """Each task stays solvable with what its prompt shows."""
    for family, spec in FAMILIES.items():
        for level in spec.levels:
            lacking = oracle_tools(family, level) - set(spec.toolbox)
            assert not lacking, f"{family} level {level}: its plans call {sorted(lacking)}"


def test_no_toolbox_is_the_answer_key_of_any_level() -> None:
    """Past the scene basics, every level's toolbox shows tools its solutions never call."""
    for family, spec in FAMILIES.items():
        for level in spec.levels:
            spare = set(spec.toolbox) - oracle_tools(family, level) - set(SCENE_BASICS)
            assert spare, (family, level, sorted(spec.toolbox))


def test_a_task_shows_its_familys_toolbox_whatever_its_level_and_seed() -> None:
    for family in FAMILIES:
        shown = {tuple(task_spec(f"{family}:{level}:{seed}").task_info["tools"])
                 for level in FAMILIES[family].levels for seed in (0, 110_003)}  # fmt: skip
        assert shown == {family_tools(family)}, family


def test_toolboxes_are_the_basics_and_real_tools_in_the_catalogues_order() -> None:
    order = [spec["name"] for spec in catalogue()]
    for kit, names in KITS.items():
        assert set(names) <= set(order), kit
    for family, spec in FAMILIES.items():
        assert set(SCENE_BASICS) <= set(spec.toolbox), family
        assert set(spec.toolbox) <= set(order), (family, set(spec.toolbox) - set(order))
        shown = family_tools(family)
        assert sorted(shown, key=order.index) == list(shown) and set(shown) == set(spec.toolbox)
    assert declare("scene", extra=("get_scene", "parent"))[-1] == "parent"  # each tool once
    with pytest.raises(ValueError, match="unknown tool kits"):
        declare("cam")


def test_the_largest_toolbox_fits_a_small_models_prompt() -> None:
    """Every toolbox's signatures stay under ~1,300 tokens (the catalogue's are ~2,750)."""
    sizes = {f: len(tool_block(openai_tools(list(family_tools(f))))) for f in FAMILIES}
    largest = max(sizes, key=sizes.get)
    assert sizes[largest] <= BUDGET_CHARS, (largest, sizes[largest])
    assert sizes[largest] < len(tool_block(openai_tools())) / 2
