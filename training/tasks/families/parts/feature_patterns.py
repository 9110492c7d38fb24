"""The `feature_patterns` family (domain parts): Hole grids and bolt circles on plates and flanges,
with filleted corners and chamfered edges, and a flange matched to a plate.
"""

from __future__ import annotations

import math
import random

from training.tasks.config import CAD_WEIGHTS
from training.tasks.recipes.cad_plan import (
    fmt,
    join_parts,
    lead,
    spec,
)
from training.tasks.recipes.phrases import CAD, LEADS, N
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


def _bolt_circle(rb: float, n: int, start: float = 0.0) -> list[list[float]]:
    return [[round(rb * math.cos(math.radians(start + 360 * k / n)), 9),
             round(rb * math.sin(math.radians(start + 360 * k / n)), 9)] for k in range(n)]


def _grid(nx: int, ny: int, sx: float, sy: float) -> list[list[float]]:
    return [[round((i - (nx - 1) / 2) * sx, 9), round((j - (ny - 1) / 2) * sy, 9)]
            for j in range(ny) for i in range(nx)]


def _flange(rng: random.Random, name: str, hub: bool, rb: float | None = None):
    r, t = rng.choice((30, 35, 40)), rng.choice((8, 10))
    bore, n, db = rng.choice((12, 16, 20)), rng.choice((4, 6, 8)), rng.choice((5, 6))
    rh, hh = bore // 2 + rng.choice((6, 8)), rng.choice((8, 10))
    rb = rb or (r + (rh if hub else bore // 2)) // 2 + 1
    plan = [call("cad_cylinder", name=name, radius=r, height=t)]
    words = [f"a round flange '{name}' {2 * r} mm across and {t} mm thick (on the Z axis, "
             "bottom on Z=0)"]
    if hub:
        plan.append(call("cad_sketch_extrude", name=name, profile={"kind": "circle", "radius": rh},
                         distance=hh, at_z=t))
        words.append(f"a hub {2 * rh} mm across rising {hh} mm from its top")
        plan.append(call("cad_chamfer", name=name, edges=">Z", length=1))
        plan.append(call("cad_chamfer", name=name, edges="<Z", length=1))
        words.append("the hub's top edge and the flange's bottom edge chamfered 1 mm")
    plan.append(call("cad_hole", name=name, diameter=bore))
    pts = _bolt_circle(rb, n)
    plan += [call("cad_pattern", kind="circle", count=n, radius=rb),
             call("cad_hole", name=name, diameter=db, positions=pts)]
    words.append(f"a {bore} mm centre bore and {n} holes {db} mm across on a {fmt(2 * rb)} mm "
                 "bolt circle, the first on +X")
    return plan, words, {name: [(bore, 1), (db, n)]}, {"t": t, "rb": rb, "n": n, "db": db}


def _plate(rng: random.Random, name: str, level: int):
    ln, wd, t = rng.choice((80, 100, 120)), rng.choice((60, 70, 80)), rng.choice((6, 8, 10))
    rf, d = rng.choice((6, 8)), rng.choice((4, 5))
    nx, ny = rng.choice(((3, 2), (4, 2), (3, 3), (4, 3)))
    sx, sy = (ln - 30) // (nx - 1), (wd - 30) // (ny - 1)
    pts = _grid(nx, ny, sx, sy)
    plan = [call("cad_box", name=name, length=ln, width=wd, height=t)]
    words = [f"a plate '{name}' {ln} x {wd} x {t} mm (centred in XY, bottom on Z=0)"]
    if level >= 3:
        plan += [call("cad_fillet", name=name, edges="|Z", radius=rf),
                 call("cad_chamfer", name=name, edges=">Z", length=1)]
        words.append(f"its vertical corners filleted r={rf} mm and its top edges chamfered 1 mm")
    plan += [call("cad_pattern", kind="grid", count_x=nx, count_y=ny, spacing_x=sx, spacing_y=sy),
             call("cad_hole", name=name, diameter=d, positions=pts)]
    words.append(f"a {nx} x {ny} grid of {d} mm through holes, {sx} mm apart along X and {sy} mm "
                 "along Y, centred on the origin")
    return plan, words, {name: [(d, nx * ny)]}


def feature_patterns(level: int, rng: random.Random) -> TaskSpec:
    if level in (1, 3):
        name = rng.choice(("Plate", "Panel", "Base"))
        plan, words, holes = _plate(rng, name, level)
        return spec(f"{lead(rng)} {join_parts(words)}.", plan, [name], {"level": level}, holes=holes)
    if level in (2, 4):
        name = rng.choice(("Flange", "Hub", "Disc"))
        plan, words, holes, _ = _flange(rng, name, hub=level == 4)
        return spec(f"{lead(rng)} {join_parts(words)}.", plan, [name], {"level": level}, holes=holes)
    plate, fl = "Plate", "Flange"
    ln, wd, t = rng.choice((120, 140)), rng.choice((90, 100)), rng.choice((8, 10))
    rf, dc, cb, cbd = rng.choice((8, 10)), 5, 22, 3
    bore = 16
    sx, sy = ln - 20, wd - 20
    corners = _grid(2, 2, sx, sy)
    nside, ds, ss = rng.choice((3, 4)), 3, 8
    side = [[x + sgn * (ln // 2 - 10), y] for sgn in (-1, 1) for x, y in _grid(1, nside, 1, ss)]
    fplan, fwords, fholes, f = _flange(rng, fl, hub=False, rb=rng.choice((24, 26)))
    rb, n, db = f["rb"], f["n"], f["db"]
    plan = [
        call("cad_box", name=plate, length=ln, width=wd, height=t),
        call("cad_fillet", name=plate, edges="|Z", radius=rf),
        call("cad_chamfer", name=plate, edges=">Z", length=1),
        call("cad_pattern", kind="grid", count_x=2, count_y=2, spacing_x=sx, spacing_y=sy),
        call("cad_hole", name=plate, diameter=dc, positions=corners),
        call("cad_hole", name=plate, diameter=bore, positions=[[0, 0]], counterbore_diameter=cb,
             counterbore_depth=cbd),
        call("cad_pattern", kind="circle", count=n, radius=rb),
        call("cad_hole", name=plate, diameter=db, positions=_bolt_circle(rb, n)),
        call("cad_pattern", kind="grid", count_x=1, count_y=nside, spacing_y=ss),
        call("cad_hole", name=plate, diameter=ds, positions=side),
    ]
    plan += fplan + [call("transform", name=fl, location=[0.0, 0.0, t / 1000])]
    prompt = (
        f"Make two parts in millimetres. A plate '{plate}' {ln} x {wd} x {t} mm (centred in XY, "
        f"bottom on Z=0) with its vertical corners filleted r={rf} mm and its top edges chamfered "
        f"1 mm, then four {dc} mm holes at (±{fmt(sx / 2)}, ±{fmt(sy / 2)}) mm, a {bore} mm "
        f"centre hole counterbored {cb} mm across and {cbd} mm deep, {n} holes {db} mm across on "
        f"a {fmt(2 * rb)} mm bolt circle (the first on +X), and at each end a column of "
        f"{ds} mm holes ({nside} of them) {ss} mm apart, one at X=-{fmt(ln // 2 - 10)} mm and one at X={fmt(ln // 2 - 10)} mm, "
        "centred on Y=0. And "
        f"{join_parts(fwords)}, with its bolt holes matching the plate's; then move '{fl}' up to "
        f"sit on the plate (its bottom at Z={t} mm) with the holes lined up."
    )
    holes = {plate: [(dc, 4), (db, n), (ds, 2 * nside)], **fholes}
    return spec(prompt, plan, [plate, fl], {"level": 5}, holes=holes)


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(rf"(?P<g>{N}) mm apart along X and (?P<h>{N}) mm along Y",
         "spaced {g} mm in X and {h} mm in Y", "at {g} mm pitch in X and {h} mm in Y",
         "{g} mm apart in X, {h} mm in Y", "with {g} mm spacing along X and {h} mm along Y",
         "{g} mm apart along X and {h} mm along Y",
         unseen=("{g} mm from each other in X and {h} mm in Y",)),
    swap(r"centred on the origin", "centred on the origin", "centred at the origin",
         "around the origin", "centred about the origin", "centred on the origin",
         unseen=("with the origin in its middle",)),
    *LEADS,
    *CAD,
))


FAMILY = Family(
    name="feature_patterns",
    description="Hole grids and bolt circles on plates and flanges, with filleted corners and chamfered "
    "edges, and a flange matched to a plate.",
    domain="parts",
    levels=(1, 2, 3, 4, 5),
    weights=CAD_WEIGHTS,
    held_out=True,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("cad"),
    wordings=WORDINGS,
    make=feature_patterns,
)
