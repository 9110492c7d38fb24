"""The `drawing_reconstruction` family (domain reconstruction): Rebuild CAD parts from an
orthographic drawing sheet with a dimension table.
"""

from __future__ import annotations

import json
import random

from training.tasks import shapes
from training.tasks.config import CAD_WEIGHTS
from training.tasks.recipes import parts as P
from training.tasks.recipes.phrases import CAD
from training.tasks.spec import Family, TaskSpec
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap

# ================================================================ drawing reconstruction

DRAWING_VIEWS = (("front (looking along +Y)", (0, -1, 0)), ("top (looking down -Z)", (0, 0, 1)),
                 ("right (looking along -X)", (1, 0, 0)))


def drawing_svg(spec: str) -> bytes:
    """An orthographic drawing sheet: three views of each part (CadQuery's SVG projection,
    hidden lines grey) and its dimension table, as one SVG."""
    from xml.sax.saxutils import escape

    from cadquery.occ_impl.exporters.svg import getSVG

    sheet = json.loads(spec)
    w, h = 300, 220
    rows = []
    y = 0
    for entry in sheet["parts"]:
        shape = shapes.build_reference(entry["script"])
        rows.append(f'<text x="10" y="{y + 24}" font-size="16">Part {escape(entry["name"])} '
                    "(millimetres, third-angle projection)</text>")
        for i, (label, direction) in enumerate(DRAWING_VIEWS):
            view = getSVG(shape, {"projectionDir": direction, "width": w, "height": h,
                                  "showAxes": False, "showHidden": True,
                                  "marginLeft": 20, "marginTop": 20})
            body = view[view.index("<svg"):]
            body = body.replace("<svg", f'<svg x="{10 + i * (w + 10)}" y="{y + 34}"', 1)
            rows.append(f'<text x="{10 + i * (w + 10)}" y="{y + 48 + h}" font-size="12">'
                        f"{escape(label)}</text>")
            rows.append(body)
        ty = y + 70 + h
        rows.append(f'<text x="10" y="{ty}" font-size="13">Dimensions:</text>')
        for k, line in enumerate(entry["table"]):
            rows.append(f'<text x="20" y="{ty + 18 * (k + 1)}" font-size="12">{escape(line)}</text>')
        y = ty + 18 * (len(entry["table"]) + 1) + 20
    total_w = 3 * (w + 10) + 10
    svg = (f'<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" '
           f'width="{total_w}" height="{y}" viewBox="0 0 {total_w} {y}">'
           f'<rect width="100%" height="100%" fill="white"/>' + "".join(rows) + "</svg>\n")
    return svg.encode()


def _table(part: P.Part) -> list[str]:
    """The drawing's dimension table: the part's dimensioned description, clause by clause."""
    text = part.text.replace(", with ", "; ").replace(", and ", "; ").replace(" and the ", "; the ")
    return [c.strip() for c in text.split(";") if c.strip()]


def _drawn_parts(level: int, rng: random.Random) -> list[P.Part]:
    if level == 1:
        return [rng.choice(P.SIMPLE)(rng)]
    if level == 2:
        return [P.flange(rng)]
    if level == 3:
        return [P.mounting_plate(rng)]
    if level == 4:
        return [P.mounting_plate(rng), P.flange(rng)]
    return [P.mounting_plate(rng), P.flange(rng), P.plate(rng), P.shaft(rng), P.shelled_box(rng)]


def drawing_reconstruction(level: int, rng: random.Random) -> TaskSpec:
    parts = _drawn_parts(level, rng)
    path = rng.choice(("drawings/sheet.svg", "drawing.svg", "docs/part_drawing.svg"))
    sheet = {"parts": [{"name": p.name, "script": p.script, "table": _table(p)} for p in parts]}
    listing = " ".join(
        f"[{p.name}] " + "; ".join(_table(p)) + "." for p in parts)
    lead = rng.choice(("Rebuild from the drawing", "Model what the drawing shows",
                       "Here is a drawing to turn into CAD"))
    prompt = (f"{lead}: {path} in the workspace has three orthographic views of "
              + ("the part" if len(parts) == 1 else f"{len(parts)} parts")
              + " and a dimension table (millimetres). Build each as an exact CAD part of the "
              f"name shown, where the table puts it. The table reads: {listing}")
    oracle = [step for p in parts for step in (p.plan or p.script_plan())]
    cons = [c for p in parts for c in p.constraints()]
    cons += [{"kind": "topology", "object": p.name, "script": p.script} for p in parts
             if p.kind == "mounting_plate"]
    return TaskSpec(
        prompt=prompt,
        parameters={"parts": [p.kind for p in parts], "drawing": path},
        oracle=oracle,
        constraints=cons,
        files={path: ("drawing_svg", json.dumps(sheet, sort_keys=True))},
        geometry={"kind": "parts", "parts": [{"name": p.name, "script": p.script} for p in parts]},
        geometry_min=0.999,
    )


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"^(?:Here is a drawing to turn into CAD|Model what the drawing shows)",
         "A drawing to model", "Turn this drawing into CAD", "Build the CAD from the drawing",
         "Model the part from the drawing", "Here is a drawing to turn into CAD",
         unseen=("Build what this drawing shows",)),
    swap(r"Build each as an exact CAD part of the name shown, where the table puts it\.",
         "Model each as an exact CAD part with the name shown, placed where the table says.",
         "Build each of them as an exact CAD part, named and placed as the table says.",
         "Make each an exact CAD part of the name shown, where the table puts it.",
         "Each becomes an exact CAD part of the name shown, placed as in the table.",
         "Build each as an exact CAD part of the name shown, where the table puts it.",
         unseen=("Every part named there should become an exact CAD part, placed as listed.",)),
    swap(r"The table reads: ", "The table says: ", "The dimension table: ", "From the table: ",
         "Table: ", "The table reads: ", unseen=("In the table: ",)),
    *CAD,
))


FAMILY = Family(
    name="drawing_reconstruction",
    description="Rebuild CAD parts from an orthographic drawing sheet with a dimension table.",
    domain="reconstruction",
    levels=(1, 2, 3, 4, 5),
    weights=CAD_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("cad", extra=("import_file",)),
    wordings=WORDINGS,
    make=drawing_reconstruction,
)
