"""The `turned_parts` family (domain parts): Turn parts by revolving a profile: pins, knobs,
stepped shafts, bottles; then grooves, cross holes, chamfers and several parts.
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.config import CAD_WEIGHTS
from training.tasks.recipes.cad_plan import (
    distance_from,
    fmt,
    join_parts,
    lead,
    spec,
)
from training.tasks.recipes.phrases import CAD, LEADS, N
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


def _profile(kind: str, rng: random.Random, name: str) -> dict[str, Any]:
    """A turned profile: [r, z] points, the words for it, and its plain cylindrical stretches."""
    if kind == "pin":
        rh, hh = rng.choice((7, 8, 9)), rng.choice((3, 4, 5))
        r, ln = rng.choice((3, 4, 5)), rng.choice((30, 40, 50))
        pts = [[0, 0], [rh, 0], [rh, hh], [r, hh], [r, hh + ln], [0, hh + ln]]
        words = (f"a pin '{name}': a head {2 * rh} mm across and {hh} mm tall, then a shank "
                 f"{2 * r} mm across up to Z={hh + ln} mm")
        runs = [(r, hh, hh + ln)]
    elif kind == "knob":
        rk, hk = rng.choice((15, 18, 20)), rng.choice((10, 12))
        rs, ls = rng.choice((5, 6)), rng.choice((12, 15))
        pts = [[0, 0], [rk, 0], [rk, hk], [rs, hk], [rs, hk + ls], [0, hk + ls]]
        words = (f"a knob '{name}': a disc {2 * rk} mm across and {hk} mm thick, then a stem "
                 f"{2 * rs} mm across up to Z={hk + ls} mm")
        runs = [(rk, 0, hk), (rs, hk, hk + ls)]
    elif kind == "bottle":
        r, h = rng.choice((20, 25, 30)), rng.choice((50, 60, 70))
        sh, rn, nh = rng.choice((10, 15)), rng.choice((8, 10)), rng.choice((12, 15))
        top = h + sh + nh
        pts = [[0, 0], [r, 0], [r, h], [rn, h + sh], [rn, top], [0, top]]
        words = (f"a solid bottle '{name}': a body {2 * r} mm across up to Z={h} mm, a conical "
                 f"shoulder up to Z={h + sh} mm and a neck {2 * rn} mm across up to Z={top} mm")
        runs = [(r, 0, h), (rn, h + sh, top)]
    else:  # stepped shaft
        r1 = rng.choice((12, 15, 18))
        r2, r3 = r1 - rng.choice((3, 4)), r1 - rng.choice((6, 7))
        l1, l2, l3 = rng.choice((15, 20)), rng.choice((20, 30, 40)), rng.choice((15, 25))
        z1, z2, z3 = l1, l1 + l2, l1 + l2 + l3
        pts = [[0, 0], [r1, 0], [r1, z1], [r2, z1], [r2, z2], [r3, z2], [r3, z3], [0, z3]]
        words = (f"a stepped shaft '{name}': {2 * r1} mm across up to Z={z1} mm, then {2 * r2} mm "
                 f"up to Z={z2} mm, then {2 * r3} mm up to Z={z3} mm")
        runs = [(r1, 0, z1), (r2, z1, z2), (r3, z2, z3)]
    return {"kind": kind, "points": pts, "words": words, "runs": runs,
            "rmax": max(p[0] for p in pts), "top": pts[-1][1]}


def _turned(level: int, rng: random.Random, name: str, kind: str | None = None):
    """(plan, words, holes) for one turned part of a level's features."""
    prof = _profile(kind or rng.choice(("pin", "knob", "bottle", "shaft")), rng, name)
    plan = [call("cad_revolve", name=name, points=prof["points"])]
    words = [f"{prof['words']}, turned about the Z axis from Z=0"]
    holes: list[tuple[float, int]] = []
    runs = sorted(prof["runs"], key=lambda r: r[2] - r[1], reverse=True)
    if level >= 3:
        r, z0, z1 = runs[0]
        g, dg = 2, rng.choice((1, 1.5))
        zg = z0 + (z1 - z0) // 2 - 1
        cutter = f"{name}_groove"
        plan += [
            call("cad_revolve", name=cutter, points=[[r - dg, zg], [r + 2, zg], [r + 2, zg + g],
                                                     [r - dg, zg + g]]),
            call("boolean", target=name, cutter=cutter, operation="difference"),
        ]
        words.append(f"a groove {g} mm wide from Z={zg} mm, cut down to {fmt(2 * (r - dg))} mm "
                     "across")
    if level >= 4:
        r, z0, z1 = runs[1] if len(runs) > 1 else runs[0]
        zc = z0 + (z1 - z0) // 2 + (6 if len(runs) == 1 else 0)
        dh = rng.choice((3, 4)) if r >= 5 else 2
        cutter = f"{name}_cross"
        plan += [
            call("cad_sweep", name=cutter, path=[[0, -(r + 2), zc], [0, r + 2, zc]], radius=dh / 2),
            call("boolean", target=name, cutter=cutter, operation="difference"),
        ]
        words.append(f"a {dh} mm cross hole along Y through the axis at Z={zc} mm")
        holes.append((dh, 1))
    if level >= 2:
        plan.append(call("cad_chamfer", name=name, edges=">Z", length=1))
        words.append("the top end's edge chamfered 1 mm")
    if level >= 4:
        plan.append(call("cad_chamfer", name=name, edges="<Z", length=1))
        words.append("the bottom edge chamfered 1 mm")
    return plan, words, holes, prof


def turned_parts(level: int, rng: random.Random) -> TaskSpec:
    if level < 5:
        name = rng.choice(("Pin", "Knob", "Shaft", "Spindle", "Part"))
        plan, words, holes, prof = _turned(level, rng, name)
        prompt = f"{lead(rng)} {join_parts(words)}."
        return spec(prompt, plan, [name], {"part": prof["kind"], "level": level},
                    holes={name: holes})
    kinds = rng.sample(("pin", "knob", "bottle", "shaft"), 2)
    a, b = "Part_A", "Part_B"
    plan_a, words_a, holes_a, prof_a = _turned(4, rng, a, kinds[0])
    plan_b, words_b, holes_b, prof_b = _turned(4, rng, b, kinds[1])
    pool = [v for p in prof_a["points"] + prof_b["points"] for v in p]
    dx = distance_from(pool, prof_a["rmax"] + prof_b["rmax"] + 10)
    plan = plan_a + plan_b + [call("transform", name=b, location=[dx / 1000, 0.0, 0.0])]
    prompt = (f"Turn two parts (mm). First {join_parts(words_a)}. Second {join_parts(words_b)}. Then move "
              f"'{b}' so its axis is at X={fmt(dx)} mm, Y=0.")
    return spec(prompt, plan, [a, b], {"parts": kinds, "level": level},
                holes={a: holes_a, b: holes_b})


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"turned about the Z axis from Z=0",
         "revolved about the Z axis, starting at Z=0", "turned around Z from Z=0",
         "a solid of revolution about Z from Z=0", "turned on the Z axis from Z=0",
         "turned about the Z axis from Z=0",
         unseen=("lathe-turned around the Z axis starting at Z=0",)),
    swap(rf"the top end's edge chamfered (?P<c>{N}) mm",
         "the top edge chamfered {c} mm", "a {c} mm chamfer on the top edge",
         "its top edge chamfered {c} mm", "the edge at the top chamfered {c} mm",
         "the top end's edge chamfered {c} mm",
         unseen=("a {c} mm chamfer breaking the top edge",)),
    swap(rf"up to Z=(?P<z>{N}) mm", "as far as Z={z} mm", "to Z={z} mm", "until Z={z} mm",
         "up to Z={z} mm", "up to Z={z} mm", unseen=("reaching Z={z} mm",)),
    *LEADS,
    *CAD,
))


FAMILY = Family(
    name="turned_parts",
    description="Turn parts by revolving a profile: pins, knobs, stepped shafts, bottles; then grooves, "
    "cross holes, chamfers and several parts.",
    domain="parts",
    levels=(1, 2, 3, 4, 5),
    weights=CAD_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("cad", extra=("boolean", "cad_sweep")),
    wordings=WORDINGS,
    make=turned_parts,
)
