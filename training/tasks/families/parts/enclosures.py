"""The `enclosures` family (domain parts): Shelled enclosures: boxes with walls, filleted corners,
lids, screw bosses, screw holes and vents.
"""

from __future__ import annotations

import random

from training.tasks.config import CAD_WEIGHTS
from training.tasks.recipes.cad_plan import (
    fmt,
    join_parts,
    lead,
    pts_text,
    spec,
)
from training.tasks.recipes.phrases import CAD, LEADS, N
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


def enclosures(level: int, rng: random.Random) -> TaskSpec:
    case, lid = rng.choice((("Case", "Lid"), ("Housing", "Cover"), ("Enclosure", "Lid")))
    ln, wd, ht = rng.choice((80, 90, 100, 120)), rng.choice((50, 60, 70)), rng.choice((30, 35, 40))
    t = rng.choice((2, 3))
    rf = rng.choice((6, 8))
    tl = rng.choice((3, 4))
    filleted = level in (2, 3, 5)
    plan = [call("cad_box", name=case, length=ln, width=wd, height=ht)]
    words = [f"an enclosure '{case}' {ln} x {wd} x {ht} mm outside (centred in XY, bottom on Z=0)"]
    if filleted:
        plan.append(call("cad_fillet", name=case, edges="|Z", radius=rf))
        words.append(f"its vertical corners rounded r={rf} mm")
    plan.append(call("cad_shell", name=case, faces=">Z", thickness=t))
    words.append(f"open at the top with {t} mm walls and floor")
    names, holes = [case], {}
    if level >= 4:
        n = 2 if level == 4 else 4
        rb, hb, ds = rng.choice((4, 5)), rng.choice((10, 12, 15)), rng.choice((2.5, 3))
        bx, by = ln / 2 - t - rb - 3, wd / 2 - t - rb - 3
        spots = [[-bx, -by], [bx, by]] if n == 2 else [[-bx, -by], [bx, -by], [-bx, by], [bx, by]]
        for i, (x, y) in enumerate(spots, 1):
            boss = f"Boss{i}"
            plan += [
                call("cad_cylinder", name=boss, radius=rb, height=t + hb),
                call("transform", name=boss, location=[x / 1000, y / 1000, 0.0]),
                call("boolean", target=case, cutter=boss, operation="union"),
            ]
        if n == 4:
            plan.append(call("cad_pattern", kind="grid", count_x=2, count_y=2, spacing_x=2 * bx,
                             spacing_y=2 * by))
        plan.append(call("cad_hole", name=case, diameter=ds, positions=spots))
        words.append(f"{n} screw bosses {2 * rb} mm across rising from the floor to "
                     f"Z={t + hb} mm at {pts_text(spots)}, each with a {fmt(ds)} mm screw hole "
                     "through the boss and the floor")
        holes[case] = [(ds, n)]
    if level >= 3:
        names.append(lid)
        plan.append(call("cad_sketch_extrude", name=lid, profile={"kind": "rect", "width": ln,
                                                                   "height": wd},
                         distance=tl, at_z=ht))
        lw = f"a separate lid '{lid}' {ln} x {wd} x {tl} mm lying on the rim (from Z={ht} mm)"
        if filleted:
            plan.append(call("cad_fillet", name=lid, edges="|Z", radius=rf))
            lw += " with the same rounded corners"
        if level >= 4:
            dl = ds + 0.5
            plan.append(call("cad_hole", name=lid, diameter=dl, positions=spots))
            lw += f", with {fmt(dl)} mm clearance holes over the bosses"
            holes[lid] = [(dl, n)]
        if level == 5:
            nv, dv, sv = rng.choice((5, 6, 7)), 3, 6
            vents = [[round((i - (nv - 1) / 2) * sv, 3), 0.0] for i in range(nv)]
            plan += [
                call("cad_pattern", kind="grid", count_x=nv, count_y=1, spacing_x=sv),
                call("cad_hole", name=lid, diameter=dv, positions=vents),
            ]
            lw += (f", and a row of {nv} vent holes {dv} mm across along X through its middle, "
                   f"{sv} mm apart")
            holes[lid].append((dv, nv))
        words.append(lw)
    prompt = f"{lead(rng)} {join_parts(words)}."
    return spec(prompt, plan, names, {"level": level, "size": [ln, wd, ht]}, holes=holes)


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(rf"open at the top with (?P<w>{N}) mm walls and floor",
         "open-topped, walls and floor {w} mm thick", "with an open top and {w} mm walls and floor",
         "open on top, with {w} mm walls and floor", "open at the top, {w} mm thick walls and floor",
         "open at the top with {w} mm walls and floor",
         unseen=("with no top, its walls and floor {w} mm thick",)),
    swap(r"lying on the rim", "resting on the rim", "sitting on the rim", "on the rim",
         "lying on the rim", "lying on the rim", unseen=("laid on top of the walls",)),
    swap(r"a separate lid ", unseen=("a loose lid ",)),
    *LEADS,
    *CAD,
))


FAMILY = Family(
    name="enclosures",
    description="Shelled enclosures: boxes with walls, filleted corners, lids, screw bosses, screw holes "
    "and vents.",
    domain="parts",
    levels=(1, 2, 3, 4, 5),
    weights=CAD_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("cad", extra=("boolean",)),
    wordings=WORDINGS,
    make=enclosures,
)
