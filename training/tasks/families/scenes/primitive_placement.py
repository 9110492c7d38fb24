"""The `primitive_placement` family (domain scenes): Add primitives of given kind, size, position
and turn.
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.config import SCENE_WEIGHTS
from training.tasks.recipes.phrases import LEADS, SCENE
from training.tasks.recipes.scene import (
    KIND_WORDS,
    add_call,
    describe_item,
    fmt,
    placed,
    random_items,
    scene_geometry,
    stacked_constraints,
    stacked_items,
)
from training.tasks.spec import Family, TaskSpec
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


def describe_stacked(it: dict[str, Any], base: dict[str, Any]) -> str:
    return (
        f"a {KIND_WORDS[it['kind']]} named '{it['name']}' of size {fmt(it['dimensions'])} resting "
        f"on top of '{base['name']}', centred on it"
    )


def _placement_45(level: int, rng: random.Random) -> TaskSpec:
    """Level 4: twelve primitives, boxes turned. Level 5: twelve on the ground and four stacked
    on them, whose heights follow from their bases' (a wrong base misplaces what sits on it)."""
    ground = random_items(rng, 12, rotate=True)
    stacked = stacked_items(rng, ground, 4) if level == 5 else []
    items = ground + [it for it, _ in stacked]
    lead = rng.choice(("Create", "Add", "Place", "Model"))
    listing = "; ".join(describe_item(it) for it in ground)
    prompt = f"{lead} {listing}."
    if stacked:
        prompt += " Then add " + "; ".join(describe_stacked(it, b) for it, b in stacked) + "."
    constraints = [c for it in items for c in placed(it)] + [{"kind": "count", "equal": len(items)}]
    for it, base in stacked:
        constraints += stacked_constraints(it, base)
    return TaskSpec(
        prompt=prompt,
        parameters={"objects": items},
        oracle=[add_call(it) for it in items],
        constraints=constraints,
        geometry=scene_geometry(items),
        geometry_min=0.8,
    )


def primitive_placement(level: int, rng: random.Random) -> TaskSpec:
    if level >= 4:
        return _placement_45(level, rng)
    n = {1: 1, 2: 3, 3: 8}[level]
    items = random_items(rng, n, rotate=level == 3)
    lead = rng.choice(("Create", "Add", "Place", "Model"))
    listing = "; ".join(describe_item(it) for it in items)
    prompt = rng.choice((f"{lead} {listing}.", f"In an empty scene, {lead.lower()} {listing}."))
    constraints = [c for it in items for c in placed(it)] + [{"kind": "count", "equal": n}]
    return TaskSpec(
        prompt=prompt,
        parameters={"objects": items},
        oracle=[add_call(it) for it in items],
        constraints=constraints,
        geometry=scene_geometry(items),
        geometry_min=0.8,
    )


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"^In an empty scene, (?P<v>\w+) ",
         "Starting from an empty scene, {v} ", "In a blank scene, {v} ",
         "The scene is empty, so {v} ", "With nothing in the scene yet, {v} ",
         "In an empty scene, please {v} ",
         unseen=("From scratch, {v} ", "Begin with nothing and {v} ")),
    swap(r" Then add ", " After that, add ", " Next, add ", " Then also add ", " Finally add ",
         " Then add ", unseen=(" Once those are down, add ", " Last of all, add ")),
    *SCENE,
    *LEADS,
))


FAMILY = Family(
    name="primitive_placement",
    description="Add primitives of given kind, size, position and turn.",
    domain="scenes",
    levels=(1, 2, 3, 4, 5),
    weights=SCENE_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("scene"),
    wordings=WORDINGS,
    make=primitive_placement,
)
