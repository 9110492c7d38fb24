"""Scene recipes shared by the scene, edit, reconstruction and recovery families: object
names, kinds and colours, random items, the add call, placement constraints (position, size,
rotation, kind) and the scene geometry spec.
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.spec import call

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


def stacked_constraints(it: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"kind": "on_top", "upper": it["name"], "lower": base["name"], "tol": 0.03},
        {"kind": "aligned", "objects": [it["name"], base["name"]], "axes": "xy", "tol": POS_TOL},
    ]


def item(name: str, kind: str, dims, loc) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "dimensions": [float(d) for d in dims],
        "location": [round(float(v), 4) for v in loc],
        "rotation_deg": [0.0, 0.0, 0.0],
    }
