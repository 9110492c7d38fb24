"""The `hinges` family (domain assemblies): Hinges: leaves and a pin opened to an angle; knuckles;
a box lid hinged at its back edge.
"""

from __future__ import annotations

import math
import random
from typing import Any

from training.tasks.recipes.assembly import (
    ASSEMBLY_WEIGHTS,
    GUARD,
    add,
    item,
    m,
    placed,
    r2,
    r4,
)
from training.tasks.recipes.phrases import LEADS
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap

# ================================================================== hinges


def _rot_x(p, pivot, deg: float) -> list[float]:
    """Point `p` turned `deg` about the X axis through `pivot` (y, z); x unchanged."""
    a = math.radians(deg)
    y, z = p[1] - pivot[0], p[2] - pivot[1]
    return [r4(p[0]), r4(pivot[0] + y * math.cos(a) - z * math.sin(a)),
            r4(pivot[1] + y * math.sin(a) + z * math.cos(a))]


def _leaf_hinge(level: int, rng: random.Random) -> TaskSpec:
    length, w, t = r2(rng.uniform(0.4, 0.8)), r2(rng.uniform(0.2, 0.3)), 0.02
    x0, ya, za = r2(rng.uniform(-1, 1)), r2(rng.uniform(-1, 1)), r2(rng.uniform(0.4, 0.8))
    angle = float(rng.choice((30, 45, 60, 90, 120, 135, 150)))
    phi = 180.0 - angle  # LeafB's turn about +X from lying flat along +y
    p = 0.04
    leaf_a = item("LeafA", "cube", (length, w, t), (x0, ya - w / 2, za))
    flat_b = item("LeafB", "cube", (length, w, t), (x0, ya + w / 2, za))
    open_b = item("LeafB", "cube", (length, w, t),
                  (x0, ya + w / 2 * math.cos(math.radians(phi)),
                   za + w / 2 * math.sin(math.radians(phi))), (phi, 0, 0))
    pin = item("Pin", "cylinder", (p, p, length), (x0, ya, za), (0, 90, 0))
    cons = placed(leaf_a, GUARD) + placed(open_b)
    geo = (f"'LeafA' ({m(length)} x {m(w)} x {m(t)}) lies flat with its +y edge on the hinge "
           f"axis, a line along x through (y {ya:g}, z {za:g}) m")
    opening = (f"open to {angle:g}° (the angle between the leaves; it swings from 0° closed "
               f"to 180° flat), LeafB turning about the axis above the +y side")
    if level == 1:
        start = [add(leaf_a), add(flat_b), add(pin)]
        oracle = [call("transform", name="LeafB", location=open_b["location"],
                       rotation_deg=open_b["rotation_deg"])]
        cons += placed(pin, GUARD)
        prompt = (f"A hinge: {geo}; 'LeafB' lies flat beside it (180°), 'Pin' is on the axis. "
                  f"Turn LeafB so the hinge is {opening}.")
    elif level == 2:
        start = [add(leaf_a)]
        oracle = [add(pin), add(open_b)]
        cons += placed(pin)
        prompt = (f"{geo}. Add a {m(p)} pin 'Pin' along that axis, as long as the leaf, and a "
                  f"second leaf 'LeafB' of the same size hinged there, {opening}.")
    else:
        k = 0.06
        knuckles = [
            item(f"Knuckle{i + 1}", "cylinder", (k, k, r4(length / 3)),
                 (x0 + (i - 1) * length / 3, ya, za), (0, 90, 0))
            for i in range(3)
        ]
        pin = item("Pin", "cylinder", (0.03, 0.03, r4(length + 0.04)), (x0, ya, za), (0, 90, 0))
        start = [add(leaf_a)]
        oracle = [add(kn) for kn in knuckles] + [add(pin), add(open_b)]
        cons += [c for kn in knuckles for c in placed(kn)] + placed(pin)
        prompt = (f"{geo}. Build the hinge: three knuckles 'Knuckle1'..'Knuckle3', cylinders "
                  f"{m(k)} across, each a third of the leaf's length, end to end along the axis "
                  f"from -x to +x; a pin 'Pin' 0.03 m across and {m(r4(length + 0.04))} long "
                  f"through them; and a leaf 'LeafB' like LeafA, {opening}.")
    adds = sum(1 for c in start + oracle if c["tool"] == "add_primitive")
    cons.append({"kind": "count", "equal": adds})
    return TaskSpec(prompt=prompt, parameters={"angle": angle}, oracle=oracle, constraints=cons,
                    start=start)


def _lid_hinge(level: int, rng: random.Random) -> TaskSpec:
    bx, by, bz = r2(rng.uniform(0.8, 1.2)), r2(rng.uniform(0.5, 0.7)), r2(rng.uniform(0.4, 0.6))
    wall, lt = 0.04, 0.05
    cx, cy = r2(rng.uniform(-1, 1)), r2(rng.uniform(-1, 1))
    limit = float(rng.choice((100, 110, 120)))
    angle = float(rng.choice((30, 45, 60, 75, 90)))
    box = item("Box", "cube", (bx, by, bz), (cx, cy, bz / 2))
    cav = item("BoxCavity", "cube", (bx - 2 * wall, by - 2 * wall, bz), (cx, cy, wall + bz / 2))
    start = [add(box), add(cav), call("boolean", target="Box", cutter="BoxCavity",
                                      operation="difference")]
    lid = item("Lid", "cube", (bx, by, lt), (cx, cy, bz + lt / 2))
    back, t, hw, p = cy + by / 2, 0.01, 0.12, 0.03
    pivot = (r4(back + t / 2), bz)
    n = 2 if level == 4 else 3
    xs = [r4(cx + (i - (n - 1) / 2) * (bx - 2 * hw) / (n - 1)) for i in range(n)]
    oracle: list[dict[str, Any]] = []
    cons = placed(box, GUARD)
    if level == 4:
        start.append(add(lid))
    else:
        oracle.append(add(lid))
    handle = item("Handle", "cube", (0.2, 0.03, 0.03), (cx, cy - by / 2 - 0.015, bz + lt / 2))
    moving = [lid]
    for i, x in enumerate(xs):
        a = item(f"LeafA{i + 1}", "cube", (hw, t, 0.08), (x, back + t / 2, bz - 0.04))
        b = item(f"LeafB{i + 1}", "cube", (hw, t, lt), (x, back + t / 2, bz + lt / 2))
        pin = item(f"Pin{i + 1}", "cylinder", (p, p, hw), (x, pivot[0], pivot[1]), (0, 90, 0))
        oracle += [add(a), add(b), add(pin)]
        cons += placed(a) + placed(pin)
        moving.append(b)
    if level == 5:
        oracle.append(add(handle))
        moving.append(handle)
    oracle += [call("parent", child=mv["name"], parent="Lid") for mv in moving[1:]]
    opened = []
    for mv in moving:
        o = dict(mv, location=_rot_x(mv["location"], pivot, -angle), rotation_deg=[-angle, 0.0, 0.0])
        opened.append(o)
        cons += placed(o)
    oracle.append(call("transform", name="Lid", location=opened[0]["location"],
                       rotation_deg=[-angle, 0.0, 0.0]))
    hinge_text = (
        f"{n} hinges on the back face (y {back:g} m), centred at x = "
        + ", ".join(f"{x:g}" for x in xs) + " m: for hinge i a leaf 'LeafAi' "
        f"({m(hw)} wide, {m(t)} thick, 0.08 m tall) on the box's back face just below the rim, a "
        f"leaf 'LeafBi' ({m(hw)} x {m(t)} x {m(lt)}) on the lid's back face, and a pin 'Pini' "
        f"{m(p)} across and {m(hw)} long along x through (y {pivot[0]:g}, z {bz:g}) m, the hinge axis"
    )
    lid_text = ("the lid 'Lid' lies closed on it" if level == 4 else
                f"first put a lid 'Lid' {m(bx)} x {m(by)} x {m(lt)} closed on top of it")
    prompt = (
        f"'Box' is an open box {m(bx)} x {m(by)} x {m(bz)} centred at ({cx:g}, {cy:g}) m on the "
        f"ground; {lid_text}. Add {hinge_text}."
    )
    if level == 5:
        prompt += (" Add a handle 'Handle' (0.2 x 0.03 x 0.03 m) centred on the lid's front face, "
                   "against it.")
    prompt += (f" Parent the lid's parts to 'Lid', then open the lid {angle:g}° about the hinge "
               f"axis (it opens up to {limit:g}°).")
    cons.append({"kind": "count", "equal": len(start) - 2 + sum(
        1 for c in oracle if c["tool"] == "add_primitive")})
    return TaskSpec(prompt=prompt, parameters={"angle": angle, "hinges": n}, oracle=oracle,
                    constraints=cons, start=start)


def hinges(level: int, rng: random.Random) -> TaskSpec:
    return _leaf_hinge(level, rng) if level <= 3 else _lid_hinge(level, rng)


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"\(the angle between the leaves; it swings from 0° closed to 180° flat\)",
         "(the angle between the leaves: 0° is closed, 180° flat)",
         "(measured between the leaves, from 0° closed to 180° flat)",
         "(angle between the leaves; 0° closed, 180° flat)",
         "(the angle between the leaves, 0° when closed and 180° when flat)",
         "(the angle between the leaves; it swings from 0° closed to 180° flat)",
         unseen=("(0° means folded shut and 180° lying flat, measured between the leaves)",)),
    swap(r"lies flat with its \+y edge on the hinge axis",
         "lies flat, its +y edge on the hinge axis", "lies flat with its +y edge along the hinge axis",
         "is flat, with its +y edge on the hinge axis", "lies flat with the +y edge on the hinge axis",
         "lies flat with its +y edge on the hinge axis",
         unseen=("is lying flat and its +y edge runs along the hinge axis",)),
    *LEADS,
))


FAMILY = Family(
    name="hinges",
    description="Hinges: leaves and a pin opened to an angle; knuckles; a box lid hinged at its back edge.",
    domain="assemblies",
    levels=(1, 2, 3, 4, 5),
    weights=ASSEMBLY_WEIGHTS,
    held_out=True,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("assembly"),
    wordings=WORDINGS,
    make=hinges,
)
