"""The `print_deliverables` family (domain deliverables): Deliver parts for 3D printing: 3MF and
millimetre STL, on the build plate, inside the build volume, several parts arranged apart on one
or two plates.
"""

from __future__ import annotations

import math
import random
from typing import Any

from training.tasks.recipes.boxes import (
    DELIVERABLE_WEIGHTS,
    rounded,
)
from training.tasks.recipes.phrases import CAD, LEADS
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap

# ================================================================ deliverable files

PRINT_NAMES = ("Clip", "Spacer", "Tag", "Foot", "Cap", "Hinge", "Knob", "Wedge", "Latch", "Shim")


PRINTERS = ((220, 220, 250), (250, 210, 220), (180, 180, 180))


def _printable(rng: random.Random, name: str) -> dict[str, Any]:
    """A small part for printing (millimetres, centred in XY, bottom on Z=0): a holed block or
    a spacer ring, with its structured plan, size and volume."""
    if rng.random() < 0.6:
        ln, w, h = rng.choice((30, 40, 50, 60)), rng.choice((20, 25, 30)), rng.choice((4, 5, 6, 8))
        d, n = rng.choice((3, 4, 5)), rng.choice((1, 2))
        pts = [[0.0, 0.0]] if n == 1 else [[-ln / 4, 0.0], [ln / 4, 0.0]]
        plan = [call("cad_box", name=name, length=ln, width=w, height=h),
                call("cad_hole", name=name, diameter=d, positions=pts)]
        where_ = "at its centre" if n == 1 else f"at x = ±{ln / 4:g} mm"
        text = (f"a block '{name}' {ln} x {w} x {h} mm with {n} through hole"
                f"{'s' if n > 1 else ''} {d} mm across {where_}")
        return {"name": name, "size": [ln, w, h], "plan": plan, "text": text,
                "volume": rounded(ln * w * h - n * math.pi * (d / 2) ** 2 * h, 3)}
    od, h, bore = rng.choice((16, 20, 24, 30)), rng.choice((5, 8, 10, 12)), rng.choice((5, 6, 8))
    plan = [call("cad_cylinder", name=name, radius=od / 2, height=h),
            call("cad_hole", name=name, diameter=bore, positions=[[0, 0]])]
    text = f"a spacer ring '{name}' {od} mm across, {h} mm tall, with a {bore} mm bore"
    return {"name": name, "size": [od, od, h], "plan": plan, "text": text,
            "volume": rounded(math.pi * ((od / 2) ** 2 - (bore / 2) ** 2) * h, 3)}


def _arrange(parts: list[dict[str, Any]], plate, gap: float = 10.0) -> None:
    """Rows along X from the plate's corner, `gap` between parts and from the edges."""
    x = y = gap
    row = 0.0
    for p in parts:
        ln, w = p["size"][0], p["size"][1]
        if x + ln + gap > plate[0]:
            x, y, row = gap, y + row + gap, 0.0
        p["centre"] = [rounded(x + ln / 2), rounded(y + w / 2)]
        x += ln + gap
        row = max(row, w)


def _moved(p: dict[str, Any], z: float = 0.0) -> dict[str, Any]:
    return call("transform", name=p["name"],
                location=[rounded(p["centre"][0] / 1000, 6), rounded(p["centre"][1] / 1000, 6), z])


def print_deliverables(level: int, rng: random.Random) -> TaskSpec:
    plate = list(rng.choice(PRINTERS))
    n = {1: 1, 2: 1, 3: 2, 4: 3, 5: 5}[level]
    names = rng.sample(PRINT_NAMES, n)
    parts = [_printable(rng, nm) for nm in names]
    _arrange(parts[:3], plate)
    _arrange(parts[3:], plate)
    given = level <= 3  # positions told; above, any arrangement that keeps them apart
    if given:  # the arrangement moved as one, so the parts stay apart
        shift = rng.choice((0, 20, 40))
        for p in parts:
            p["centre"] = [p["centre"][0] + shift, p["centre"][1] + 30]
    stem = names[0].lower()
    start: list[dict] = []
    oracle: list[dict] = []
    cons: list[dict] = []
    for p in parts:
        cons.append({"kind": "part", "object": p["name"], "size": p["size"],
                     "volume": p["volume"], "tol_rel": 0.01})
        d = p["plan"][1]["args"]["diameter"]
        cons.append({"kind": "holes", "object": p["name"], "diameter": d,
                     "count": len(p["plan"][1]["args"]["positions"])})
        if given:
            cons.append({"kind": "position", "object": p["name"],
                         "value": [p["centre"][0] / 1000, p["centre"][1] / 1000,
                                   p["size"][2] / 2000], "tol": 0.001})
    if level == 1:
        lift = rng.choice((0.02, 0.03, 0.05))
        start = parts[0]["plan"] + [call("transform", name=names[0], location=[0, 0, lift])]
    else:
        oracle += [s for p in parts for s in p["plan"]]
    oracle += [_moved(p) for p in parts]
    plates = [parts[:3], parts[3:]] if level == 5 else [parts]
    files = [f"print/{stem}.3mf"] if level < 5 else ["print/plate1.3mf", "print/plate2.3mf"]
    deliver = []
    for group, path in zip(plates, files, strict=True):
        oracle.append(call("export", format="3mf", path=path, objects=[p["name"] for p in group]))
        deliver.append({"path": path, "format": "3mf", "check": "print_3mf", "plate": plate,
                        "gap": 2.0, "parts": [{"name": p["name"], "size": p["size"],
                                               "volume": p["volume"], "z0": 0.0,
                                               "centre": p["centre"] if given else None}
                                              for p in group]})
    stl_parts = {1: [], 2: parts, 3: [], 4: parts, 5: [max(parts, key=lambda p: p["volume"])]}
    if stl_parts[level]:
        chosen = stl_parts[level]
        path = f"print/{stem}.stl" if len(chosen) == 1 else "print/all_parts.stl"
        if level == 5:
            path = f"print/{chosen[0]['name'].lower()}.stl"
        oracle.append(call("export", format="stl", path=path, objects=[p["name"] for p in chosen],
                           unit="mm"))
        deliver.append({"path": path, "format": "stl", "check": "mesh_file", "unit": "mm",
                        "plate": plate, "parts": [{"size": p["size"], "volume": p["volume"],
                                                   "z0": 0.0, "centre": p["centre"]}
                                                  for p in chosen]})
    bed = f"(build volume {plate[0]} x {plate[1]} x {plate[2]} mm)"  # a limit, no tool input
    intro = rng.choice((f"Get this ready for a printer {bed}",
                        f"Prepare for printing on a printer {bed}",
                        f"I want to print on a machine {bed}"))
    frame = ("The plate's corner is at the origin, the plate spanning +X and +Y at Z = 0; the "
             "scene is in metres, parts in millimetres.")

    def at(p):  # where a part's origin goes on the plate, in the scene's metres
        return f"({p['centre'][0] / 1000:g}, {p['centre'][1] / 1000:g}) m"

    if level == 1:
        p = parts[0]
        text = (f"Part '{p['name']}' floats above the plate: set it on the plate (bottom at "
                f"Z = 0) centred at {at(p)} and export it "
                f"as 3MF to {files[0]}.")
    else:
        model = "; ".join(p["text"] + (f", centred at {at(p)}" if given else "") for p in parts)
        text = (f"Model {model} (each centred in XY on its origin, bottom on Z=0), then put "
                f"{'it' if n == 1 else 'them'} on the plate (bottoms at Z = 0)")
        if not given:
            text += ", inside the build volume and at least 2 mm apart"
        if level == 5:
            text += (f". Two plates: export {', '.join(names[:3])} as 3MF to {files[0]} and "
                     f"{', '.join(names[3:])} to {files[1]} (each plate arranged on its own)")
        else:
            text += f", and export {'it' if n == 1 else 'all'} as 3MF to {files[0]}"
        if stl_parts[level]:
            what = "the largest part by volume" if level == 5 else ("it" if n == 1 else "all parts")
            text += f"; also export {what} as one STL in millimetres to {deliver[-1]['path']}"
        text += "."
    prompt = f"{intro}. {frame} {text}"
    return TaskSpec(prompt=prompt, parameters={"plate_mm": plate, "parts": names,
                                               "files": [d["path"] for d in deliver]},
                    oracle=oracle, constraints=cons, start=start, deliverables=deliver)


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"^(?:Get this ready for a printer|Prepare for printing on a printer)",
         "Prepare this for a printer", "Get it ready to print on a printer",
         "Set this up for a printer", "Make it print-ready for a printer",
         "Prepare for printing on a printer",
         unseen=("This has to go to a printer",)),
    swap(r"The plate's corner is at the origin, the plate spanning \+X and \+Y at Z = 0",
         "The plate's corner is at the origin and the plate spans +X and +Y at Z = 0",
         "The build plate starts at the origin and spans +X and +Y at Z = 0",
         "The plate has its corner at the origin, spanning +X and +Y at Z = 0",
         "The plate's corner sits at the origin, the plate covering +X and +Y at Z = 0",
         "The plate's corner is at the origin, the plate spanning +X and +Y at Z = 0",
         unseen=("The printer's plate begins at the origin and runs along +X and +Y at Z = 0",)),
    *LEADS,
    *CAD,
))


FAMILY = Family(
    name="print_deliverables",
    description="Deliver parts for 3D printing: 3MF and millimetre STL, on the build plate, inside the "
    "build volume, several parts arranged apart on one or two plates.",
    domain="deliverables",
    levels=(1, 2, 3, 4, 5),
    weights=DELIVERABLE_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("cad", "files"),
    wordings=WORDINGS,
    make=print_deliverables,
)
