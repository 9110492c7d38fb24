"""The `mesh_reconstruction` family (domain reconstruction): Rebuild a CAD part from a target mesh
file and its overall size.
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
from training.tasks.recipes.phrases import NAME
from training.tasks.spec import Family, TaskSpec
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


def _mesh_pair(rng: random.Random) -> TaskSpec:
    """Level 5: two target meshes, a padded housing and the ring that fits its boss."""
    housing, ring = pick_pair(rng)
    parts = (housing, ring)
    targets = [f"target/{p.name.lower()}.stl" for p in parts]
    boxes = "; ".join(
        f"'{p.name}' ({t}) {' x '.join(f'{v:g}' for v in p.size)} mm" for p, t in zip(parts, targets, strict=True)
    )
    prompt = (
        f"The workspace holds triangle meshes (millimetres) of two parts: {boxes} (bounding "
        "boxes). Rebuild each as an exact CAD part of that name in the same place. Hole "
        "diameters are whole millimetres; the ring's bore fits the housing's boss."
    )
    return TaskSpec(
        prompt=prompt,
        parameters={"parts": [p.kind for p in parts], "target_meshes": targets},
        oracle=housing.plan + ring.plan,
        constraints=[c for p in parts for c in p.constraints(with_volume=False) + topology_check(p, 5)],
        files={t: ("reference_stl", p.script) for p, t in zip(parts, targets, strict=True)},
        geometry=part_geometry(*parts),
        geometry_min=PART_IOU_MIN,
    )


def mesh_reconstruction(level: int, rng: random.Random) -> TaskSpec:
    if level == 5:
        return _mesh_pair(rng)
    part = pick(level, rng)
    target = f"target/{part.name.lower()}.stl"
    bb = " x ".join(f"{v:g}" for v in part.size)
    lead = rng.choice(
        (
            f"The workspace file {target} is a triangle mesh of a part (millimetres).",
            f"Here is a scanned part as a mesh: {target} in the workspace (units: mm).",
            f"Reverse-engineer the mesh {target} (in the workspace, millimetres).",
        )
    )
    prompt = (
        f"{lead} Rebuild it as an exact CAD part named '{part.name}' in the same place. Its "
        f"bounding box is {bb} mm; hole diameters are whole or half millimetres."
    )
    return TaskSpec(
        prompt=prompt,
        parameters={"part": part.kind, "size": part.size, "target_mesh": target},
        oracle=part_plan(part, rng, level),
        constraints=part.constraints(with_volume=False) + topology_check(part, level),
        files={target: ("reference_stl", part.script)},
        geometry=part_geometry(part),
        geometry_min=PART_IOU_MIN,  # the mesh is fine enough to read every dimension exactly
    )


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(rf"Rebuild it as an exact CAD part named (?P<n>{NAME}) in the same place\.",
         "Model it as an exact CAD part {n}, in the same position.",
         "Recreate it as a CAD part called {n}, where it is.",
         "Turn it into an exact CAD part named {n} at the same place.",
         "Reconstruct it as the exact CAD part {n}, in place.",
         "Rebuild it as an exact CAD part named {n} in the same place.",
         unseen=("I want it back as a proper CAD part, {n}, sitting where the mesh is.",)),
    swap(r"Its bounding box is ", "Its bounding box: ", "Overall it measures ", "It is ",
         "Its bounding box measures ", "Its bounding box is ", unseen=("Its outer size comes to ",)),
    swap(r"(?P<h>[Hh])ole diameters are whole (?P<rest>or half millimetres|millimetres)",
         "{h}ole diameters are whole {rest}", "{h}ole sizes are whole {rest}",
         "{h}ole diameters come in whole {rest}", "{h}ole diameters are whole {rest}",
         "{h}ole diameters are round numbers: whole {rest}",
         unseen=("{h}oles were drilled in whole {rest}",)),
))


FAMILY = Family(
    name="mesh_reconstruction",
    description="Rebuild a CAD part from a target mesh file and its overall size.",
    domain="reconstruction",
    levels=(1, 2, 3, 4, 5),
    weights=CAD_WEIGHTS,
    held_out=True,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("cad", extra=("cadquery_script", "import_file", "measure")),
    wordings=WORDINGS,
    make=mesh_reconstruction,
)
