"""The `format_deliverables` family (domain deliverables): Deliver STEP, GLB and STL files that
reload with the right geometry, names and units; assemblies of several parts.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from training.tasks.recipes import parts as P
from training.tasks.recipes.boxes import (
    DELIVERABLE_WEIGHTS,
    add,
    box,
    rounded,
    rounded_all,
    where,
)
from training.tasks.recipes.phrases import CAD, LEADS, SCENE
from training.tasks.recipes.scene import COLOURS, fmt
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


def _glb_object(p: P.Part, offset) -> dict[str, Any]:
    """A part centred in XY with its bottom on its origin, placed at `offset` (mm), in metres."""
    return {"name": p.name, "size": rounded_all(np.asarray(p.size) / 1000, 6),
            "centre": rounded_all((np.asarray(offset, float) + [0, 0, p.size[2] / 2]) / 1000, 6)}


def format_deliverables(level: int, rng: random.Random) -> TaskSpec:
    if level <= 3:
        parts = [rng.choice(P.SIMPLE + P.MEDIUM)(rng)]
    elif level == 4:
        parts = [P.plate(rng), rng.choice((P.flange, P.shelled_box))(rng)]
    else:
        parts = [P.plate(rng), P.flange(rng), P.shaft(rng)]
    # side by side along +X, 20 mm apart, the first at the origin
    offsets, x = [], 0.0
    for i, p in enumerate(parts):
        if i:
            x += parts[i - 1].size[0] / 2 + 20 + p.size[0] / 2
        offsets.append([x, 0.0, 0.0])
    folder = rng.choice(("out", "export", "deliver"))
    plans = [s for p in parts for s in (p.plan or p.script_plan())]
    start: list[dict] = []
    oracle: list[dict] = []
    if level == 1:
        start = plans
    else:
        oracle += plans
    oracle += [call("transform", name=p.name, location=[o[0] / 1000, 0.0, 0.0])
               for p, o in zip(parts, offsets, strict=True) if o[0]]
    cons = [c for p in parts for c in p.constraints()]
    deliver: list[dict] = []
    texts: list[str] = []
    main = parts[0]
    if len(parts) == 1:
        step_path = f"{folder}/{main.name.lower()}.step"
        deliver.append({"path": step_path, "format": "step", "script": main.script})
        texts.append(f"a STEP file of '{main.name}' at {step_path}")
    else:
        step_path = f"{folder}/assembly.step"
        lo = np.min([np.asarray(o) - [p.size[0] / 2, p.size[1] / 2, 0]
                     for p, o in zip(parts, offsets, strict=True)], 0)
        hi = np.max([np.asarray(o) + [p.size[0] / 2, p.size[1] / 2, p.size[2]]
                     for p, o in zip(parts, offsets, strict=True)], 0)
        deliver.append({"path": step_path, "format": "step", "check": "step_parts",
                        "solids": len(parts), "volume": rounded(sum(p.volume for p in parts)),
                        "size": rounded_all(hi - lo)})
        texts.append(f"one STEP file of all {len(parts)} parts at {step_path}")
    step_call = call("export", format="step", path=step_path, objects=[p.name for p in parts])
    props: list[dict[str, Any]] = []
    if level in (3, 5):
        y = -0.15 if level == 3 else -0.2
        props = [box("Crate", (0.1, 0.1, 0.1), (0.0, y, 0.05)),
                 box("Pole", (0.04, 0.04, 0.3), (0.2, y, 0.15), kind="cylinder")]
        oracle += [add(b) for b in props]
        cons += [c for b in props for c in where(b)]
    if level == 5:
        col = rng.choice(sorted(COLOURS))
        oracle.append(call("set_material", name="Crate", color=COLOURS[col]))
        cons.append({"kind": "material", "object": "Crate", "color": COLOURS[col]})
    oracle.append(step_call)
    if level >= 3:
        glb_objs = [{"name": b["name"], "size": b["dimensions"], "centre": b["location"]}
                    for b in props] if level == 3 else []
        if level >= 4:
            glb_objs += [_glb_object(p, o) for p, o in zip(parts, offsets, strict=True)]
        glb_objs += [{"name": b["name"], "size": b["dimensions"], "centre": b["location"]}
                     for b in props] if level == 5 else []
        glb_path = f"{folder}/scene.glb"
        oracle.append(call("export", format="glb", path=glb_path,
                           objects=[o["name"] for o in glb_objs]))
        deliver.append({"path": glb_path, "format": "glb", "check": "glb_named",
                        "objects": glb_objs})
        texts.append(f"a GLB at {glb_path} of " + ", ".join(f"'{o['name']}'" for o in glb_objs)
                     + " keeping their names")
    if level >= 2:
        stl_parts = parts if level < 5 else parts
        per_part = level == 5
        groups = [[p] for p in stl_parts] if per_part or len(parts) == 1 else [stl_parts]
        for g in groups:
            path = (f"{folder}/{g[0].name.lower()}.stl" if len(g) == 1
                    else f"{folder}/parts.stl")
            oracle.append(call("export", format="stl", path=path, objects=[p.name for p in g],
                               unit="mm"))
            deliver.append({"path": path, "format": "stl", "check": "mesh_file", "unit": "mm",
                            "parts": [{"size": p.size, "volume": p.volume} for p in g]})
        texts.append("an STL in millimetres of " + (
            "each part, named after it (lower case), in the same folder" if per_part else
            (f"'{main.name}' at {deliver[-1]['path']}" if len(groups[0]) == 1 else
             f"all the parts together at {deliver[-1]['path']}")))
    if level == 1:
        prompt = f"Export the CAD part '{main.name}' as a STEP file to {step_path}."
    else:
        listing = "; ".join(p.text + (f", then moved so its origin is at ({o[0] / 1000:g}, 0, 0) m"
                                      if o[0] else "") for p, o in zip(parts, offsets, strict=True))
        extra = ""
        if props:
            extra = (" Add a box 'Crate' 0.1 x 0.1 x 0.1 m centred at "
                     f"{fmt(props[0]['location'])} and a cylinder 'Pole' 0.04 x 0.04 x 0.3 m "
                     f"centred at {fmt(props[1]['location'])}"
                     + (f", and colour 'Crate' {col} ({COLOURS[col]})." if level == 5 else "."))
        lead = rng.choice(("Model", "Build", "Make"))
        prompt = (f"{lead} {listing} (CAD in millimetres, scene in metres).{extra} Then deliver "
                  + "; ".join(texts) + ".")
    return TaskSpec(prompt=prompt, parameters={"parts": [p.kind for p in parts],
                                               "files": [d["path"] for d in deliver]},
                    oracle=oracle, constraints=cons, start=start, deliverables=deliver)


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"Then deliver ", "Then export ", "Deliverables: ", "Finally deliver ", "Then hand over ",
         "Then deliver ", unseen=("When done, deliver ",)),
    swap(r"keeping their names", "with their names kept", "keeping the object names", "names kept",
         "keeping their names", "keeping their names", unseen=("without renaming them",)),
    swap(r"an STL in millimetres", "a millimetre STL", "an STL (mm)", "an STL in mm",
         "an STL in millimetres", "an STL in millimetres",
         unseen=("an STL file scaled in millimetres",)),
    *LEADS,
    *SCENE,
    *CAD,
))


FAMILY = Family(
    name="format_deliverables",
    description="Deliver STEP, GLB and STL files that reload with the right geometry, names and units; "
    "assemblies of several parts.",
    domain="deliverables",
    levels=(1, 2, 3, 4, 5),
    weights=DELIVERABLE_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("cad", "files", extra=("cadquery_script",)),
    wordings=WORDINGS,
    make=format_deliverables,
)
