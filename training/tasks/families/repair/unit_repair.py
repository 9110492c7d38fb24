"""The `unit_repair` family (domain repair): Bring parts imported in the wrong units (1000x, inches
as mm) back to their declared size.
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.recipes.repair import REPAIR_WEIGHTS, box_item, rounded, to_cm
from training.tasks.recipes.scene import fmt, placed
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap

# ================================================================ unit_repair

MISTAKES = {
    # factor the part came in at, and how a person says it
    1000.0: "1000 times too big (millimetres read as metres)",
    1 / 25.4: "25.4 times too small (inches read as millimetres)",
    25.4: "25.4 times too big (millimetres read as inches)",
    0.001: "1000 times too small (metres read as millimetres)",
}


PART_NAMES = ("Panel", "Shelf", "Leg", "Knob", "Door", "Hinge", "Rail", "Foot", "Plinth",
              "Drawer", "Handle", "Top", "Back", "Side", "Base", "Lid", "Cap", "Peg")


def unit_repair(level: int, rng: random.Random) -> TaskSpec:
    n = {1: 1, 2: 2, 3: 4, 4: 8, 5: 16}[level]
    positions_scaled = level >= 3
    names = rng.sample(PART_NAMES, n)
    cells = rng.sample([(x, y) for x in range(-3, 4) for y in range(-2, 3)], n)
    start, oracle, constraints, listed = [], [], [], []
    factors = list(MISTAKES)
    for k, (name, (cx, cy)) in enumerate(zip(names, cells, strict=True)):
        kind = rng.choice(("cube", "cube", "cylinder"))
        dims = [to_cm(rng.uniform(0.1, 0.8)) for _ in range(3)]
        if kind == "cylinder":
            dims[1] = dims[0]
        it = box_item(name, kind, dims, (cx * 1.0, cy * 1.0, dims[2] / 2))
        f = 1000.0 if level == 1 else (factors[k % 4] if k < 4 else rng.choice(factors))
        loc = [v * f for v in it["location"]] if positions_scaled else it["location"]
        start.append(call("add_primitive", kind=kind, name=name,
                          dimensions=[d * f for d in dims], location=[rounded(v, 6) for v in loc]))
        args: dict[str, Any] = {"name": name, "scale": [1 / f] * 3}
        if positions_scaled:
            args["location"] = it["location"]
        oracle.append(call("transform", **args))
        constraints += placed(it, kind_check=False)
        listed.append(f"'{name}' {fmt(dims)}")
    if level == 1:
        prompt = (f"'{names[0]}' was imported {MISTAKES[1000.0]}. Scale it to its real size, "
                  f"{fmt(constraints[1]['value'])}, keeping it centred where it is.")
    else:
        prompt = (
            "These parts were imported with unit mistakes: each is 1000 or 25.4 times too big "
            "or too small. Bring each to its declared size: " + "; ".join(listed) + ". "
        )
        prompt += ("Their positions were scaled by the same mistake about the origin: put "
                   "each part back where it belongs too." if positions_scaled
                   else "Keep each part centred where it is.")
    return TaskSpec(
        prompt=prompt,
        parameters={"parts": names},
        oracle=oracle,
        constraints=constraints,
        start=start,
    )


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"Bring each to its declared size: ", "Scale each to its real size: ",
         "Give each its declared size: ", "Resize each to the size it should have: ",
         "Each should be: ", "Bring each to its declared size: ",
         unseen=("Their true sizes are: ",)),
    swap(r"(?P<k>keeping it|Keep each part) centred where it is",
         "{k} centred where it is", "{k} centred in place", "{k} centred where it is now",
         "{k} centred on the same spot", "{k} centred where it is",
         unseen=("{k} centred on the point it is at",)),
    swap(r"Scale it to its real size, ", "Scale it to its real size, ", "Resize it to its true size, ",
         "Bring it to its real size, ", "Scale it back to its real size, ",
         "Scale it to its real size, ", unseen=("Give it back its true size, ",)),
))


FAMILY = Family(
    name="unit_repair",
    description="Bring parts imported in the wrong units (1000x, inches as mm) back to their declared size.",
    domain="repair",
    levels=(1, 2, 3, 4, 5),
    weights=REPAIR_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("scene", extra=("rename",)),
    wordings=WORDINGS,
    make=unit_repair,
)
