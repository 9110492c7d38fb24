"""CAD families: dimensioned parts from text, parts from a target mesh, and deliverable files."""

from __future__ import annotations

import random
from typing import Any

from training.tasks import parts as P
from training.tasks.base import TaskSpec, call, family
from training.tasks.scene_families import random_items, scene_geometry

PART_IOU_MIN = (
    0.999  # exact solids: a correct part scores 1 to ~1e-9; a missing 1 mm chamfer ~0.998
)


def _pick(level: int, rng: random.Random) -> P.Part:
    if level == 1:
        return rng.choice(P.SIMPLE)(rng)
    if level == 2:
        return rng.choice(P.MEDIUM)(rng)
    return P.mounting_plate(rng)


def _part_plan(part: P.Part, rng: random.Random, level: int) -> list[dict[str, Any]]:
    # Level 3 exists to need many steps: always the structured plan. Otherwise either form
    # (cadquery_script is the form the strongest CAD-RL results use).
    if part.plan is not None and (level == 3 or rng.random() < 0.5):
        return part.plan
    return part.script_plan()


def _topology(part: P.Part, level: int) -> list[dict[str, Any]]:
    # The many-feature part: every feature must be there, however small its volume.
    if level < 3:
        return []
    return [{"kind": "topology", "object": part.name, "script": part.script}]


def _part_geometry(*parts: P.Part) -> dict[str, Any]:
    return {"kind": "parts", "parts": [{"name": p.name, "script": p.script} for p in parts]}


@family(
    "cad_parts",
    "Model dimensioned CadQuery parts: plates with hole patterns, shafts, flanges, brackets, trays.",
    domain="parts",
)
def cad_parts(level: int, rng: random.Random) -> TaskSpec:
    part = _pick(level, rng)
    lead = rng.choice(("Model", "Create a CAD part:", "Build, as an exact CAD solid,"))
    return TaskSpec(
        prompt=f"{lead} {part.text}.",
        parameters={"part": part.kind, "size": part.size, "volume": part.volume},
        oracle=_part_plan(part, rng, level),
        constraints=part.constraints() + _topology(part, level),
        geometry=_part_geometry(part),
        geometry_min=PART_IOU_MIN,
    )


@family(
    "mesh_reconstruction",
    "Rebuild a CAD part from a target mesh file and its overall size.",
    domain="reconstruction",
    held_out=True,
)
def mesh_reconstruction(level: int, rng: random.Random) -> TaskSpec:
    part = _pick(level, rng)
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
        oracle=_part_plan(part, rng, level),
        constraints=part.constraints(with_volume=False) + _topology(part, level),
        files={target: ("reference_stl", part.script)},
        geometry=_part_geometry(part),
        geometry_min=PART_IOU_MIN,  # the mesh is fine enough to read every dimension exactly
    )


@family(
    "deliverables",
    "Produce files (.step, .glb) that reload with the right geometry.",
    domain="deliverables",
)
def deliverables(level: int, rng: random.Random) -> TaskSpec:
    part = rng.choice(P.SIMPLE + P.MEDIUM)(rng)
    step_path = f"out/{part.name.lower()}.step"
    step = {"path": step_path, "format": "step", "script": part.script}
    if level == 1:
        return TaskSpec(
            prompt=f"Export the CAD part '{part.name}' as a STEP file to {step_path} in the workspace.",
            parameters={"part": part.kind, "files": [step_path]},
            oracle=[call("export", format="step", path=step_path, objects=[part.name])],
            constraints=part.constraints(),
            start=part.script_plan(),
            deliverables=[step],
        )
    items = random_items(rng, 2 if level == 2 else 4)
    for it in items:  # keep the scene clear of the part (which sits at the origin)
        it["location"][0] += 2.0  # metres; the part is ~0.1 m across
    names = [it["name"] for it in items]
    glb_path = "out/scene.glb"
    glb = {
        "path": glb_path,
        "format": "glb",
        "items": [{**it, "op": "add"} for it in items],
        "names": names,
    }
    from training.tasks.scene_families import add_call, describe_item, placed

    oracle = part.script_plan() + [add_call(it) for it in items]
    colours = []
    if level == 3:
        colours = [("#D03030", names[0]), ("#3050D0", names[1])]
        oracle += [call("set_material", name=n, color=c) for c, n in colours]
    oracle += [
        call("export", format="step", path=step_path, objects=[part.name]),
        call("export", format="glb", path=glb_path, objects=names),
    ]
    paint = "".join(f" Colour '{n}' {c}." for c, n in colours)
    prompt = (
        f"Model {part.text}, and export it as STEP to {step_path}. Also add "
        + "; ".join(describe_item(it) for it in items)
        + f".{paint} Export those objects (not the part) as glTF binary to {glb_path}."
    )
    constraints = part.constraints() + [c for it in items for c in placed(it)]
    constraints += [{"kind": "material", "object": n, "color": c} for c, n in colours]
    return TaskSpec(
        prompt=prompt,
        parameters={"part": part.kind, "objects": items, "files": [step_path, glb_path]},
        oracle=oracle,
        constraints=constraints,
        deliverables=[step, glb],
        geometry=None if level < 3 else scene_geometry(items) | {"objects": names},
        geometry_min=0.8,
    )
