"""The `cad_parts` family (domain parts): Model dimensioned CadQuery parts: plates with hole
patterns, shafts, flanges, brackets, trays.
"""

from __future__ import annotations

import random

from training.tasks.config import CAD_WEIGHTS
from training.tasks.recipes.catalogue import (
    PART_IOU_MIN,
    part_geometry,
    part_plan,
    pick,
    pick_pair,
    topology_check,
)
from training.tasks.recipes.phrases import CAD, N
from training.tasks.spec import Family, TaskSpec
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


def cad_parts(level: int, rng: random.Random) -> TaskSpec:
    if level == 5:
        housing, ring = pick_pair(rng)
        lead = rng.choice(("Model two parts:", "Create two CAD parts:", "Build, as exact CAD solids,"))
        return TaskSpec(
            prompt=f"{lead} {housing.text}; and {ring.text}.",
            parameters={"parts": [housing.kind, ring.kind], "sizes": [housing.size, ring.size]},
            oracle=housing.plan + ring.plan,
            constraints=housing.constraints() + topology_check(housing, level)
            + ring.constraints() + topology_check(ring, level),
            geometry=part_geometry(housing, ring),
            geometry_min=PART_IOU_MIN,
        )
    part = pick(level, rng)
    lead = rng.choice(("Model", "Create a CAD part:", "Build, as an exact CAD solid,"))
    return TaskSpec(
        prompt=f"{lead} {part.text}.",
        parameters={"part": part.kind, "size": part.size, "volume": part.volume},
        oracle=part_plan(part, rng, level),
        constraints=part.constraints() + topology_check(part, level),
        geometry=part_geometry(part),
        geometry_min=PART_IOU_MIN,
    )


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"^(?:Model two parts:|Create two CAD parts:) ",
         "Create two CAD parts: ", "Build two exact CAD solids: ", "Two CAD parts: ",
         "Make two parts: ", "Model two parts: ", unseen=("I need two CAD parts: ",)),
    swap(r"^Build, as exact CAD solids, ",
         "Build these as exact CAD solids: ", "Create, as exact CAD solids, ", "CAD parts: ",
         "Make these exact CAD solids: ", "Build, as exact CAD solids, ",
         unseen=("I need these as precise CAD bodies: ",)),
    swap(r"^(?:Model|Create a CAD part:|Build, as an exact CAD solid,) (?!two )",
         "Model, as a CAD part, ", "Create a CAD part: ", "Build this as an exact CAD solid: ",
         "Make a CAD part: ", "Model ", unseen=("As a precise CAD body, build ",
                                                "I need a CAD part: ")),
    swap(rf"(?P<d>{N}) mm diameter for (?P<l>{N}) mm",
         "{d} mm diameter for {l} mm", "{d} mm across for {l} mm", "{d} mm diameter over {l} mm",
         "{d} mm in diameter for {l} mm", "{d} mm diameter for {l} mm",
         unseen=("a {l} mm length at {d} mm diameter",)),
    *CAD,
))


FAMILY = Family(
    name="cad_parts",
    description="Model dimensioned CadQuery parts: plates with hole patterns, shafts, flanges, brackets, trays.",
    domain="parts",
    levels=(1, 2, 3, 4, 5),
    weights=CAD_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("cad", extra=("cadquery_script",)),
    wordings=WORDINGS,
    make=cad_parts,
)
