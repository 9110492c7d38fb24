"""Boxes in metres shared by the room, stair, lighting, drawing and deliverable families: a box
item, its add call, its position and size checks, its size in words.
"""

from __future__ import annotations

from typing import Any

from training.tasks.spec import call

POS_TOL = 0.05


SIZE_TOL = 0.05


def rounded(x: float, nd: int = 3) -> float:
    return round(float(x), nd) + 0.0


def rounded_all(v, nd: int = 3) -> list[float]:
    return [rounded(x, nd) for x in v]


def box(name: str, dims, loc, kind: str = "cube") -> dict[str, Any]:
    return {"name": name, "kind": kind, "dimensions": rounded_all(dims), "location": rounded_all(loc),
            "rotation_deg": [0.0, 0.0, 0.0]}


def add(it: dict[str, Any]) -> dict[str, Any]:
    return call("add_primitive", kind=it["kind"], name=it["name"], dimensions=it["dimensions"],
                location=it["location"])


def where(it: dict[str, Any], weight: float = 1.0) -> list[dict[str, Any]]:
    out = [
        {"kind": "position", "object": it["name"], "value": it["location"], "tol": POS_TOL},
        {"kind": "size", "object": it["name"], "value": it["dimensions"], "tol_rel": SIZE_TOL},
    ]
    return [{**c, "weight": weight} for c in out] if weight != 1.0 else out


def size_text(d) -> str:
    return " x ".join(f"{x:g}" for x in d) + " m"


DELIVERABLE_WEIGHTS = {"completeness": 0.4, "constraints": 0.3, "validity": 0.15,
                       "efficiency": 0.1, "recovery": 0.05}
