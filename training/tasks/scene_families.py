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


def random_items(
    rng: random.Random, n: int, rotate: bool = False, skip_origin: bool = False
) -> list[dict[str, Any]]:
    """`n` primitives on distinct cells of a 3 m grid, resting on the ground, unique names.

    `skip_origin` (levels 4 and 5 only; levels 1-3 keep their draws) leaves the centre cell
    free, e.g. for a marker at the origin."""
    grid = [(x, y) for x in range(-3, 4) for y in range(-3, 4)]
    if skip_origin:
        grid.remove((0, 0))
    cells = rng.sample(grid, n)
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


FLAT_TOPPED = ("cube", "cylinder")


def stacked_items(
    rng: random.Random, ground: list[dict[str, Any]], n: int
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """`n` more primitives, each resting centred on top of a flat-topped ground item (boxes and
    cylinders; cones and spheres among the first `n` bases become boxes): (item, base) pairs.
    Their names are the ones `ground` left unused."""
    bases = [it for it in ground if it["kind"] in FLAT_TOPPED][:n]
    for it in ground:
        if len(bases) == n:
            break
        if it not in bases:
            it["kind"] = "cube"
            bases.append(it)
    used = {it["name"] for it in ground}
    names = rng.sample([m for m in NAMES if m not in used], n)
    out = []
    for base, name in zip(bases, names, strict=True):
        kind = rng.choice(KINDS)
        s = max(0.2, r05(rng.uniform(0.35, 0.8) * min(base["dimensions"][:2])))
        h = s if kind == "uv_sphere" else max(0.2, r05(rng.uniform(0.3, 1.0)))
        top = base["dimensions"][2]
        loc = [base["location"][0], base["location"][1], round(top + h / 2, 4)]
        it = {"name": name, "kind": kind, "dimensions": [s, s, h], "location": loc,
              "rotation_deg": [0.0, 0.0, 0.0]}  # fmt: skip
        out.append((it, base))
    return out


def describe_stacked(it: dict[str, Any], base: dict[str, Any]) -> str:
    return (
        f"a {KIND_WORDS[it['kind']]} named '{it['name']}' of size {fmt(it['dimensions'])} resting "
        f"on top of '{base['name']}', centred on it"
    )


def stacked_constraints(it: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"kind": "on_top", "upper": it["name"], "lower": base["name"], "tol": 0.03},
        {"kind": "aligned", "objects": [it["name"], base["name"]], "axes": "xy", "tol": POS_TOL},
    ]


def _placement_45(level: int, rng: random.Random) -> TaskSpec:
    """Level 4: twelve primitives, boxes turned. Level 5: twelve on the ground and four stacked
    on them, whose heights follow from their bases' (a wrong base misplaces what sits on it)."""
    ground = random_items(rng, 12, rotate=True)
    stacked = stacked_items(rng, ground, 4) if level == 5 else []
    items = ground + [it for it, _ in stacked]
    lead = rng.choice(("Create", "Add", "Place", "Model"))
    listing = "; ".join(describe_item(it) for it in ground)
    prompt = f"{lead} {listing}."
    if stacked:
        prompt += " Then add " + "; ".join(describe_stacked(it, b) for it, b in stacked) + "."
    constraints = [c for it in items for c in placed(it)] + [{"kind": "count", "equal": len(items)}]
    for it, base in stacked:
        constraints += stacked_constraints(it, base)
    return TaskSpec(
        prompt=prompt,
        parameters={"objects": items},
        oracle=[add_call(it) for it in items],
        constraints=constraints,
        geometry=scene_geometry(items),
        geometry_min=0.8,
    )


@family(
    "primitive_placement",
    "Add primitives of given kind, size, position and turn.",
    levels=(1, 2, 3, 4, 5),
    domain="scenes",
)
def primitive_placement(level: int, rng: random.Random) -> TaskSpec:
    if level >= 4:
        return _placement_45(level, rng)
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


def _edit_task(rng: random.Random, items: list[dict], texts: list[str], oracle: list[dict],
               constraints: list[dict], finals: list[dict]) -> TaskSpec:  # fmt: skip
    """An editing task: the prompt lists the edits of the scene of `items`; `finals` are the
    objects as they must end up."""
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


def _editing_5(rng: random.Random) -> TaskSpec:
    """Sixteen edits of fourteen boxes that build on each other: four boxes are scaled and
    turned, then another box is put on top of each (its height follows from the scaling); two
    are moved, two deleted, two left alone."""
    items = random_items(rng, 14)
    for it in items:
        it["kind"] = "cube"
    bases, tops, moved, deleted, guards = (
        items[0:4], items[4:8], items[8:10], items[10:12], items[12:14]
    )  # fmt: skip
    texts, oracle, constraints, finals = [], [], [], []
    for base, top in zip(bases, tops, strict=True):
        text, step, new = _edit(rng, base, "scale")
        texts.append(text)
        oracle.append(step)
        a = float(rng.choice((20, 35, 50, 70)))
        new["rotation_deg"] = [0.0, 0.0, a]
        texts.append(f"then turn '{base['name']}' to {a:g}° about Z")
        oracle.append(call("transform", name=base["name"], rotation_deg=[0, 0, a]))
        loc = [new["location"][0], new["location"][1], round(new["dimensions"][2] + top["dimensions"][2] / 2, 4)]
        on = {**top, "location": loc}
        texts.append(f"put '{top['name']}' on top of '{base['name']}', centred on it")
        oracle.append(call("transform", name=top["name"], location=loc))
        constraints += placed(new, kind_check=False) + placed(on, kind_check=False)
        constraints += stacked_constraints(on, new)
        finals += [new, on]
    for it in moved:
        text, step, new = _edit(rng, it, "move")
        texts.append(text)
        oracle.append(step)
        constraints += placed(new, kind_check=False)
        finals.append(new)
    for it in deleted:
        texts.append(f"delete '{it['name']}'")
        oracle.append(call("delete", name=it["name"]))
        constraints.append({"kind": "absent", "object": it["name"]})
    for it in guards:
        constraints += placed(it, kind_check=False, guard=True)
        finals.append(it)
    return _edit_task(rng, items, texts, oracle, constraints, finals)


@family(
    "scene_editing",
    "Move, scale, turn or delete objects of a prepared scene to meet constraints.",
    levels=(1, 2, 3, 4, 5),
    domain="edits",
)
def scene_editing(level: int, rng: random.Random) -> TaskSpec:
    if level == 5:
        return _editing_5(rng)
    n_obj, n_edit = {1: (2, 1), 2: (4, 3), 3: (9, 8), 4: (12, 10)}[level]
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
        op = ops[len(texts) % 4] if level >= 3 else rng.choice(ops)
        text, step, new = _edit(rng, it, op)
        texts.append(text)
        oracle.append(step)
        if op == "delete":
            constraints.append({"kind": "absent", "object": it["name"]})
        else:
            constraints += placed(new, kind_check=False)
            finals.append(new)
    return _edit_task(rng, items, texts, oracle, constraints, finals)


def _materials_5(rng: random.Random) -> TaskSpec:
    """Sixteen objects painted by a rule on their heights, which only the scene tells: look
    first (get_scene), then one material per object, one of them an exception by name."""
    items = random_items(rng, 16)
    heights = sorted({it["dimensions"][2] for it in items})
    mid = len(heights) // 2
    cut = round((heights[mid - 1] + heights[mid]) / 2, 3)
    tall_c, short_c, odd_c = rng.sample(sorted(COLOURS), 3)
    tall = {"color": COLOURS[tall_c], "metallic": 1.0, "roughness": rng.choice((0.2, 0.3))}
    short = {"color": COLOURS[short_c], "metallic": 0.0, "roughness": rng.choice((0.6, 0.8))}
    odd = rng.choice(items)
    special = {"color": COLOURS[odd_c], "metallic": 0.0, "roughness": 0.5}
    prompt = (
        f"Paint every object in the scene taller than {cut:g} m {tall_c} ({tall['color']}), "
        f"metallic 1, roughness {tall['roughness']:g}, and every other object {short_c} "
        f"({short['color']}), metallic 0, roughness {short['roughness']:g}; but make "
        f"'{odd['name']}' {odd_c} ({special['color']}), metallic 0, roughness 0.5, whatever its "
        "height. Check the heights in the scene first."
    )
    oracle, constraints = [call("get_scene")], []
    for it in items:
        mat = special if it is odd else tall if it["dimensions"][2] > cut else short
        oracle.append(call("set_material", name=it["name"], **mat))
        constraints.append({"kind": "material", "object": it["name"], **mat})
        constraints += placed(it, kind_check=False, guard=True)
    return TaskSpec(
        prompt=prompt,
        parameters={"start": items, "height_cut": cut},
        oracle=oracle,
        constraints=constraints,
        start=[add_call(it) for it in items],
    )


@family(
    "materials",
    "Give objects of a prepared scene the named colours and finishes.",
    levels=(1, 2, 3, 4, 5),
    domain="scenes",
)
def materials(level: int, rng: random.Random) -> TaskSpec:
    if level == 5:
        return _materials_5(rng)
    n = {1: 1, 2: 3, 3: 8, 4: 10}[level]  # at most len(COLOURS)
    items = random_items(rng, n + 1)
    colours = rng.sample(sorted(COLOURS), n)
    texts, oracle, constraints = [], [], []
    for it, colour in zip(items[:n], colours, strict=True):
        args: dict[str, Any] = {"name": it["name"], "color": COLOURS[colour]}
        text = f"make '{it['name']}' {colour} ({COLOURS[colour]})"
        if level >= 3:
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
    levels=(1, 2, 3, 4, 5),
    domain="reconstruction",
)
def render_reconstruction(level: int, rng: random.Random) -> TaskSpec:
    stacked: list[tuple[dict[str, Any], dict[str, Any]]] = []
    if level >= 4:  # levels 4-5 keep the origin's cell free for the marker
        items = random_items(rng, {4: 11, 5: 12}[level], skip_origin=True)
        if level == 5:  # four more, each resting on one of the others
            stacked = stacked_items(rng, items, 4)
            items = items + [it for it, _ in stacked]
        n = len(items)
    else:
        n = {1: 1, 2: 3, 3: 8}[level]
        items = random_items(rng, n)
    on = {it["name"]: b["name"] for it, b in stacked}
    kinds = ", ".join(
        f"{KIND_WORDS[it['kind']]} '{it['name']}' {fmt(it['dimensions'])}"
        + (f" (on top of '{on[it['name']]}')" if it["name"] in on else "")
        for it in items
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
    if stacked:
        prompt = prompt.replace(
            "all resting on the ground", "resting on the ground unless said otherwise"
        )
    # Positions are read off a render: judged to a tenth of a grid cell (at least 0.15 m).
    tol = round(max(0.15, 0.1 * cell), 3)
    constraints = [{"kind": "count", "equal": n + 1}] + placed(marker, guard=True)
    for it in items:
        constraints += [
            {"kind": "position", "object": it["name"], "value": it["location"], "tol": tol},
            {"kind": "size", "object": it["name"], "value": it["dimensions"], "tol_rel": SIZE_TOL},
        ]
    for it, base in stacked:
        constraints += stacked_constraints(it, base)
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
