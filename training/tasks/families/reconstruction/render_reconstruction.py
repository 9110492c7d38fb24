"""The `render_reconstruction` family (domain reconstruction): Rebuild a scene of primitives from a
rendered target image.
"""

from __future__ import annotations

import math
import random
from typing import Any

from training.tasks.recipes.phrases import SCENE, N
from training.tasks.recipes.scene import (
    KIND_WORDS,
    SIZE_TOL,
    add_call,
    counted,
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


def grid_cell(items: list[dict[str, Any]]) -> float:
    """The renderer's grid step for these objects (the rule in tools/worker/render.py)."""
    from training.tasks.scene_geometry import items_bounds

    lo, hi = items_bounds(items)
    raw = max(hi[0] - lo[0], hi[1] - lo[1], 1e-3) * 1.6 / 8
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


def render_reconstruction(level: int, rng: random.Random) -> TaskSpec:
    stacked: list[tuple[dict[str, Any], dict[str, Any]]] = []
    if level >= 4:  # levels 4-5 keep the origin's cell free for the marker
        items = random_items(rng, {4: 11, 5: 12}[level], skip_origin=True)
        if level == 5:  # four more, each resting on one of the others
            stacked = stacked_items(rng, items, 4)
            items = items + [it for it, _ in stacked]
        n = len(items)
    else:
        n = {1: 1, 2: 3, 3: 8}[level]
        items = random_items(rng, n)
    on = {it["name"]: b["name"] for it, b in stacked}
    kinds = ", ".join(
        f"{KIND_WORDS[it['kind']]} '{it['name']}' {fmt(it['dimensions'])}"
        + (f" (on top of '{on[it['name']]}')" if it["name"] in on else "")
        for it in items
    )
    lead = rng.choice(
        (
            "Rebuild the scene shown in the target image",
            "Recreate what the target render shows",
            "Model the scene in the target picture",
        )
    )
    # A small fixed cube marks the origin, so every render shows where (0, 0) is.
    marker = {
        "name": "Origin", "kind": "cube", "dimensions": [0.2, 0.2, 0.2],
        "location": [0.0, 0.0, 0.1], "rotation_deg": [0.0, 0.0, 0.0],
    }  # fmt: skip
    cell = grid_cell(items + [marker])
    prompt = (
        f"{lead} (views iso, front, top, right; the ground grid has {cell:g} m cells and the "
        f"small cube 'Origin' marks the origin; leave it). It holds {counted(n, 'more object')}, all resting "
        f"on the ground: {kinds}. Read their positions from the image."
    )
    if stacked:
        prompt = prompt.replace(
            "all resting on the ground", "resting on the ground unless said otherwise"
        )
    # Positions are read off a render: judged to a tenth of a grid cell (at least 0.15 m).
    tol = round(max(0.15, 0.1 * cell), 3)
    constraints = [{"kind": "count", "equal": n + 1}] + placed(marker, guard=True)
    for it in items:
        constraints += [
            {"kind": "position", "object": it["name"], "value": it["location"], "tol": tol},
            {"kind": "size", "object": it["name"], "value": it["dimensions"], "tol_rel": SIZE_TOL},
        ]
    for it, base in stacked:
        constraints += stacked_constraints(it, base)
    return TaskSpec(
        prompt=prompt,
        parameters={"objects": items, "position_tolerance": tol},
        oracle=[add_call(it) for it in items],
        constraints=constraints,
        start=[add_call(marker)],
        geometry=scene_geometry(items + [marker]),
        geometry_min=0.6,
        has_target_image=True,
    )


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"^(?:Rebuild the scene shown in the target image|Recreate what the target render shows)",
         "Rebuild the scene in the target image", "Reproduce the scene the target image shows",
         "Model the scene from the target render", "Recreate the target image's scene",
         "Copy the scene in the target render",
         unseen=("Make a scene that looks like the target image",
                 "Build the scene you see in the target render")),
    swap(rf"the ground grid has (?P<g>{N}) m cells",
         "the ground grid's cells are {g} m", "grid squares are {g} m", "the ground grid has {g} m cells",
         "the floor grid is in {g} m cells", "each grid cell is {g} m",
         unseen=("each square of the floor grid is {g} m across",)),
    swap(r" Read their positions from the image\.",
         " Work out where they are from the image.", " Take their positions from the picture.",
         " Their positions are in the image.", " Judge the positions from the render.",
         " Read their positions from the image.",
         unseen=(" Where each goes, the render shows.",
                 " You'll have to estimate positions from the views.")),
    *SCENE,
))


FAMILY = Family(
    name="render_reconstruction",
    description="Rebuild a scene of primitives from a rendered target image.",
    domain="reconstruction",
    levels=(1, 2, 3, 4, 5),
    weights={
        "geometry": 0.6,
        "constraints": 0.2,
        "validity": 0.1,
        "efficiency": 0.05,
        "recovery": 0.05,
    },
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("scene", extra=("render",)),
    wordings=WORDINGS,
    make=render_reconstruction,
)
