"""The `fasteners` family (domain assemblies): Bolt stacks of drilled plates: shanks through
aligned holes, heads, washers and nuts.
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.recipes.assembly import (
    ASSEMBLY_WEIGHTS,
    GUARD,
    add,
    circle_points,
    item,
    m,
    placed,
    r2,
    r4,
)
from training.tasks.recipes.phrases import N
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


def drilled(plate: dict[str, Any], holes: list[list[float]], d: float, prefix: str) -> list[dict]:
    """Start calls: a plate and vertical round holes through it (cylinders cut away)."""
    calls = [add(plate)]
    t = plate["dimensions"][2]
    for i, (x, y) in enumerate(holes):
        cut = item(f"{prefix}{i + 1}", "cylinder", (d, d, t + 0.1), (x, y, plate["location"][2]))
        calls += [add(cut), call("boolean", target=plate["name"], cutter=cut["name"],
                                 operation="difference")]
    return calls


def _joint(rng: random.Random, tag: str, n_plates: int, x0: float, pattern: str, n_holes: int,
           washers: bool, nut: bool):
    """One bolted joint: a stack of drilled plates (start), the bolts the oracle adds, the
    constraints, and the prompt sentence."""
    length, width = r2(rng.uniform(0.8, 1.2)), r2(rng.uniform(0.5, 0.7))
    cy = r2(rng.uniform(-0.5, 0.5))
    base = r2(rng.uniform(0.2, 0.4))  # the stack rests on a fixture: its bottom is this high
    ts = [rng.choice((0.04, 0.05, 0.06, 0.08)) for _ in range(n_plates)]
    dh = rng.choice((0.06, 0.08, 0.1))
    ds = r4(dh - rng.choice((0.01, 0.02)))
    hd, hh, nh = r4(dh + 0.06), rng.choice((0.04, 0.05)), 0.05
    wd, wt = r4(dh + 0.1), 0.01
    names = [f"{tag}Plate{'ABC'[k]}" for k in range(n_plates)]
    if n_plates == 1:
        names = [tag or "Plate"]
    if pattern == "circle":
        radius = r2(min(length, width) * rng.uniform(0.25, 0.32))
        holes = circle_points(x0, cy, radius, n_holes, 0.0)
        where = (f"{n_holes} holes on a {m(radius)} radius circle around ({x0:g}, {cy:g}) m, "
                 "the first on +x")
    else:
        xs = [r4(x0 + (i - (n_holes - 1) / 2) * length / (n_holes + 1)) for i in range(n_holes)]
        holes = [[x, cy] for x in xs]
        where = ("a hole at " if n_holes == 1 else "holes at ") + ", ".join(
            f"({x:g}, {y:g})" for x, y in holes) + " m"
    start, plates, z = [], [], base
    for name, t in zip(names, ts, strict=True):
        plate = item(name, "cube", (length, width, t), (x0, cy, z + t / 2))
        plates.append(plate)
        start += drilled(plate, holes, dh, f"Drill{name}_")
        z = r4(z + t)
    top, bottom = z, base
    protrude = (nh if nut else 0.0) + 0.02
    oracle, cons = [], []
    for p in plates:
        cons += placed(p, GUARD)
    seat = top + (wt if washers else 0.0)
    for i, (x, y) in enumerate(holes):
        bolt = f"{tag}Bolt{i + 1}"
        shank_len = r4(seat - (bottom - protrude))
        shank = item(bolt, "cylinder", (ds, ds, shank_len), (x, y, (seat + bottom - protrude) / 2))
        head = item(f"{bolt}Head", "cylinder", (hd, hd, hh), (x, y, seat + hh / 2))
        parts = [shank]
        if washers:
            parts.append(item(f"{bolt}Washer", "cylinder", (wd, wd, wt), (x, y, top + wt / 2)))
        parts.append(head)
        if nut:
            parts.append(item(f"{bolt}Nut", "cylinder", (hd, hd, nh), (x, y, bottom - nh / 2)))
        oracle += [add(p) for p in parts]
        for p in parts:
            cons += placed(p)
        cons.append({"kind": "in_hole", "object": bolt, "point": [x, y], "hole_diameter": dh,
                     "span": [r4(bottom), r4(top)], "tol": 0.002})
        under = f"{bolt}Washer" if washers else plates[-1]["name"]
        cons.append({"kind": "on_top", "upper": f"{bolt}Head", "lower": under, "tol": 0.003})
        if washers:
            cons.append({"kind": "on_top", "upper": under, "lower": plates[-1]["name"],
                         "tol": 0.003})
        if nut:
            cons.append({"kind": "flush", "a": f"{bolt}Nut", "face_a": "+z",
                         "b": plates[0]["name"], "face_b": "-z", "tol": 0.003})
    stack = (f"'{names[0]}'" if n_plates == 1 else
             " on ".join(f"'{n}'" for n in reversed(names)))
    first = f"{tag}Bolt{'i' if n_holes > 1 else '1'}"
    text = (
        f"{stack} ({'plate' if n_plates == 1 else 'stacked plates'}, top face at z {top:g} m, "
        f"bottom at z {bottom:g} m) {'has' if n_plates == 1 else 'share'} {where}, "
        f"{m(dh)} across. Bolt through {'it' if n_holes == 1 else 'each hole i'}: a shank "
        f"'{first}' {m(ds)} across on the hole's axis, "
        f"from the {'washer' if washers else 'top face'} down to {m(protrude)} below the bottom, "
        f"and a head '{first}Head' {m(hd)} across and {m(hh)} tall "
        f"{'on a washer' if washers else 'seated on the top face'}"
    )
    if washers:
        text += f" ('{first}Washer', {m(wd)} across, {m(wt)} thick, on the top face)"
    if nut:
        text += f"; a nut '{first}Nut' {m(hd)} across, {m(nh)} tall, against the bottom face"
    return start, oracle, cons, text + ".", len(holes)


def fasteners(level: int, rng: random.Random) -> TaskSpec:
    # (plates, pattern, holes, washers, nut) per joint
    if level == 1:
        joints = [(1, "row", 1, False, False)]
    elif level == 2:
        joints = [(2, "row", 1, False, True)]
    elif level == 3:
        joints = [(2, "row", 2, False, True)]
    elif level == 4:
        joints = [(3, "circle", rng.choice((3, 4)), False, True)]
    else:
        joints = [(2, "row", 2, True, True), (3, "circle", rng.choice((3, 4)), False, True)]
    start, oracle, cons, texts, n_bolts = [], [], [], [], 0
    tags = ["J1", "J2"] if len(joints) > 1 else [""]
    xs = [-0.8, 0.8] if len(joints) > 1 else [r2(rng.uniform(-1, 1))]
    for (n_plates, pattern, n_holes, washers, nut), tag, x0 in zip(joints, tags, xs, strict=True):
        s, o, c, t, n = _joint(rng, tag, n_plates, x0, pattern, n_holes, washers, nut)
        start, oracle, cons, n_bolts = start + s, oracle + o, cons + c, n_bolts + n
        texts.append(t)
    if n_bolts > 1:
        texts.append("Number the bolts from 1 in the order the holes are listed.")
    return TaskSpec(
        prompt=" ".join(texts),
        parameters={"joints": len(joints), "bolts": n_bolts},
        oracle=oracle,
        constraints=cons,
        start=start,
    )


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"Bolt through (?P<w>it|each hole i):",
         "Put a bolt through {w}:", "Fit a bolt through {w}:", "Bolt through {w}:",
         "Through {w}, add a bolt:", "Add a bolt through {w}:",
         unseen=("Pass a bolt through {w}:", "Secure it with a bolt through {w}:")),
    swap(r"seated on the top face", "sitting on the top face", "resting on the top face",
         "seated on the top face", "on the top face", "seated on top",
         unseen=("bearing down on the top face",)),
    swap(rf"from the top face down to (?P<d>{N}) m below the bottom",
         "from the top face to {d} m below the bottom",
         "running from the top face down to {d} m below the bottom face",
         "reaching from the top face to {d} m under the bottom",
         "from the top face down to {d} m below the bottom",
         "from the top face down, ending {d} m below the bottom",
         unseen=("sticking out {d} m under the bottom, from the top face down",)),
    swap(r"against the bottom face", "against the bottom face", "tight under the bottom face",
         "up against the bottom face", "against the underside", "against the bottom face",
         unseen=("snug under the bottom face",)),
))


FAMILY = Family(
    name="fasteners",
    description="Bolt stacks of drilled plates: shanks through aligned holes, heads, washers and nuts.",
    domain="assemblies",
    levels=(1, 2, 3, 4, 5),
    weights=ASSEMBLY_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("assembly"),
    wordings=WORDINGS,
    make=fasteners,
)
