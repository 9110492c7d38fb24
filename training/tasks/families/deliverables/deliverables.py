"""The `deliverables` family (domain deliverables): Produce files (.step, .glb) that reload with
the right geometry.
"""

from __future__ import annotations

import random

from training.tasks.recipes import parts as P
from training.tasks.recipes.phrases import CAD, LEADS, SCENE
from training.tasks.recipes.scene import (
    COLOURS,
    add_call,
    describe_item,
    placed,
    random_items,
    scene_geometry,
)
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


def _deliverables_45(level: int, rng: random.Random) -> TaskSpec:
    """Level 4: a part as STEP and four coloured objects as GLB. Level 5: two parts, each its
    own STEP, and six coloured objects as GLB; every export names objects made earlier."""
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


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"as glTF binary", "as a binary glTF (.glb)", "as GLB", "in glTF binary form",
         "as glTF binary", "as a glTF binary file", unseen=("as a .glb file",)),
    swap(r"as a STEP file", "as STEP", "in STEP format", "to STEP", "as a STEP file",
         "as a STEP file", unseen=("as a .step file",)),
    swap(r"(?P<w>[Ee]xport) ", unseen=(lambda m: "Save " if m.group("w")[0] == "E" else "save ",)),
    *LEADS,
    *SCENE,
    *CAD,
))


FAMILY = Family(
    name="deliverables",
    description="Produce files (.step, .glb) that reload with the right geometry.",
    domain="deliverables",
    levels=(1, 2, 3, 4, 5),
    weights={
        "completeness": 0.3,
        "geometry": 0.3,
        "constraints": 0.2,
        "validity": 0.1,
        "efficiency": 0.05,
        "recovery": 0.05,
    },
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("files", extra=("cadquery_script", "cad_box", "cad_cylinder")),
    wordings=WORDINGS,
    make=deliverables,
)
