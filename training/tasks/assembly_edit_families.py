"""Assemblies and edits (#31): fasteners, hinges, face mates, clearance fits (scene tools,
metres) and dimension, feature and mirror/pattern edits of prepared parts.

Every family builds its start state with ordinary tool calls, and its oracle from the same
numbers the prompt gives; the checkers are constraints (training/tasks/checks.py and the
kinds in training/tasks/fit_checks.py). CAD parts are described as plans of `cad_*` calls
and `cad_script` turns such a plan into the CadQuery script the checker builds as reference,
so the oracle and the reference are one description.
"""

from __future__ import annotations

import math
import random
from typing import Any

from training.tasks import fit_checks  # noqa: F401  (registers the constraint kinds)
from training.tasks.base import TaskSpec, call, family
from training.tasks.config import RELATION_WEIGHTS
from training.tasks.scene_families import add_call, fmt

ASSEMBLY_WEIGHTS = RELATION_WEIGHTS
EDIT_WEIGHTS = ASSEMBLY_WEIGHTS
POS_TOL = 0.01  # metres: a placement a person would call right
SIZE_TOL = 0.02
GUARD = 0.2  # weight of a check on something the task leaves alone


def r2(x: float) -> float:
    return round(x, 2) + 0.0


def r4(x: float) -> float:
    return round(x, 4) + 0.0


def item(name: str, kind: str, dims, loc, rot=(0.0, 0.0, 0.0)) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "dimensions": [r4(float(d)) for d in dims],
        "location": [r4(float(v)) for v in loc],
        "rotation_deg": [float(v) for v in rot],
    }


def add(it: dict[str, Any]) -> dict[str, Any]:
    return add_call(it)


def placed(it: dict[str, Any], weight: float = 1.0, kind: bool = False) -> list[dict[str, Any]]:
    """Where and how big `it` is (tighter than the scene families: parts must fit)."""
    out: list[dict[str, Any]] = [
        {"kind": "position", "object": it["name"], "value": it["location"], "tol": POS_TOL},
        {"kind": "size", "object": it["name"], "value": it["dimensions"], "tol_rel": SIZE_TOL},
    ]
    if any(it["rotation_deg"]):
        out.append(
            {"kind": "rotation", "object": it["name"], "value": it["rotation_deg"], "tol_deg": 2.0}
        )
    if kind:
        out.append({"kind": "shape_kind", "object": it["name"], "primitive": it["kind"]})
    if weight != 1.0:
        out = [{**c, "weight": weight} for c in out]
    return out


def m(x: float) -> str:
    return f"{x:g} m"


def pick_names(rng: random.Random, pool: tuple[str, ...], n: int) -> list[str]:
    return rng.sample(pool, n)


def bbox(it: dict[str, Any]) -> tuple[list[float], list[float]]:
    """Box of an unrotated item."""
    lo = [it["location"][i] - it["dimensions"][i] / 2 for i in range(3)]
    hi = [it["location"][i] + it["dimensions"][i] / 2 for i in range(3)]
    return lo, hi


def drilled(plate: dict[str, Any], holes: list[list[float]], d: float, prefix: str) -> list[dict]:
    """Start calls: a plate and vertical round holes through it (cylinders cut away)."""
    calls = [add(plate)]
    t = plate["dimensions"][2]
    for i, (x, y) in enumerate(holes):
        cut = item(f"{prefix}{i + 1}", "cylinder", (d, d, t + 0.1), (x, y, plate["location"][2]))
        calls += [add(cut), call("boolean", target=plate["name"], cutter=cut["name"],
                                 operation="difference")]
    return calls


# ================================================================== fasteners


def _circle(cx: float, cy: float, radius: float, n: int, start: float = 0.0) -> list[list[float]]:
    return [
        [r4(cx + radius * math.cos(math.radians(start + 360 * k / n))),
         r4(cy + radius * math.sin(math.radians(start + 360 * k / n)))]
        for k in range(n)
    ]


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
        holes = _circle(x0, cy, radius, n_holes, 0.0)
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


@family(
    "fasteners",
    "Bolt stacks of drilled plates: shanks through aligned holes, heads, washers and nuts.",
    levels=(1, 2, 3, 4, 5),
    domain="assemblies",
    weights=ASSEMBLY_WEIGHTS,
)
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


@family(
    "hinges",
    "Hinges: leaves and a pin opened to an angle; knuckles; a box lid hinged at its back edge.",
    levels=(1, 2, 3, 4, 5),
    domain="assemblies",
    held_out=True,  # placement, rotation about an off-centre axis and parenting, together
    weights=ASSEMBLY_WEIGHTS,
)
def hinges(level: int, rng: random.Random) -> TaskSpec:
    return _leaf_hinge(level, rng) if level <= 3 else _lid_hinge(level, rng)


# ================================================================== face mates

FACES = {"top": "+z", "+x": "+x", "+y": "+y", "-x": "-x"}
FACE_WORDS = {"+z": "on top of", "+x": "against the +x side of", "+y": "against the +y side of",
              "-x": "against the -x side of"}
OPPOSITE = {"+": "-", "-": "+"}
MATE_NAMES = ("Riser", "Cap", "Spacer", "Pad", "Block", "Shim", "Stop", "Cleat", "Post", "Lug",
              "Tab", "Rib", "Foot", "Boss")


def _mate(rng: random.Random, target: dict, name: str, face: str, dims: list[float]):
    """Place a box of `dims` on `face` of `target`: flush, bottoms aligned on sides, centred or
    edge-aligned across. Returns the item, the constraints, the sentence."""
    lo, hi = bbox(target)
    k = "xyz".index(face[1])
    loc = [0.0, 0.0, 0.0]
    loc[k] = hi[k] + dims[k] / 2 if face[0] == "+" else lo[k] - dims[k] / 2
    cons = [{"kind": "flush", "a": name, "face_a": OPPOSITE[face[0]] + face[1], "b": target["name"],
             "face_b": face, "tol": 0.003}]
    words = [f"{FACE_WORDS[face]} '{target['name']}' (flush)"]
    centred = []
    tangential = [i for i in range(3) if i != k]
    for i in tangential:
        ax = "xyz"[i]
        if i == 2:  # side mates: bottoms aligned
            loc[2] = lo[2] + dims[2] / 2
            cons.append({"kind": "flush", "a": name, "face_a": "-z", "b": target["name"],
                         "face_b": "-z", "tol": 0.003})
            words.append("bottoms level")
            continue
        how = rng.choice(("centre", "-", "+"))
        if how == "centre":
            loc[i] = (lo[i] + hi[i]) / 2
            cons.append({"kind": "aligned", "objects": [name, target["name"]], "axes": ax,
                         "tol": 0.003})
            centred.append(ax)
        else:
            loc[i] = lo[i] + dims[i] / 2 if how == "-" else hi[i] - dims[i] / 2
            cons.append({"kind": "flush", "a": name, "face_a": how + ax, "b": target["name"],
                         "face_b": how + ax, "tol": 0.003})
            words.append(f"its {how}{ax} face flush with the {how}{ax} face of '{target['name']}'")
    if centred:
        words.insert(1, "centred on it" + ("" if len(centred) == 2 else f" in {centred[0]}"))
    it = item(name, "cube", dims, loc)
    text = f"a box '{name}' {fmt(it['dimensions'])} " + ", ".join(words)
    return it, cons + placed(it), text


def _dowel(a: dict, b: dict, face: str, name: str) -> dict:
    """A dowel across the contact between `b` and the face `face` of `a`: centred on the
    contact patch, perpendicular to it, half in each part."""
    la, ha = bbox(a)
    lb, hb = bbox(b)
    k = "xyz".index(face[1])
    loc = [((max(la[i], lb[i]) + min(ha[i], hb[i])) / 2) for i in range(3)]
    loc[k] = ha[k] if face[0] == "+" else la[k]
    rot = {0: (0, 90, 0), 1: (90, 0, 0), 2: (0, 0, 0)}[k]
    return item(name, "cylinder", (0.04, 0.04, 0.1), loc, rot)


@family(
    "face_mates",
    "Mate parts face to face: on top, against a side, flush edges or centred; chains and dowels.",
    levels=(1, 2, 3, 4, 5),
    domain="assemblies",
    weights=ASSEMBLY_WEIGHTS,
)
def face_mates(level: int, rng: random.Random) -> TaskSpec:
    n = {1: 1, 2: 2, 3: 4, 4: 6, 5: 8}[level]
    base_dims = [r2(rng.uniform(0.9, 1.4)), r2(rng.uniform(0.7, 1.1)), r2(rng.uniform(0.3, 0.5))]
    base = item("Base", "cube", base_dims,
                (r2(rng.uniform(-1, 1)), r2(rng.uniform(-1, 1)), base_dims[2] / 2))
    names = rng.sample(MATE_NAMES, n)
    placed_items, oracle, cons, texts = [base], [], placed(base, GUARD), []
    for j, name in enumerate(names):
        # L1-L2 mate onto the base; from L3 a chain, each part onto the one before.
        target = base if level <= 2 else placed_items[-1]
        face = "+z" if level == 1 else rng.choice(("+z", "+x", "+y") if level > 2 else
                                                  ("+z", "+x", "+y", "-x"))
        dims = [r2(max(0.12, target["dimensions"][i] * rng.uniform(0.6, 0.9))) for i in range(3)]
        it, c, text = _mate(rng, target, name, face, dims)
        placed_items.append(it)
        oracle.append(add(it))
        cons += c
        if level == 5:
            d = _dowel(target, it, face, f"Dowel{j + 1}")
            if j > 0:  # the first part sits on the base with no dowel: 8 parts, 7 dowels
                oracle.append(add(d))
                cons += placed(d)
                text += f", joined to '{target['name']}' by a dowel '{d['name']}'"
        texts.append(text)
    if level == 5:
        lead = ("Build the stack in order, each part onto the one before: ")
        tail = (" Each dowel is a cylinder 0.04 m across and 0.1 m long, centred on the contact "
                "patch between the two parts, across the contact face, half in each part.")
    else:
        lead, tail = ("Add " if level <= 2 else "Build in order: "), ""
    cons.append({"kind": "count", "equal": 1 + len(oracle)})
    prompt = (f"'Base' is a box {fmt(base['dimensions'])} centred at {fmt(base['location'])}. "
              + lead + "; ".join(texts) + "." + tail)
    return TaskSpec(prompt=prompt, parameters={"parts": n}, oracle=oracle, constraints=cons,
                    start=[add(base)])


# ================================================================== clearance fits


def _bore_fits(level: int, rng: random.Random) -> TaskSpec:
    a, b, h = r2(rng.uniform(0.6, 1.0)), r2(rng.uniform(0.4, 0.6)), r2(rng.uniform(0.2, 0.4))
    cx, cy = r2(rng.uniform(-1, 1)), r2(rng.uniform(-1, 1))
    housing = item("Housing", "cube", (a, b, h), (cx, cy, h / 2))
    fits = [("Shaft", "clearance", rng.choice((0.002, 0.003, 0.005)))]
    if level == 2:
        fits.append(("Pin", "interference", rng.choice((0.001, 0.002))))
    xs = [cx] if level == 1 else [r4(cx - a / 4), r4(cx + a / 4)]
    start, oracle, cons, texts = [], [], placed(housing, GUARD), []
    bores = []
    for (name, kind, c), x in zip(fits, xs, strict=True):
        d = rng.choice((0.08, 0.1, 0.12))
        bores.append((x, d))
        ds = r4(d - 2 * c if kind == "clearance" else d + 2 * c)
        length = r2(h + rng.uniform(0.1, 0.3))
        part = item(name, "cylinder", (ds, ds, length), (x, cy, length / 2))
        oracle.append(add(part))
        cons += placed(part)
        g = c if kind == "clearance" else -c
        cavity = [[r4(x - d / 2), r4(cy - d / 2), 0.0], [r4(x + d / 2), r4(cy + d / 2), h]]
        cons.append({"kind": "cavity_gap", "object": name, "cavity": cavity,
                     "faces": {f: [r4(g - 0.0005), r4(g + 0.0005)] for f in ("+x", "-x", "+y", "-y")}})
        cons.append({"kind": "on_ground", "object": name, "tol": 0.002})
        what = (f"a radial clearance of {m(c)}" if kind == "clearance"
                else f"an interference (press fit) of {m(c)} on the radius")
        texts.append(f"a round {name.lower()} '{name}' {m(length)} long standing on the ground in "
                     f"the {m(d)} bore at ({x:g}, {cy:g}) m, coaxial with it, with {what}")
    start = [add(housing)]
    for i, (x, d) in enumerate(bores):
        cut = item(f"Bore{i + 1}", "cylinder", (d, d, h + 0.1), (x, cy, h / 2))
        start += [add(cut), call("boolean", target="Housing", cutter=cut["name"],
                                 operation="difference")]
    prompt = (f"'Housing' ({m(a)} x {m(b)} x {m(h)}, on the ground) has "
              f"{'vertical through bores' if len(bores) > 1 else 'a vertical through bore'}. Put "
              + "; and ".join(texts) + ".")
    return TaskSpec(prompt=prompt, parameters={"fits": fits}, oracle=oracle, constraints=cons,
                    start=start)


def _drawers(level: int, rng: random.Random) -> TaskSpec:
    n = {3: 1, 4: 2, 5: 3}[level]
    cx, cy = r2(rng.uniform(-1, 1)), r2(rng.uniform(-1, 1))
    w = 0.03
    width, depth = r2(rng.uniform(0.6, 0.9)), r2(rng.uniform(0.5, 0.7))
    hc = r2(rng.uniform(0.18, 0.26))
    height = r4((n + 1) * w + n * hc)
    c = rng.choice((0.003, 0.005, 0.008))
    front_y = r4(cy - depth / 2)
    cabinet = item("Cabinet", "cube", (width, depth, height), (cx, cy, height / 2))
    start = [add(cabinet)]
    cons = placed(cabinet, GUARD)
    oracle: list[dict[str, Any]] = []
    cav_w, cav_d = r4(width - 2 * w), r4(depth - w)
    dw = 0.015  # drawer walls
    for i in range(n):
        z0 = r4(w + i * (hc + w))
        cut = item(f"Opening{i + 1}", "cube", (cav_w, cav_d + 0.1, hc),
                   (cx, front_y + (cav_d - 0.1) / 2, z0 + hc / 2))
        start += [add(cut), call("boolean", target="Cabinet", cutter=cut["name"],
                                 operation="difference")]
        lo = [r4(cx - cav_w / 2), front_y, z0]
        hi = [r4(cx + cav_w / 2), r4(front_y + cav_d), r4(z0 + hc)]
        dr = item(f"Drawer{i + 1}", "cube", (cav_w - 2 * c, cav_d - c, hc - c),
                  (cx, front_y + (cav_d - c) / 2, z0 + (hc - c) / 2))
        inner = item(f"Drawer{i + 1}Inside", "cube",
                     (dr["dimensions"][0] - 2 * dw, dr["dimensions"][1] - 2 * dw, hc),
                     (cx, dr["location"][1], z0 + dw + hc / 2))
        front = item(f"Front{i + 1}", "cube", (width - 0.02, 0.02, hc + w - 0.01),
                     (cx, front_y - 0.01, z0 + hc / 2))
        handle = item(f"Handle{i + 1}", "cube", (0.16, 0.03, 0.03),
                      (cx, front_y - 0.02 - 0.015, z0 + hc / 2))
        oracle += [add(dr), add(inner), call("boolean", target=dr["name"], cutter=inner["name"],
                                             operation="difference"), add(front), add(handle)]
        dd = dr["dimensions"]
        volume = dd[0] * dd[1] * dd[2] - (dd[0] - 2 * dw) * (dd[1] - 2 * dw) * (dd[2] - dw)
        band = [r4(c - 0.0005), r4(c + 0.0005)]
        cons += placed(dr) + placed(front) + placed(handle) + [
            {"kind": "cavity_gap", "object": dr["name"], "cavity": [lo, hi],
             "faces": {"+x": band, "-x": band, "+z": band, "+y": band,
                       "-z": [-0.0005, 0.0005], "-y": [-0.0005, 0.0005]}},
            {"kind": "mesh_volume", "object": dr["name"], "value": round(volume, 7),
             "tol_rel": 0.01},
            {"kind": "absent", "object": inner["name"]},
            {"kind": "flush", "a": front["name"], "face_a": "+y", "b": "Cabinet", "face_b": "-y",
             "tol": 0.002},
            {"kind": "flush", "a": handle["name"], "face_a": "+y", "b": front["name"],
             "face_b": "-y", "tol": 0.002},
        ]
    cons.append({"kind": "count", "equal": 1 + 3 * n})
    bottoms = ", ".join(f"{r4(w + i * (hc + w)):g}" for i in range(n))
    prompt = (
        f"'Cabinet' ({m(width)} wide, {m(depth)} deep, {m(height)} tall, centred at ({cx:g}, "
        f"{cy:g}) m on the ground) has {n} opening{'s' if n > 1 else ''} in its front (-y) face, "
        f"each {m(cav_w)} wide, {m(hc)} tall and {m(cav_d)} deep, bottoms at z {bottoms} m. "
        f"For each opening i, model a drawer 'Draweri': an open-topped box with {m(dw)} walls "
        f"and floor, standing on the opening's floor, its front flush with the cabinet's front "
        f"face, with a clearance of {m(c)} to the sides, the top and the back; a front panel "
        f"'Fronti' ({m(width - 0.02)} x 0.02 x {m(hc + w - 0.01)}) centred on the opening, its back "
        f"against the cabinet's front; and a handle 'Handlei' (0.16 x 0.03 x 0.03 m) centred on "
        f"the panel's front. Hollow each drawer with a boolean difference."
    )
    return TaskSpec(prompt=prompt, parameters={"drawers": n, "clearance": c}, oracle=oracle,
                    constraints=cons, start=start)


@family(
    "clearance_fits",
    "Fit parts with a stated clearance or interference: shafts and pins in bores, drawers.",
    levels=(1, 2, 3, 4, 5),
    domain="assemblies",
    weights=ASSEMBLY_WEIGHTS,
)
def clearance_fits(level: int, rng: random.Random) -> TaskSpec:
    return _bore_fits(level, rng) if level <= 2 else _drawers(level, rng)


# ================================================================== CAD edits

FACE_WP = 'workplane(centerOption="ProjectedOrigin", origin=(0, 0, 0))'


def _pts(points) -> str:
    return "[" + ", ".join(f"({x!r}, {y!r})" for x, y in points) + "]"


def cad_script(plan: list[dict[str, Any]]) -> str:
    """The CadQuery script that builds what a plan of `cad_*` calls on one part builds (the
    same operations as tools/worker/cad.py), for the checker's reference part."""
    lines = ["import cadquery as cq", "s = None"]
    for step in plan:
        t, a = step["tool"], step["args"]
        if t == "cad_box":
            lines.append(f"s = cq.Workplane().box({a['length']!r}, {a['width']!r}, {a['height']!r}, "
                         "centered=(True, True, False)).val()")
        elif t == "cad_cylinder":
            lines.append(f"s = cq.Workplane().circle({a['radius']!r}).extrude({a['height']!r}).val()")
        elif t == "cad_hole":
            wp = (f"cq.Workplane('XY').add(s).faces({a.get('face', '>Z')!r}).{FACE_WP}"
                  f".pushPoints({_pts(a.get('positions', [[0, 0]]))})")
            if a.get("counterbore_diameter"):
                lines.append(f"s = {wp}.cboreHole({a['diameter']!r}, {a['counterbore_diameter']!r}, "
                             f"{a['counterbore_depth']!r}, {a.get('depth')!r}).val()")
            else:
                lines.append(f"s = {wp}.hole({a['diameter']!r}, {a.get('depth')!r}).val()")
        elif t == "cad_fillet":
            lines.append(f"s = cq.Workplane('XY').add(s).edges({a['edges']!r}).fillet({a['radius']!r}).val()")
        elif t == "cad_chamfer":
            lines.append(f"s = cq.Workplane('XY').add(s).edges({a['edges']!r}).chamfer({a['length']!r}).val()")
        elif t == "cad_sketch_extrude":
            p = a["profile"]
            assert p["kind"] == "circle", p
            lines.append(f"s = s.fuse(cq.Workplane('XY', origin=(0, 0, {a.get('at_z', 0.0)!r}))"
                         f".circle({p['radius']!r}).extrude({a['distance']!r}).val()).clean()")
        elif t in ("cad_pattern", "cad_query"):
            continue
        else:
            raise ValueError(f"cad_script: no translation for {t}")
    lines.append("result = s")
    return "\n".join(lines) + "\n"


def _grid(count_x: int, count_y: int, sx: float, sy: float) -> list[list[float]]:
    return [[round((i - (count_x - 1) / 2) * sx, 9) + 0.0, round((j - (count_y - 1) / 2) * sy, 9) + 0.0]
            for j in range(count_y) for i in range(count_x)]


def _bolt_circle(n: int, radius: float) -> list[list[float]]:
    return [[round(radius * math.cos(2 * math.pi * k / n), 9) + 0.0,
             round(radius * math.sin(2 * math.pi * k / n), 9) + 0.0] for k in range(n)]


def _where(pts) -> str:
    return ", ".join(f"({x:g}, {y:g})" for x, y in pts) + " mm"


class CadPart:
    """A part as parameters; `plan()` the `cad_*` calls that build it, `text()` its description."""

    def __init__(self, kind: str, name: str, **p: Any):
        self.kind, self.name, self.p = kind, name, dict(p)

    def with_(self, **changes: Any) -> CadPart:
        return CadPart(self.kind, self.name, **{**self.p, **changes})

    def plan(self) -> list[dict[str, Any]]:
        p, n = self.p, self.name
        if self.kind == "plate":
            return [call("cad_box", name=n, length=p["L"], width=p["W"], height=p["T"]),
                    call("cad_hole", name=n, diameter=p["d"], positions=_grid(2, 2, p["sx"], p["sy"]))]
        if self.kind == "block":
            return [call("cad_box", name=n, length=p["L"], width=p["W"], height=p["T"]),
                    call("cad_fillet", name=n, edges="|Z", radius=p["r"]),
                    call("cad_hole", name=n, diameter=p["d"], positions=_grid(p["nx"], 1, p["sx"], 1))]
        if self.kind == "flange":
            return [call("cad_cylinder", name=n, radius=p["D"] / 2, height=p["T"]),
                    call("cad_hole", name=n, diameter=p["bore"], positions=[[0.0, 0.0]]),
                    call("cad_pattern", kind="circle", count=p["n"], radius=p["R"]),
                    call("cad_hole", name=n, diameter=p["db"], positions=_bolt_circle(p["n"], p["R"]))]
        if self.kind == "mount":
            return [call("cad_box", name=n, length=p["L"], width=p["W"], height=p["T"]),
                    call("cad_fillet", name=n, edges="|Z", radius=p["r"]),
                    call("cad_chamfer", name=n, edges=">Z", length=1),
                    call("cad_pattern", kind="grid", count_x=2, count_y=2,
                         spacing_x=p["L"] - 20, spacing_y=p["W"] - 20),
                    call("cad_hole", name=n, diameter=p["d"], positions=_grid(2, 2, p["L"] - 20, p["W"] - 20)),
                    call("cad_hole", name=n, diameter=p["bore"], positions=[[0.0, 0.0]],
                         counterbore_diameter=p["cb"], counterbore_depth=p["cbd"]),
                    call("cad_pattern", kind="circle", count=p["n"], radius=p["R"]),
                    call("cad_hole", name=n, diameter=p["db"], positions=_bolt_circle(p["n"], p["R"]))]
        raise ValueError(self.kind)

    def text(self) -> str:
        p, n = self.p, self.name
        if self.kind == "plate":
            return (f"'{n}': a plate {p['L']:g} x {p['W']:g} x {p['T']:g} mm (centred in XY, bottom on "
                    f"Z=0) with four {p['d']:g} mm through holes at (±{p['sx'] / 2:g}, ±{p['sy'] / 2:g}) mm")
        if self.kind == "block":
            return (f"'{n}': a block {p['L']:g} x {p['W']:g} x {p['T']:g} mm (centred in XY, bottom on "
                    f"Z=0), vertical edges filleted r={p['r']:g} mm, {p['nx']} through holes "
                    f"{p['d']:g} mm across at {_where(_grid(p['nx'], 1, p['sx'], 1))}")
        if self.kind == "flange":
            return (f"'{n}': a round flange {p['D']:g} mm across and {p['T']:g} mm thick (on the Z axis, "
                    f"bottom on Z=0) with a {p['bore']:g} mm centre bore and {p['n']} holes {p['db']:g} mm "
                    f"across on a {2 * p['R']:g} mm bolt circle, the first on +X")
        if self.kind == "mount":
            return (f"'{n}': a mounting plate {p['L']:g} x {p['W']:g} x {p['T']:g} mm (centred in XY, "
                    f"bottom on Z=0), vertical edges filleted r={p['r']:g} mm then the top edges "
                    f"chamfered 1 mm, four {p['d']:g} mm holes at (±{(p['L'] - 20) / 2:g}, "
                    f"±{(p['W'] - 20) / 2:g}) mm, a {p['bore']:g} mm centre hole counterbored "
                    f"{p['cb']:g} mm across and {p['cbd']:g} mm deep, and {p['n']} holes {p['db']:g} mm "
                    f"across on a {2 * p['R']:g} mm bolt circle (first on +X)")
        raise ValueError(self.kind)

    def holes(self) -> list[tuple[float, int]]:
        p = self.p
        return {"plate": [(p.get("d"), 4)], "block": [(p.get("d"), p.get("nx"))],
                "flange": [(p.get("bore"), 1), (p.get("db"), p.get("n"))],
                "mount": [(p.get("d"), 4), (p.get("bore"), 1), (p.get("db"), p.get("n"))]}[self.kind]


def random_part(kind: str, name: str, rng: random.Random) -> CadPart:
    # Fillet radii stay clear of every hole radius (before and after an edit): the `holes`
    # check counts cylindrical faces of a radius, and a fillet is one.
    if kind == "plate":
        L, W = rng.choice((80, 100, 120)), rng.choice((50, 60, 70))
        d = rng.choice((5, 6, 8))
        return CadPart(kind, name, L=L, W=W, T=rng.choice((5, 6, 8)), d=d, sx=L - 4 * d, sy=W - 4 * d)
    if kind == "block":
        L = rng.choice((80, 100, 120))
        return CadPart(kind, name, L=L, W=rng.choice((40, 50)), T=rng.choice((15, 20, 25)),
                       r=rng.choice((8, 10)), d=rng.choice((6, 8, 10)), nx=rng.choice((2, 3)),
                       sx=L // 3)
    if kind == "flange":
        D = rng.choice((70, 80, 90))
        return CadPart(kind, name, D=D, T=rng.choice((8, 10, 12)), bore=rng.choice((20, 24, 28)),
                       n=rng.choice((4, 6)), db=rng.choice((5, 6)), R=round((D / 2 + 14) / 2, 3))
    if kind == "mount":
        return CadPart(kind, name, L=rng.choice((100, 120)), W=rng.choice((70, 80)),
                       T=rng.choice((10, 12)), r=rng.choice((9, 11)), d=6, bore=10, cb=16, cbd=4,
                       n=rng.choice((4, 6)), db=4, R=rng.choice((18, 20)))
    raise ValueError(kind)


def part_checks(part: CadPart, location_m=(0.0, 0.0, 0.0), weight: float = 1.0) -> list[dict]:
    """The part is exactly `part` where it should be, and has its holes."""
    loc = [round(v * 1000, 6) for v in location_m]
    out = [{"kind": "part_at", "object": part.name, "script": cad_script(part.plan()),
            "location_mm": loc}]
    out += [{"kind": "holes", "object": part.name, "diameter": d, "count": c}
            for d, c in part.holes()]
    return [{**c, "weight": weight} for c in out] if weight != 1.0 else out


def _place(name: str, loc) -> list[dict[str, Any]]:
    return [call("transform", name=name, location=list(loc))] if any(loc) else []


# One edit per part kind: (parameter changes, what the prompt says). Each keeps the part valid.
def _edit(part: CadPart, rng: random.Random, which: str | None = None) -> tuple[CadPart, str]:
    p = part.p
    k = part.kind
    choices = {
        "plate": ["d", "T", "L"],
        "block": ["d", "T", "L"],
        "flange": ["bore", "D", "n"],
        "mount": ["T", "db", "bore"],
    }[k]
    what = which or rng.choice(choices)
    if what == "d":
        new = p["d"] + rng.choice((1, 2))
        return part.with_(d=new), f"make its {p['d']:g} mm holes {new:g} mm"
    if what == "T":
        new = p["T"] + rng.choice((-2, 2, 4))
        return part.with_(T=new), f"change its thickness from {p['T']:g} to {new:g} mm"
    if what == "L":
        new = p["L"] + rng.choice((20, -20))
        changes: dict[str, Any] = {"L": new}
        text = f"change its length (x) from {p['L']:g} to {new:g} mm"
        if k == "plate":
            changes["sx"] = new - 4 * p["d"]
            text += f", the holes moving with the ends to x = ±{(new - 4 * p['d']) / 2:g} mm"
        else:
            text += ", the holes staying where they are"
        return part.with_(**changes), text
    if what == "bore":
        new = p["bore"] + rng.choice((2, 4))
        return part.with_(bore=new), f"open its {p['bore']:g} mm centre hole to {new:g} mm"
    if what == "D":
        new = p["D"] + 10
        return part.with_(D=new), f"make it {new:g} mm across instead of {p['D']:g} mm"
    if what == "n":
        new = 8 if p["n"] != 8 else 6
        return part.with_(n=new), f"give it {new} bolt holes instead of {p['n']} (same circle)"
    if what == "db":
        new = p["db"] + 1
        return part.with_(db=new), f"make its {p['db']:g} mm bolt-circle holes {new:g} mm"
    raise ValueError(what)


def _edit_plan(old: CadPart, new: CadPart) -> list[dict[str, Any]]:
    """The fewest calls from `old` to `new`: a bigger hole is drilled over the old one; any
    other change rebuilds the part (the rebuild keeps its placement)."""
    diff = [k for k in new.p if new.p[k] != old.p[k]]
    if diff == ["d"] and new.p["d"] > old.p["d"] and old.kind in ("plate", "block"):
        return [new.plan()[-1]]
    if diff == ["bore"] and old.kind == "flange":
        return [new.plan()[1]]
    if diff == ["db"] and old.kind == "mount":
        return new.plan()[-2:]
    return new.plan()


@family(
    "dimension_edits",
    "Change one dimension of a prepared CAD part (a hole, a length, a thickness), keep the rest.",
    levels=(1, 2, 3, 4, 5),
    domain="edits",
    weights=EDIT_WEIGHTS,
)
def dimension_edits(level: int, rng: random.Random) -> TaskSpec:
    if level == 1:
        jobs = [(rng.choice(("plate", "block")), "d")]
        keep: list[str] = []
    elif level == 2:
        jobs = [("plate", rng.choice(("T", "L")))]
        keep = []
    elif level == 3:
        jobs = [(rng.choice(("block", "flange")), None)]
        keep = []
        if jobs[0][0] == "block":
            jobs = [("block", rng.choice(("T", "L")))]
        else:
            jobs = [("flange", rng.choice(("D", "n")))]
    elif level == 4:
        jobs = [("plate", rng.choice(("T", "L"))), ("flange", rng.choice(("D", "n")))]
        keep = ["block"]
    else:
        jobs = [("mount", "T"), ("flange", rng.choice(("D", "n"))),
                ("block", rng.choice(("T", "L"))), ("plate", rng.choice(("T", "L"))),
                ("cover", rng.choice(("T", "L")))]
        keep = ["disc"]
    names = {"plate": "Plate", "block": "Block", "flange": "Flange", "mount": "Mount",
             "cover": "Cover", "disc": "Disc"}
    shapes = {"cover": "plate", "disc": "flange"}  # a second plate, a second flange
    kinds = [k for k, _ in jobs] + keep
    spots = [(0.0, 0.0, 0.0), (0.2, 0.0, 0.0), (0.0, 0.2, 0.0), (0.2, 0.2, 0.0), (0.4, 0.0, 0.0),
             (0.4, 0.2, 0.0)]
    start, oracle, cons, texts, listing = [], [], [], [], []
    for i, kind in enumerate(kinds):
        part = random_part(shapes.get(kind, kind), names[kind], rng)
        loc = spots[i] if len(kinds) > 1 else (0.0, 0.0, 0.0)
        start += part.plan() + _place(part.name, loc)
        where = f" (placed at {fmt(loc)})" if any(loc) else ""
        listing.append(part.text() + where)
        if i < len(jobs):
            new, text = _edit(part, rng, jobs[i][1])
            oracle += _edit_plan(part, new)
            cons += part_checks(new, loc)
            texts.append(f"in '{part.name}', {text}")
        else:
            cons += part_checks(part, loc, GUARD)
    cons.append({"kind": "count", "equal": len(kinds)})
    prompt = ("The scene holds " + "; ".join(listing) + ". Edit it: " + "; ".join(texts)
              + ". Keep every other dimension, feature and placement as it is.")
    return TaskSpec(prompt=prompt, parameters={"parts": kinds, "edits": texts}, oracle=oracle,
                    constraints=cons, start=start)


def _features(base: CadPart, level: int, rng: random.Random):
    """Feature calls on the plain block `base` (the start), in order, their descriptions and
    the holes the finished part has: level 1 one feature; later ones fillets and chamfers
    first, then a boss with a hole through its centre and holes around it, then corner holes."""
    p, n = base.p, base.name
    calls: list[dict[str, Any]] = []
    texts: list[str] = []
    holes: list[tuple[float, int]] = []
    sx, sy = p["L"] - 20, p["W"] - 20
    if level == 1:
        which = rng.choice(("hole", "fillet", "chamfer"))
        if which == "hole":
            d = rng.choice((5, 6, 8))
            pts = [[rng.choice((-1, 1)) * sx / 2, rng.choice((-1, 1)) * sy / 2]]
            calls.append(call("cad_hole", name=n, diameter=d, positions=pts))
            texts.append(f"drill a {d} mm through hole at {_where(pts)}")
            holes.append((d, 1))
        elif which == "fillet":
            r = rng.choice((5, 6, 8))
            calls.append(call("cad_fillet", name=n, edges="|Z", radius=r))
            texts.append(f"round its four vertical edges with r={r} mm")
        else:
            c = rng.choice((1, 1.5, 2))
            calls.append(call("cad_chamfer", name=n, edges="<Z", length=c))
            texts.append(f"chamfer its bottom edges {c:g} mm")
        return calls, texts, holes
    r = rng.choice((5, 9))  # no hole, pocket, counterbore or boss has these radii
    calls.append(call("cad_fillet", name=n, edges="|Z", radius=r))
    texts.append(f"round its four vertical edges with r={r} mm")
    if level >= 3:
        c = rng.choice((1, 1.5, 2))
        calls.append(call("cad_chamfer", name=n, edges="<Z", length=c))
        texts.append(f"chamfer its bottom edges {c:g} mm")
    if level >= 4:
        rb, hb = rng.choice((10, 12, 14)), rng.choice((5, 6, 8))
        calls.append(call("cad_sketch_extrude", name=n, profile={"kind": "circle", "radius": rb},
                          distance=hb, at_z=p["T"]))
        texts.append(f"add a round boss {2 * rb} mm across and {hb} mm tall centred on the top face")
        dc = rng.choice((6, 8))
        calls.append(call("cad_hole", name=n, diameter=dc, positions=[[0.0, 0.0]],
                          counterbore_diameter=dc + 6, counterbore_depth=3))
        texts.append(f"drill a {dc} mm hole through the boss's centre and the part, counterbored "
                     f"{dc + 6} mm across and 3 mm deep from the boss's top")
        holes += [(dc, 1), (dc + 6, 1)]
        if level >= 5:
            nb, rr, db = rng.choice((4, 6)), rb + 8, rng.choice((4, 5))
            calls += [call("cad_pattern", kind="circle", count=nb, radius=rr),
                      call("cad_hole", name=n, diameter=db, positions=_bolt_circle(nb, rr))]
            texts.append(f"drill {nb} through holes {db} mm across on a {2 * rr} mm circle around "
                         "the boss, the first on +X")
            holes.append((db, nb))
    d = rng.choice((7, 9))
    if level == 2:
        calls.append(call("cad_hole", name=n, diameter=d, positions=[[0.0, 0.0]]))
        texts.append(f"drill a {d} mm through hole in the middle")
        holes.append((d, 1))
    else:
        calls += [call("cad_pattern", kind="grid", count_x=2, count_y=2, spacing_x=sx,
                       spacing_y=sy),
                  call("cad_hole", name=n, diameter=d, positions=_grid(2, 2, sx, sy))]
        texts.append(f"drill four {d} mm through holes at (±{sx / 2:g}, ±{sy / 2:g}) mm")
        holes.append((d, 4))
    if level == 3:
        dp, depth = rng.choice((16, 20)), rng.choice((3, 4))
        calls.append(call("cad_hole", name=n, diameter=dp, depth=depth, positions=[[0.0, 0.0]]))
        texts.append(f"sink a round pocket {dp} mm across and {depth} mm deep in the middle "
                     "of the top face")
        holes.append((dp, 1))
    return calls, texts, holes


@family(
    "feature_edits",
    "Add features to a prepared CAD part: holes, pockets, fillets, chamfers, bosses, patterns.",
    levels=(1, 2, 3, 4, 5),
    domain="edits",
    weights=EDIT_WEIGHTS,
)
def feature_edits(level: int, rng: random.Random) -> TaskSpec:
    names = ["Block", "Plate", "Base"] if level == 5 else [rng.choice(("Block", "Plate", "Base"))]
    spots = [(0.0, 0.0, 0.0), (0.2, 0.0, 0.0), (0.4, 0.0, 0.0)]
    start, oracle, cons, listing, texts = [], [], [], [], []
    for name, loc in zip(names, spots, strict=False):
        base = CadPart("plain", name, L=rng.choice((100, 120)), W=rng.choice((70, 80)),
                       T=rng.choice((8, 10, 12)))
        first = [call("cad_box", name=name, length=base.p["L"], width=base.p["W"],
                      height=base.p["T"])]
        listing.append(f"'{name}', a plain block {base.p['L']} x {base.p['W']} x {base.p['T']} mm "
                       "(centred in XY, bottom on Z=0)" + (f" placed at {fmt(loc)}" if any(loc) else ""))
        start += first + _place(name, loc)
        calls, words, holes = _features(base, level, rng)
        oracle += calls
        texts.append((f"on '{name}': " if len(names) > 1 else "") + ", then ".join(words))
        cons.append({"kind": "part_at", "object": name, "script": cad_script(first + calls),
                     "location_mm": [round(v * 1000, 6) for v in loc]})
        cons += [{"kind": "holes", "object": name, "diameter": d, "count": c} for d, c in holes]
    cons.append({"kind": "count", "equal": len(names)})
    lead = "Add to it, in this order: " if len(names) == 1 else "Add features, in this order, "
    prompt = ("The scene holds " + "; and ".join(listing) + ". " + lead + "; ".join(texts)
              + ". Leave the rest as it is.")
    return TaskSpec(prompt=prompt, parameters={"parts": names}, oracle=oracle,
                    constraints=cons, start=start)


# ================================================================== mirror and pattern edits


def _half_model(rng: random.Random, name: str, x0: float, y0: float):
    """One of a mirrored pair of L-shaped end supports, its origin on the pair's mirror plane
    x = x0: a base slab from x0 + g to x0 + a with an upright lug at its far end. (Off the
    plane, so the mirrored whole is two closed pieces.) Start calls, and the facts."""
    a, b, c = r2(rng.uniform(0.3, 0.5)), r2(rng.uniform(0.3, 0.5)), r2(rng.uniform(0.08, 0.15))
    g = r2(rng.uniform(0.05, 0.12))
    u, h = r2(rng.uniform(0.06, 0.1)), r2(rng.uniform(0.2, 0.4))
    slab = item(name, "cube", (2 * a, b, c), (x0, y0, c / 2))
    cut = item(f"{name}Cut", "cube", (2 * a, b + 0.2, c + 0.2), (x0 - a + g, y0, c / 2))
    lug = item(f"{name}Lug", "cube", (u, b, h), (x0 + a - u / 2, y0, c + h / 2 - 0.01))
    start = [add(slab), add(cut), call("boolean", target=name, cutter=cut["name"],
                                       operation="difference"),
             add(lug), call("boolean", target=name, cutter=lug["name"], operation="union")]
    half_volume = (a - g) * b * c + u * b * (h - 0.01)
    return start, {"a": a, "b": b, "c": c, "g": g, "u": u, "h": h, "volume": half_volume,
                   "x0": x0, "y0": y0}


def _mirror_checks(name: str, f: dict, copies: int = 1, gap: float = 0.0) -> list[dict]:
    width = 2 * f["a"]
    total = copies * width + (copies - 1) * gap
    height = f["c"] + f["h"] - 0.01
    lo_x = f["x0"] - f["a"]
    size = [r4(total), f["b"], r4(height)]
    centre = [r4(lo_x + total / 2), f["y0"], r4(height / 2)]
    lugs = [[r4(lo_x + k * (width + gap) + f["u"] / 2), f["y0"], r4(f["c"] + f["h"] / 2)]
            for k in range(copies)]
    slabs = [[r4(lo_x + k * (width + gap) + (f["a"] - f["g"]) / 2), f["y0"], r4(f["c"] / 2)]
             for k in range(copies)]
    middles = [[r4(lo_x + width / 2 + k * (width + gap)), f["y0"], r4(f["c"] / 2)]
               for k in range(copies)]
    return [
        {"kind": "size", "object": name, "value": size, "tol_rel": SIZE_TOL},
        {"kind": "position", "object": name, "value": centre, "tol": POS_TOL},
        {"kind": "mesh_volume", "object": name, "value": round(2 * copies * f["volume"], 6),
         "tol_rel": 0.01},
        {"kind": "occupancy", "object": name, "filled": lugs + slabs, "empty": middles},
    ]


def _circle_pattern(rng: random.Random, n: int, turn: bool, tag: str = "Post"):
    """A post (or a radial fin when `turn`) at angle 0 on a circle; copies at 360/n steps."""
    cx, cy = r2(rng.uniform(-0.5, 0.5)), r2(rng.uniform(2.0, 2.5))
    radius = r2(rng.uniform(0.5, 0.8))
    if turn:
        dims = (r2(rng.uniform(0.2, 0.3)), 0.04, r2(rng.uniform(0.2, 0.4)))
        kind = "cube"
    else:
        d = r2(rng.uniform(0.1, 0.2))
        dims, kind = (d, d, r2(rng.uniform(0.3, 0.6))), "cylinder"
    pts = _circle(cx, cy, radius, n)
    items = [item(f"{tag}{k + 1}", kind, dims, (x, y, dims[2] / 2),
                  (0, 0, r4(360 * k / n)) if turn else (0, 0, 0))
             for k, (x, y) in enumerate(pts)]
    start = [add(items[0])]
    oracle = []
    for it in items[1:]:
        oracle.append(call("duplicate", name=items[0]["name"], new_name=it["name"],
                           location=it["location"]))
        if turn:
            oracle.append(call("transform", name=it["name"], rotation_deg=it["rotation_deg"]))
    cons = [c for it in items for c in placed(it)]
    what = "radial fin" if turn else "post"
    x0, y0 = items[0]["location"][:2]
    text = (f"'{items[0]['name']}' is a {what} at ({x0:g}, {y0:g}) m on a {m(radius)} radius circle "
            f"whose centre is {m(radius)} from it in -x. "
            f"Pattern it into {n} around that circle, evenly spaced, copies '{tag}2'..'{tag}{n}' "
            f"counter-clockwise")
    text += " each turned to face out like the first (turned 360/n° more each)." if turn else "."
    return start, oracle, cons, text


@family(
    "mirror_pattern_edits",
    "Mirror a prepared half-model, pattern a feature in a row or circle; mirror then pattern.",
    levels=(1, 2, 3, 4, 5),
    domain="edits",
    weights=ASSEMBLY_WEIGHTS,
)
def mirror_pattern_edits(level: int, rng: random.Random) -> TaskSpec:
    start, oracle, cons, texts = [], [], [], []
    n_halves = {1: 1, 2: 1, 3: 0, 4: 2, 5: 3}[level]
    circle = {1: 0, 2: 0, 3: rng.choice((4, 5)), 4: 3, 5: rng.choice((6, 7))}[level]
    if level == 2 and rng.random() < 0.5:
        n_halves, circle = 0, 3
    names = rng.sample(("Bracket", "Clamp", "Saddle", "Yoke", "Cradle"), max(n_halves, 1))
    objects = 0
    for i in range(n_halves):
        name = names[i]
        x0, y0 = float(-3 + 3 * i), r2(rng.uniform(-1.0, 0.0))
        s, f = _half_model(rng, name, x0, y0)
        start += s
        objects += 1
        oracle.append(call("modifier", name=name, kind="mirror", axis="X"))
        text = (f"'{name}' is the right-hand one of a pair of end supports (a base slab with a lug "
                f"at its +x end); its origin is on the pair's mirror plane x = {x0:g} m. Mirror "
                "it across that plane (X) to make the pair, one object")
        copies, gap = 1, 0.0
        if level >= 2 and not (level == 2 and circle):
            copies, gap = rng.choice((2, 3)), r2(rng.uniform(0.05, 0.15))
            if level == 4 or level == 5:
                copies = 2
            offset = round((2 * f["a"] + gap) / (2 * f["a"]), 6)
            oracle.append(call("modifier", name=name, kind="array", count=copies,
                               offset=[offset, 0, 0]))
            text += (f", then repeat the pair {copies} times along +x with {m(gap)} gaps "
                     "between repeats (an array modifier, still one object)")
        texts.append(text + ".")
        cons += _mirror_checks(name, f, copies, gap)
    if circle:
        s, o, c, t = _circle_pattern(rng, circle, turn=level == 5, tag="Fin" if level == 5 else "Post")
        start += s
        oracle += o
        cons += c
        texts.append(t)
        objects += circle
    cons.append({"kind": "count", "equal": objects})
    return TaskSpec(prompt=" ".join(texts), parameters={"halves": n_halves, "circle": circle},
                    oracle=oracle, constraints=cons, start=start)
