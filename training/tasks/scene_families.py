"""Blender scene families: placing primitives, editing a prepared scene, materials, and
rebuilding a scene from a target render."""

from __future__ import annotations

import math
import random
from typing import Any

from training.tasks.base import TaskSpec, call, family

KINDS = ("cube", "cylinder", "uv_sphere", "cone")
KIND_WORDS = {"cube": "box", "cylinder": "cylinder", "uv_sphere": "sphere", "cone": "cone"}
NAMES = (
    "Crate", "Drum", "Ball", "Spire", "Block", "Post", "Orb", "Peak", "Brick", "Pillar",
    "Globe", "Horn", "Tile", "Can", "Bead", "Tip",
)  # fmt: skip
COLOURS = {
    "red": "#D03030", "green": "#30A040", "blue": "#3050D0", "yellow": "#E0C020",
    "orange": "#E07020", "purple": "#8040B0", "white": "#F0F0F0", "black": "#181818",
    "teal": "#20A0A0", "pink": "#E070A0",
}  # fmt: skip
POS_TOL = 0.05
SIZE_TOL = 0.05


def fmt(v: list[float] | tuple[float, ...], unit: str = "m") -> str:
    """A position or size as prompts write it, with its unit: `(1, 0.5, 0.25) m`."""
    return "(" + ", ".join(f"{x:g}" for x in v) + ")" + (f" {unit}" if unit else "")


def counted(n: int, noun: str) -> str:
    """`1 hole`, `3 holes`: prompts read as a person would write them."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def r05(x: float) -> float:
    return round(round(x * 20) / 20, 2)


def random_items(rng: random.Random, n: int, rotate: bool = False) -> list[dict[str, Any]]:
    """`n` primitives on distinct cells of a 3 m grid, resting on the ground, unique names."""
    cells = rng.sample([(x, y) for x in range(-3, 4) for y in range(-3, 4)], n)
    names = rng.sample(NAMES, n)
    items = []
    for (cx, cy), name in zip(cells, names, strict=True):
        kind = rng.choice(KINDS)
        if kind == "uv_sphere":
            d = r05(rng.uniform(0.5, 1.6))
            dims = [d, d, d]
        elif kind in ("cylinder", "cone"):
            d = r05(rng.uniform(0.5, 1.6))
            dims = [d, d, r05(rng.uniform(0.5, 2.0))]
        else:
            dims = [r05(rng.uniform(0.4, 1.8)) for _ in range(3)]
        loc = [
            cx * 3.0 + r05(rng.uniform(-0.5, 0.5)),
            cy * 3.0 + r05(rng.uniform(-0.5, 0.5)),
            dims[2] / 2,
        ]
        rot = (
            [0.0, 0.0, float(rng.choice((15, 30, 45, 60)))]
            if rotate and kind == "cube"
            else [0.0, 0.0, 0.0]
        )
        items.append(
            {"name": name, "kind": kind, "dimensions": dims, "location": loc, "rotation_deg": rot}
        )
    return items


def add_call(it: dict[str, Any]) -> dict[str, Any]:
    args = {k: it[k] for k in ("kind", "name", "dimensions", "location")}
    if any(it["rotation_deg"]):
        args["rotation_deg"] = it["rotation_deg"]
    return call("add_primitive", **args)


GUARD_WEIGHT = 0.2


def placed(
    it: dict[str, Any], kind_check: bool = True, guard: bool = False
) -> list[dict[str, Any]]:
    """Constraints that an object is where and what `it` says.

    A guard (an object the task leaves alone) weighs little in the constraints component:
    leaving it untouched must not earn as much as doing the task, breaking it must still fail.
    """
    out = [
        {"kind": "position", "object": it["name"], "value": it["location"], "tol": POS_TOL},
        {"kind": "size", "object": it["name"], "value": it["dimensions"], "tol_rel": SIZE_TOL},
    ]
    if kind_check:
        out.append({"kind": "shape_kind", "object": it["name"], "primitive": it["kind"]})
    if any(it["rotation_deg"]):
        out.append(
            {"kind": "rotation", "object": it["name"], "value": it["rotation_deg"], "tol_deg": 3.0}
        )
    if guard:
        out = [{**c, "weight": GUARD_WEIGHT} for c in out]
    return out


def describe_item(it: dict[str, Any]) -> str:
    d = it["dimensions"]
    rot = f", turned {it['rotation_deg'][2]:g}° about Z" if any(it["rotation_deg"]) else ""
    return (
        f"a {KIND_WORDS[it['kind']]} named '{it['name']}' of size {fmt(d)} "
        f"centred at {fmt(it['location'])}{rot}"
    )


def scene_geometry(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": "scene", "items": [{**it, "op": "add"} for it in items]}


@family(
    "primitive_placement", "Add primitives of given kind, size, position and turn.", domain="scenes"
)
def primitive_placement(level: int, rng: random.Random) -> TaskSpec:
    n = {1: 1, 2: 3, 3: 8}[level]
    items = random_items(rng, n, rotate=level == 3)
    lead = rng.choice(("Create", "Add", "Place", "Model"))
    listing = "; ".join(describe_item(it) for it in items)
    prompt = rng.choice((f"{lead} {listing}.", f"In an empty scene, {lead.lower()} {listing}."))
    constraints = [c for it in items for c in placed(it)] + [{"kind": "count", "equal": n}]
    return TaskSpec(
        prompt=prompt,
        parameters={"objects": items},
        oracle=[add_call(it) for it in items],
        constraints=constraints,
        geometry=scene_geometry(items),
        geometry_min=0.8,
    )


def _edit(rng: random.Random, it: dict[str, Any], op: str) -> tuple[str, dict | None, dict]:
    """One edit of an object: (instruction, oracle call or None for delete, new item)."""
    new = {**it, "location": list(it["location"]), "dimensions": list(it["dimensions"])}
    if op == "move":
        dx, dy = rng.choice((-1.5, -1.0, 1.0, 1.5)), rng.choice((-1.0, 0.0, 1.0))
        new["location"] = [it["location"][0] + dx, it["location"][1] + dy, it["location"][2]]
        return (
            f"move '{it['name']}' to {fmt(new['location'])}",
            call("transform", name=it["name"], location=new["location"]),
            new,
        )
    if op == "scale":
        f = rng.choice((0.5, 1.5, 2.0))
        new["dimensions"] = [round(d * f, 4) for d in it["dimensions"]]
        new["location"] = [it["location"][0], it["location"][1], new["dimensions"][2] / 2]
        text = f"scale '{it['name']}' by {f:g} (uniformly) and keep it resting on the ground, i.e. centred at {fmt(new['location'])}"
        return (
            text,
            call("transform", name=it["name"], scale=[f, f, f], location=new["location"]),
            new,
        )
    if op == "rotate":
        a = float(rng.choice((20, 35, 50, 70)))
        new["rotation_deg"] = [0.0, 0.0, a]
        return (
            f"turn '{it['name']}' to {a:g}° about the Z axis",
            call("transform", name=it["name"], rotation_deg=[0, 0, a]),
            new,
        )
    return f"delete '{it['name']}'", call("delete", name=it["name"]), new


@family(
    "scene_editing",
    "Move, scale, turn or delete objects of a prepared scene to meet constraints.",
    domain="edits",
)
def scene_editing(level: int, rng: random.Random) -> TaskSpec:
    n_obj, n_edit = {1: (2, 1), 2: (4, 3), 3: (9, 8)}[level]
    items = random_items(rng, n_obj)
    for it in items:  # cubes only: a turn must be visible in geometry
        if it["kind"] != "cube":
            it["kind"] = "cube"
    edited = rng.sample(range(n_obj), n_edit)
    ops = ["move", "scale", "rotate", "delete"]
    texts, oracle, constraints, finals = [], [], [], []
    for i, it in enumerate(items):
        if i not in edited:
            constraints += placed(it, kind_check=False, guard=True)
            finals.append(it)
            continue
        op = ops[len(texts) % 4] if level == 3 else rng.choice(ops)
        text, step, new = _edit(rng, it, op)
        texts.append(text)
        oracle.append(step)
        if op == "delete":
            constraints.append({"kind": "absent", "object": it["name"]})
        else:
            constraints += placed(new, kind_check=False)
            finals.append(new)
    prompt = (
        rng.choice(("In this scene, ", "Edit the scene: ", "Please "))
        + "; ".join(texts)
        + ". Leave everything else as it is."
    )
    return TaskSpec(
        prompt=prompt,
        parameters={"start": items, "edits": texts},
        oracle=oracle,
        constraints=constraints,
        start=[add_call(it) for it in items],
        geometry=scene_geometry(finals),
        geometry_min=0.8,
    )


@family(
    "materials", "Give objects of a prepared scene the named colours and finishes.", domain="scenes"
)
def materials(level: int, rng: random.Random) -> TaskSpec:
    n = {1: 1, 2: 3, 3: 8}[level]
    items = random_items(rng, n + 1)
    colours = rng.sample(sorted(COLOURS), n)
    texts, oracle, constraints = [], [], []
    for it, colour in zip(items[:n], colours, strict=True):
        args: dict[str, Any] = {"name": it["name"], "color": COLOURS[colour]}
        text = f"make '{it['name']}' {colour} ({COLOURS[colour]})"
        if level == 3:
            args["metallic"] = rng.choice((0.0, 1.0))
            args["roughness"] = rng.choice((0.2, 0.5, 0.8))
            text += f", metallic {args['metallic']:g}, roughness {args['roughness']:g}"
        texts.append(text)
        oracle.append(call("set_material", **args))
        constraints.append(
            {
                "kind": "material",
                "object": it["name"],
                **{k: v for k, v in args.items() if k != "name"},
            }
        )
    for it in items:
        constraints += placed(it, kind_check=False, guard=True)
    prompt = rng.choice(("Paint the scene: ", "Set materials: ", "")) + "; ".join(texts) + "."
    return TaskSpec(
        prompt=prompt[0].upper() + prompt[1:],
        parameters={"start": items, "materials": texts},
        oracle=oracle,
        constraints=constraints,
        start=[add_call(it) for it in items],
    )


def grid_cell(items: list[dict[str, Any]]) -> float:
    """The renderer's grid step for these objects (the rule in tools/worker/render.py)."""
    from training.tasks.scene_geometry import items_bounds

    lo, hi = items_bounds(items)
    raw = max(hi[0] - lo[0], hi[1] - lo[1], 1e-3) * 1.6 / 8
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


@family(
    "render_reconstruction",
    "Rebuild a scene of primitives from a rendered target image.",
    domain="reconstruction",
)
def render_reconstruction(level: int, rng: random.Random) -> TaskSpec:
    n = {1: 1, 2: 3, 3: 8}[level]
    items = random_items(rng, n)
    kinds = ", ".join(
        f"{KIND_WORDS[it['kind']]} '{it['name']}' {fmt(it['dimensions'])}" for it in items
    )
    lead = rng.choice(
        (
            "Rebuild the scene shown in the target image",
            "Recreate what the target render shows",
            "Model the scene in the target picture",
        )
    )
    # A small fixed cube marks the origin, so every render shows where (0, 0) is.
    marker = {
        "name": "Origin", "kind": "cube", "dimensions": [0.2, 0.2, 0.2],
        "location": [0.0, 0.0, 0.1], "rotation_deg": [0.0, 0.0, 0.0],
    }  # fmt: skip
    cell = grid_cell(items + [marker])
    prompt = (
        f"{lead} (views iso, front, top, right; the ground grid has {cell:g} m cells and the "
        f"small cube 'Origin' marks the origin; leave it). It holds {counted(n, 'more object')}, all resting "
        f"on the ground: {kinds}. Read their positions from the image."
    )
    # Positions are read off a render: judged to a tenth of a grid cell (at least 0.15 m).
    tol = round(max(0.15, 0.1 * cell), 3)
    constraints = [{"kind": "count", "equal": n + 1}] + placed(marker, guard=True)
    for it in items:
        constraints += [
            {"kind": "position", "object": it["name"], "value": it["location"], "tol": tol},
            {"kind": "size", "object": it["name"], "value": it["dimensions"], "tol_rel": SIZE_TOL},
        ]
    return TaskSpec(
        prompt=prompt,
        parameters={"objects": items, "position_tolerance": tol},
        oracle=[add_call(it) for it in items],
        constraints=constraints,
        start=[add_call(marker)],
        geometry=scene_geometry(items + [marker]),
        geometry_min=0.6,
        has_target_image=True,
    )
