"""Composition with spatial relations (stacks, snowmen, tables) and mesh booleans."""

from __future__ import annotations

import math
import random
from typing import Any

from training.tasks.base import TaskSpec, call
from training.tasks.base import family as register_family
from training.tasks.scene_families import add_call, counted, fmt, placed, r05, scene_geometry
from training.tasks.scene_geometry import SEGMENTS

REL_TOL = 0.03


def item(name: str, kind: str, dims, loc) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "dimensions": [float(d) for d in dims],
        "location": [round(float(v), 4) for v in loc],
        "rotation_deg": [0.0, 0.0, 0.0],
    }


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


@register_family(
    "composition",
    "Arrange objects by spatial relations: stacks, snowmen, furnished tables.",
    levels=(1, 2, 3, 4, 5),
    domain="scenes",
)
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


def polygon_area(radius: float, n: int = SEGMENTS) -> float:
    """Area of Blender's n-gon cylinder section (the real cross-section, not pi r^2)."""
    return n / 2 * radius**2 * math.sin(2 * math.pi / n)


def _array(rng: random.Random) -> TaskSpec:
    """A fence of N posts from one post and an applied array modifier (relative offset)."""
    n = rng.choice((3, 4, 5, 6))
    w, d, h = r05(rng.uniform(0.1, 0.3)), r05(rng.uniform(0.1, 0.3)), r05(rng.uniform(0.8, 1.5))
    gap = r05(rng.uniform(0.3, 0.8))
    x0, y = r05(rng.uniform(-3, 0)), r05(rng.uniform(-2, 2))
    post = item("Fence", "cube", (w, d, h), (x0, y, h / 2))
    length = n * w + (n - 1) * gap
    centres = [round(x0 + i * (w + gap), 4) for i in range(n)]
    posts = [{**post, "location": [cx, y, h / 2], "op": "add"} for cx in centres]
    oracle = [
        add_call(post),
        call(
            "modifier", name="Fence", kind="array", count=n, offset=[round((w + gap) / w, 6), 0, 0]
        ),
    ]
    prompt = (
        f"Make a fence 'Fence' of {n} posts, each a {w:g} x {d:g} x {h:g} m box standing on the "
        f"ground, the first centred at ({x0:g}, {y:g}) m, the rest following along +x with {gap:g} m "
        "gaps between posts. Model one post and repeat it with an array modifier (applied), so "
        "the fence is one object."
    )
    centre = [round(x0 - w / 2 + length / 2, 4), y, h / 2]
    constraints = [
        {"kind": "count", "equal": 1},
        {"kind": "size", "object": "Fence", "value": [round(length, 4), d, h], "tol_rel": 0.02},
        {"kind": "position", "object": "Fence", "value": centre, "tol": 0.05},
        {
            "kind": "mesh_volume",
            "object": "Fence",
            "value": round(n * w * d * h, 6),
            "tol_rel": 0.01,
        },
        {
            "kind": "occupancy",
            "object": "Fence",
            "filled": [[cx, y, h / 2] for cx in centres],
            "empty": [[round(cx + w / 2 + gap / 2, 4), y, h / 2] for cx in centres[:-1]],
        },
    ]
    return TaskSpec(
        prompt=prompt,
        parameters={"posts": n, "post": post, "gap": gap},
        oracle=oracle,
        constraints=constraints,
        geometry={"kind": "scene", "items": posts, "objects": ["Fence"], "per_object": False},
        geometry_min=0.95,
    )


def _machined_block(level: int, rng: random.Random) -> TaskSpec:
    """Level 4: three holes, a notch in the +x end and a boss, all on one block. Level 5 adds a
    second row of two holes either side of the boss: fifteen calls, each placed on the block."""
    a, b, c = r05(rng.uniform(2.0, 3.0)), r05(rng.uniform(1.2, 2.0)), r05(rng.uniform(0.4, 0.8))
    x, y = r05(rng.uniform(-2, 2)), r05(rng.uniform(-2, 2))
    block = item("Block", "cube", (a, b, c), (x, y, c / 2))
    dh = r05(0.5 * min(a / 3, b / 2))
    front = [(round(x + k * a / 3, 4), round(y - b / 4, 4)) for k in (-1, 0, 1)]
    back = [(round(x + k * a / 3, 4), round(y + b / 4, 4)) for k in (-1, 1)] if level == 5 else []
    holes = front + back
    drills = [
        item(f"Drill{i + 1}", "cylinder", (dh, dh, round(c + 0.4, 4)), (hx, hy, c / 2))
        for i, (hx, hy) in enumerate(holes)
    ]
    nd, nw = r05(rng.uniform(0.25, 0.35) * b), rng.choice((0.1, 0.12))  # notch width, depth
    notch = item("Notch", "cube", (round(2 * nw, 4), nd, round(c + 0.4, 4)), (x + a / 2, y, c / 2))
    db = r05(min(rng.uniform(0.3, 0.45) * b, 2 * (a / 3 - dh / 2) - 0.25))
    hb = r05(rng.uniform(0.3, 0.6))
    boss_h = round(hb + c / 2, 4)
    by = round(y + b / 4, 4)
    boss = item("Boss", "cylinder", (db, db, boss_h), (x, by, c / 2 + boss_h / 2))
    oracle = [add_call(block)]
    for d in drills:
        oracle += [add_call(d), call("boolean", target="Block", cutter=d["name"], operation="difference")]
    oracle += [
        add_call(notch),
        call("boolean", target="Block", cutter="Notch", operation="difference"),
        add_call(boss),
        call("boolean", target="Block", cutter="Boss", operation="union"),
    ]
    where = "; ".join(f"({hx:g}, {hy:g}) m" for hx, hy in holes)
    prompt = (
        f"Make a box 'Block' {a:g} x {b:g} x {c:g} m centred at {fmt(block['location'])}. Drill "
        f"{counted(len(holes), 'vertical through hole')} {dh:g} m in diameter at {where} with "
        f"boolean differences (cylinders of {SEGMENTS} segments). Cut a notch {nd:g} m wide (along "
        f"y) and {nw:g} m deep into the middle of the +x end face, through the full height, with "
        f"a box cutter 'Notch'. Then join a cylindrical boss {db:g} m across standing {hb:g} m "
        f"proud of the top at ({x:g}, {by:g}) m with a boolean union. Remove every cutter."
    )
    volume = (
        a * b * c - len(holes) * polygon_area(dh / 2) * c - nw * nd * c
        + polygon_area(db / 2) * hb
    )  # fmt: skip
    items = [{**block, "op": "add"}] + [{**d, "op": "cut"} for d in drills + [notch]]
    items.append({**boss, "op": "add"})
    constraints = [
        {"kind": "count", "equal": 1},
        {"kind": "size", "object": "Block", "value": [a, b, round(c + hb, 4)], "tol_rel": 0.02},
        {"kind": "mesh_volume", "object": "Block", "value": round(volume, 5), "tol_rel": 0.005},
    ] + [{"kind": "absent", "object": d["name"]} for d in drills + [notch]]
    constraints.append(
        {
            "kind": "occupancy",
            "object": "Block",
            "empty": [[hx, hy, c / 2] for hx, hy in holes]
            + [[round(x + a / 2 - nw / 2, 4), y, c / 2]],
            "filled": [[x, by, round(c + hb / 2, 4)], [round(x + a / 2 - nw - 0.05, 4), y, c / 2]],
        }
    )
    return TaskSpec(
        prompt=prompt,
        parameters={"block": block, "holes": drills, "notch": notch, "boss": boss,
                    "expected_volume": volume},  # fmt: skip
        oracle=oracle,
        constraints=constraints,
        geometry={"kind": "scene", "items": items, "objects": ["Block"], "per_object": False},
        geometry_min=0.95,
    )


@register_family(
    "booleans",
    "Cut holes and join parts with mesh booleans; repeat parts with an array modifier.",
    levels=(1, 2, 3, 4, 5),
    domain="parts",
)
def booleans(level: int, rng: random.Random) -> TaskSpec:
    if level >= 4:
        return _machined_block(level, rng)
    if level == 2 and rng.random() < 0.5:
        return _array(rng)
    a, b, c = r05(rng.uniform(2.0, 3.0)), r05(rng.uniform(1.2, 2.0)), r05(rng.uniform(0.4, 0.8))
    x, y = r05(rng.uniform(-2, 2)), r05(rng.uniform(-2, 2))
    block = item("Block", "cube", (a, b, c), (x, y, c / 2))
    n_holes = 1 if level < 3 else 3
    dh = r05(rng.uniform(0.35, 0.5) * b) if level < 3 else r05(0.5 * min(a / 3, b / 2))
    xs = [x] if level < 3 else [round(x - a / 3, 4), x, round(x + a / 3, 4)]  # as the tools take them
    yh = y if level < 3 else y - b / 4
    drills = [
        item(f"Drill{i + 1}", "cylinder", (dh, dh, round(c + 0.4, 4)), (hx, yh, c / 2))
        for i, hx in enumerate(xs)
    ]
    volume = a * b * c - n_holes * polygon_area(dh / 2) * c
    items = [{**block, "op": "add"}] + [{**d, "op": "cut"} for d in drills]
    size = [a, b, c]
    start, oracle = [], []
    filled: list[list[float]] = []
    if level == 1:
        start = [add_call(block), add_call(drills[0])]
        prompt = "Cut the cylinder 'Drill1' out of the box 'Block' with a boolean difference."
    else:
        oracle.append(add_call(block))
        where = f"({x:g}, {yh:g}) m" if level == 2 else ", ".join(f"({hx:g}, {yh:g})" for hx in xs) + " m"
        prompt = (
            f"Make a box 'Block' {a:g} x {b:g} x {c:g} m centred at {fmt(block['location'])} and drill "
            f"{counted(n_holes, 'vertical through hole')} {dh:g} m in diameter at {where} with boolean differences "
            f"(cylinders of {SEGMENTS} segments; remove the cutters)."
        )
    for d in drills:
        if level > 1:
            oracle.append(add_call(d))
        oracle.append(call("boolean", target="Block", cutter=d["name"], operation="difference"))
    if level == 3:
        db, hb = r05(rng.uniform(0.3, 0.45) * b), r05(rng.uniform(0.3, 0.6))
        boss_h = round(hb + c / 2, 4)
        boss = item("Boss", "cylinder", (db, db, boss_h), (x, y + b / 4, c / 2 + boss_h / 2))
        oracle += [
            add_call(boss),
            call("boolean", target="Block", cutter="Boss", operation="union"),
        ]
        prompt += (
            f" Then join a cylindrical boss {db:g} m across standing {hb:g} m proud of the top "
            f"at ({x:g}, {y + b / 4:g}) m into 'Block' with a boolean union."
        )
        volume += polygon_area(db / 2) * hb
        filled.append([x, round(y + b / 4, 4), c + hb / 2])
        items.append({**boss, "op": "add"})
        size = [a, b, round(c + hb, 4)]
    constraints = [
        {"kind": "count", "equal": 1},
        {"kind": "size", "object": "Block", "value": size, "tol_rel": 0.02},
        {"kind": "mesh_volume", "object": "Block", "value": round(volume, 5), "tol_rel": 0.005},
    ] + [{"kind": "absent", "object": d["name"]} for d in drills]
    constraints.append(
        {
            "kind": "occupancy",
            "object": "Block",
            "empty": [[d["location"][0], d["location"][1], c / 2] for d in drills],
            "filled": filled,
        }
    )
    return TaskSpec(
        prompt=prompt,
        parameters={"block": block, "holes": drills, "expected_volume": volume},
        oracle=oracle,
        constraints=constraints,
        start=start,
        geometry={"kind": "scene", "items": items, "objects": ["Block"], "per_object": False},
        geometry_min=0.95,
    )
