"""Assembly and edit recipes (#31): rounding, items and their add calls, placement checks at
assembly tolerances, bolt circles.
"""

from __future__ import annotations

import math
from typing import Any

from training.tasks.config import RELATION_WEIGHTS
from training.tasks.recipes.scene import add_call

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


# ================================================================== fasteners


def circle_points(cx: float, cy: float, radius: float, n: int, start: float = 0.0) -> list[list[float]]:
    return [
        [r4(cx + radius * math.cos(math.radians(start + 360 * k / n))),
         r4(cy + radius * math.sin(math.radians(start + 360 * k / n)))]
        for k in range(n)
    ]
