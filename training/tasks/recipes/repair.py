"""Items and rounding shared by the repair and target families (metres, centimetre-rounded
placements), and their reward weights.
"""

from __future__ import annotations

from typing import Any

from training.tasks.config import RELATION_WEIGHTS
from training.tasks.spec import call

REPAIR_WEIGHTS = RELATION_WEIGHTS


def rounded(x: float, nd: int = 4) -> float:
    return round(float(x), nd) + 0.0


def to_cm(x: float) -> float:
    return round(round(x * 100) / 100, 2)


def box_item(name: str, kind: str, dims, loc) -> dict[str, Any]:
    return {"name": name, "kind": kind, "dimensions": [rounded(d) for d in dims],
            "location": [rounded(v) for v in loc], "rotation_deg": [0.0, 0.0, 0.0]}


def add_box(it: dict[str, Any], loc=None) -> dict[str, Any]:
    return call("add_primitive", kind=it["kind"], name=it["name"], dimensions=it["dimensions"],
                location=list(loc if loc is not None else it["location"]))


# ================================================================ overlap_repair

GAP_TOL = 0.005  # metres: "touching" means a gap or overlap of at most 5 mm
