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
    if level == 4:
        return P.bossed_plate(rng)
    return P.mounting_plate(rng)


def _pick_pair(rng: random.Random) -> tuple[P.Part, P.Part]:
    """Level 5: a padded housing (thirteen steps) and a ring whose bore fits its boss (four)."""
    housing = P.bossed_plate(rng, pad=True)
    return housing, P.cap(rng, fits=housing.params["boss_diameter"])


def _part_plan(part: P.Part, rng: random.Random, level: int) -> list[dict[str, Any]]:
    # Levels 3+ exist to need many steps: always the structured plan. Otherwise either form
    # (cadquery_script is the form the strongest CAD-RL results use).
    if part.plan is not None and (level >= 3 or rng.random() < 0.5):
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
    levels=(1, 2, 3, 4, 5),
    domain="parts",
)
def cad_parts(level: int, rng: random.Random) -> TaskSpec:
    if level == 5:
        housing, ring = _pick_pair(rng)
        lead = rng.choice(("Model two parts:", "Create two CAD parts:", "Build, as exact CAD solids,"))
        return TaskSpec(
            prompt=f"{lead} {housing.text}; and {ring.text}.",
            parameters={"parts": [housing.kind, ring.kind], "sizes": [housing.size, ring.size]},
            oracle=housing.plan + ring.plan,
            constraints=housing.constraints() + _topology(housing, level)
            + ring.constraints() + _topology(ring, level),
            geometry=_part_geometry(housing, ring),
            geometry_min=PART_IOU_MIN,
        )
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


def _mesh_pair(rng: random.Random) -> TaskSpec:
    """Level 5: two target meshes, a padded housing and the ring that fits its boss."""
    housing, ring = _pick_pair(rng)
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
        constraints=[c for p in parts for c in p.constraints(with_volume=False) + _topology(p, 5)],
        files={t: ("reference_stl", p.script) for p, t in zip(parts, targets, strict=True)},
        geometry=_part_geometry(*parts),
        geometry_min=PART_IOU_MIN,
    )


@family(
    "mesh_reconstruction",
    "Rebuild a CAD part from a target mesh file and its overall size.",
    levels=(1, 2, 3, 4, 5),
    domain="reconstruction",
    held_out=True,
)
def mesh_reconstruction(level: int, rng: random.Random) -> TaskSpec:
    if level == 5:
        return _mesh_pair(rng)
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


def _deliverables_45(level: int, rng: random.Random) -> TaskSpec:
    """Level 4: a part as STEP and four coloured objects as GLB. Level 5: two parts, each its
    own STEP, and six coloured objects as GLB; every export names objects made earlier."""
    from training.tasks.scene_families import COLOURS, add_call, describe_item, placed

    makers = rng.sample(P.SIMPLE + P.MEDIUM, 1 if level == 4 else 2)
    parts = [m(rng) for m in makers]
    items = random_items(rng, 4 if level == 4 else 6)
    for it in items:  # keep the scene clear of the parts (which sit at the origin)
        it["location"][0] += 2.0  # metres; the parts are ~0.1 m across
    names = [it["name"] for it in items]
    colours = rng.sample(sorted(COLOURS), len(items))
    oracle = [step for p in parts for step in p.script_plan()] + [add_call(it) for it in items]
    oracle += [call("set_material", name=n, color=COLOURS[c]) for n, c in zip(names, colours, strict=True)]
    steps = [f"out/{p.name.lower()}.step" for p in parts]
    glb_path = "out/scene.glb"
    oracle += [
        call("export", format="step", path=sp, objects=[p.name])
        for p, sp in zip(parts, steps, strict=True)
    ]
    oracle.append(call("export", format="glb", path=glb_path, objects=names))
    made = parts[0].text if len(parts) == 1 else "two parts: " + "; and ".join(p.text for p in parts)
    if len(parts) == 1:
        exports = f"Export it as STEP to {steps[0]}"
    else:
        exports = "Export each part as STEP: " + " and ".join(
            f"'{p.name}' to {sp}" for p, sp in zip(parts, steps, strict=True)
        )
    prompt = (
        f"Model {made}. {exports}. Also add "
        + "; ".join(describe_item(it) for it in items)
        + ". Colour them: "
        + ", ".join(f"'{n}' {c} ({COLOURS[c]})" for n, c in zip(names, colours, strict=True))
        + ". Export those objects (not the "
        + ("part" if len(parts) == 1 else "parts")
        + f") as glTF binary to {glb_path}."
    )
    constraints = [c for p in parts for c in p.constraints()]
    constraints += [c for it in items for c in placed(it)]
    constraints += [
        {"kind": "material", "object": n, "color": COLOURS[c]}
        for n, c in zip(names, colours, strict=True)
    ]
    delivered = [
        {"path": sp, "format": "step", "script": p.script} for p, sp in zip(parts, steps, strict=True)
    ]
    delivered.append(
        {"path": glb_path, "format": "glb", "items": [{**it, "op": "add"} for it in items], "names": names}
    )
    return TaskSpec(
        prompt=prompt,
        parameters={"parts": [p.kind for p in parts], "objects": items,
                    "files": steps + [glb_path]},  # fmt: skip
        oracle=oracle,
        constraints=constraints,
        deliverables=delivered,
        geometry=scene_geometry(items) | {"objects": names},
        geometry_min=0.8,
    )


@family(
    "deliverables",
    "Produce files (.step, .glb) that reload with the right geometry.",
    levels=(1, 2, 3, 4, 5),
    domain="deliverables",
)
def deliverables(level: int, rng: random.Random) -> TaskSpec:
    if level >= 4:
        return _deliverables_45(level, rng)
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
