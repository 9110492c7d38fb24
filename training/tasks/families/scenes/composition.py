"""The `composition` family (domain scenes): Arrange objects by spatial relations: stacks, snowmen,
furnished tables.
"""

from __future__ import annotations

import random

from training.tasks.config import SCENE_WEIGHTS
from training.tasks.recipes.phrases import LEADS, SCENE
from training.tasks.recipes.scene import add_call, item, placed, r05, scene_geometry
from training.tasks.spec import Family, TaskSpec
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap

REL_TOL = 0.03


def _stack(rng: random.Random):
    x, y = r05(rng.uniform(-2, 2)), r05(rng.uniform(-2, 2))
    base = item("Base", "cube", [r05(rng.uniform(1.0, 2.0)) for _ in range(3)], (x, y, 0))
    base["location"][2] = base["dimensions"][2] / 2
    s = r05(rng.uniform(0.3, 0.9))
    top = item("Top", "cube", (s, s, s), (x, y, base["dimensions"][2] + s / 2))
    prompt = (
        f"Put a cube named 'Top' with {s:g} m sides on top of 'Base', centred on it and "
        "touching its top face."
    )
    constraints = placed(top) + [
        {"kind": "on_top", "upper": "Top", "lower": "Base", "tol": REL_TOL},
        {"kind": "aligned", "objects": ["Top", "Base"], "axes": "xy", "tol": 0.05},
        {"kind": "count", "equal": 2},
    ]
    return prompt, [base], [top], constraints


def _snowman(rng: random.Random):
    x, y = r05(rng.uniform(-2, 2)), r05(rng.uniform(-2, 2))
    return _snowman_at(rng, x, y)


def _snowman_at(rng: random.Random, x: float, y: float):
    d1 = r05(rng.uniform(1.0, 1.6))
    d2 = r05(d1 * rng.uniform(0.6, 0.8))
    d3 = r05(d2 * rng.uniform(0.6, 0.8))
    names = ("SnowBase", "SnowBody", "SnowHead")
    zs = (d1 / 2, d1 + d2 / 2, d1 + d2 + d3 / 2)
    parts = [
        item(n, "uv_sphere", (d, d, d), (x, y, z))
        for n, d, z in zip(names, (d1, d2, d3), zs, strict=True)
    ]
    prompt = (
        f"Build a snowman at ({x:g}, {y:g}) m on the ground from three spheres stacked so each "
        f"touches the one below: 'SnowBase' {d1:g} m across, 'SnowBody' {d2:g} m, 'SnowHead' {d3:g} m."
    )
    constraints = [c for p in parts for c in placed(p)] + [
        {"kind": "on_ground", "object": "SnowBase", "tol": REL_TOL},
        {"kind": "on_top", "upper": "SnowBody", "lower": "SnowBase", "tol": REL_TOL},
        {"kind": "on_top", "upper": "SnowHead", "lower": "SnowBody", "tol": REL_TOL},
        {"kind": "aligned", "objects": list(names), "axes": "xy", "tol": 0.05},
    ]
    return prompt, [], parts, constraints


def _table(rng: random.Random):
    w, d = r05(rng.uniform(1.6, 2.4)), r05(rng.uniform(0.9, 1.3))
    t, h = 0.1, r05(rng.uniform(0.7, 0.9))
    leg, inset = 0.1, r05(rng.uniform(0.1, 0.2))
    top = item("Tabletop", "cube", (w, d, t), (0, 0, h - t / 2))
    lx, ly = round(w / 2 - inset, 4), round(d / 2 - inset, 4)
    signs = ((1, 1), (-1, 1), (1, -1), (-1, -1))
    legs = [
        item(
            f"Leg{i + 1}", "cylinder", (leg, leg, round(h - t, 4)), (sx * lx, sy * ly, (h - t) / 2)
        )
        for i, (sx, sy) in enumerate(signs)
    ]
    s = r05(rng.uniform(0.2, 0.35))
    lamp = item("Lamp", "uv_sphere", (s, s, s), (0, d / 4, h + s / 2))
    bw, bh, sp = 0.1, r05(rng.uniform(0.2, 0.3)), r05(rng.uniform(0.2, 0.3))
    books = [
        item(f"Book{i + 1}", "cube", (bw, 0.2, bh), ((i - 1) * sp, -d / 4, h + bh / 2))
        for i in range(3)
    ]
    prompt = (
        f"Model a table: a top 'Tabletop' {w:g} x {d:g} x {t:g} m whose upper face is {h:g} m above "
        f"the ground, centred at the origin; four cylindrical legs 'Leg1'..'Leg4' {leg:g} m thick, "
        f"standing on the ground and touching the top's underside, their axes {inset:g} m in from "
        f"the top's side edges (Leg1 at +x+y, Leg2 -x+y, Leg3 +x-y, Leg4 -x-y); a sphere 'Lamp' "
        f"{s:g} m across resting on the top at (0, {d / 4:g}) m; and three books 'Book1'..'Book3' "
        f"({bw:g} x 0.2 x {bh:g} m boxes) standing on the top in a row along x, {sp:g} m apart "
        f"centre to centre, the middle one at (0, {-d / 4:g}) m."
    )
    constraints = placed(top) + [c for p in legs + [lamp] + books for c in placed(p)]
    constraints += [{"kind": "on_ground", "object": g["name"], "tol": REL_TOL} for g in legs]
    constraints += [
        {"kind": "touching", "a": g["name"], "b": "Tabletop", "tol": REL_TOL} for g in legs
    ]
    constraints += [
        {"kind": "symmetric", "a": "Leg1", "b": "Leg2", "axis": "x", "tol": 0.03},
        {"kind": "symmetric", "a": "Leg1", "b": "Leg3", "axis": "y", "tol": 0.03},
        {"kind": "on_top", "upper": "Lamp", "lower": "Tabletop", "tol": REL_TOL},
        {
            "kind": "evenly_spaced",
            "objects": [b["name"] for b in books],
            "axis": "x",
            "tol": 0.02,
            "spacing": sp,
        },
        {"kind": "aligned", "objects": [b["name"] for b in books], "axes": "yz", "tol": 0.02},
    ] + [{"kind": "on_top", "upper": b["name"], "lower": "Tabletop", "tol": REL_TOL} for b in books]
    return prompt, [], [top, *legs, lamp, *books], constraints


def _bench(rng: random.Random, name: str, y: float, length: float, top: float):
    """A bench: a seat board on two box legs flush with its ends, centred at (0, y)."""
    seat_t, leg_w, depth = 0.06, 0.06, 0.4
    seat = item(name, "cube", (length, depth, seat_t), (0, y, top - seat_t / 2))
    legs = [
        item(
            f"{name}Leg{i + 1}", "cube", (leg_w, depth, round(top - seat_t, 4)),
            (sx * round(length / 2 - leg_w / 2, 4), y, (top - seat_t) / 2),
        )
        for i, sx in enumerate((-1, 1))
    ]  # fmt: skip
    constraints = [c for p in [seat, *legs] for c in placed(p)]
    constraints += [{"kind": "on_ground", "object": g["name"], "tol": REL_TOL} for g in legs]
    constraints += [{"kind": "touching", "a": g["name"], "b": name, "tol": REL_TOL} for g in legs]
    constraints.append(
        {"kind": "aligned", "objects": [name] + [g["name"] for g in legs], "axes": "y", "tol": 0.03}
    )
    return [seat, *legs], constraints


def _dining(rng: random.Random, level: int):
    """Level 4: the furnished table and a snowman beside it. Level 5 adds two benches along the
    table's long sides: every later piece is placed from sizes given for earlier ones."""
    prompt, start, new, constraints = _table(rng)
    w, d = new[0]["dimensions"][0], new[0]["dimensions"][1]
    side = rng.choice((-1, 1))
    sx = round(side * (w / 2 + 1.5), 4)
    s_prompt, _, snow, s_cons = _snowman_at(rng, sx, 0.0)
    prompt += " Beside it, " + s_prompt[0].lower() + s_prompt[1:]
    new, constraints = new + snow, constraints + s_cons
    if level == 5:
        length = r05(rng.uniform(0.7, 0.9) * w)
        top, gap = rng.choice((0.42, 0.45, 0.48)), r05(rng.uniform(0.3, 0.5))
        y = round(d / 2 + gap + 0.2, 4)
        for name, yy in (("BenchA", y), ("BenchB", -y)):
            parts, cons = _bench(rng, name, yy, length, top)
            new, constraints = new + parts, constraints + cons
        prompt += (
            f" Finally put two benches along the table's long sides, 'BenchA' on the +y side and "
            f"'BenchB' on the -y side, each centred on x = 0 with its near edge {gap:g} m from the "
            f"table top's edge: a seat board {length:g} x 0.4 x 0.06 m whose upper face is {top:g} m "
            f"above the ground, on two legs 'BenchALeg1', 'BenchALeg2' (and 'BenchBLeg1', "
            f"'BenchBLeg2'; Leg1 at -x), each a 0.06 x 0.4 m box standing on the ground under the "
            "seat, flush with its ends."
        )
        constraints.append({"kind": "symmetric", "a": "BenchA", "b": "BenchB", "axis": "y", "tol": 0.03})
    constraints.append({"kind": "count", "equal": len(new)})
    return prompt, start, new, constraints


def composition(level: int, rng: random.Random) -> TaskSpec:
    if level >= 4:
        prompt, start, new, constraints = _dining(rng, level)
    else:
        prompt, start, new, constraints = {1: _stack, 2: _snowman, 3: _table}[level](rng)
    return TaskSpec(
        prompt=prompt,
        parameters={"start": start, "objects": new},
        oracle=[add_call(it) for it in new],
        constraints=constraints,
        start=[add_call(it) for it in start],
        geometry=scene_geometry(start + new),
        geometry_min=0.8,
    )


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"standing on the ground", "standing on the ground", "on the ground",
         "resting on the ground", "standing on the floor", "standing on the ground",
         unseen=("planted on the ground",)),
    swap(r"centre to centre", "between centres", "centre to centre", "on centres",
         "measured centre to centre", "centre to centre", unseen=("between neighbouring centres",)),
    swap(r"touching the one below", "touching the one below", "each resting on the one below",
         "sitting on the one below", "in contact with the one below", "touching the one below",
         unseen=("each on the one below without a gap",)),
    *LEADS,
    *SCENE,
))


FAMILY = Family(
    name="composition",
    description="Arrange objects by spatial relations: stacks, snowmen, furnished tables.",
    domain="scenes",
    levels=(1, 2, 3, 4, 5),
    weights=SCENE_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("scene", extra=("parent",)),
    wordings=WORDINGS,
    make=composition,
)
