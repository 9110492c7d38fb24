"""The `booleans` family (domain parts): Cut holes and join parts with mesh booleans; repeat parts
with an array modifier.
"""

from __future__ import annotations

import math
import random

from training.tasks.config import SCENE_WEIGHTS
from training.tasks.recipes.phrases import LEADS
from training.tasks.recipes.scene import add_call, counted, fmt, item, r05
from training.tasks.scene_geometry import SEGMENTS
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


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


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"with a boolean difference", "using a boolean difference", "by a boolean difference",
         "with a difference boolean", "with a boolean difference", "using boolean subtraction",
         unseen=("by subtracting it (boolean)",)),
    swap(r"with boolean differences", "using boolean differences", "by boolean differences",
         "with difference booleans", "with boolean differences", "using boolean subtractions",
         unseen=("by subtracting cylinders (booleans)",)),
    swap(r"with a boolean union", "using a boolean union", "by a boolean union",
         "with a union boolean", "with a boolean union", "by a union",
         unseen=("by merging them (boolean union)",)),
    swap(r"Remove every cutter\.", "Delete every cutter.", "Remove all the cutters.",
         "No cutter may be left.", "Remove every cutter.", "Clean up every cutter.",
         unseen=("Leave no cutters behind.",)),
    *LEADS,
))


FAMILY = Family(
    name="booleans",
    description="Cut holes and join parts with mesh booleans; repeat parts with an array modifier.",
    domain="parts",
    levels=(1, 2, 3, 4, 5),
    weights={**SCENE_WEIGHTS, "geometry": 0.3, "constraints": 0.5},
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("mesh", extra=("duplicate",)),
    wordings=WORDINGS,
    make=booleans,
)
