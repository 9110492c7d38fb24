"""How the studio writes lengths: the scene in metres, CAD parts in the millimetres they were
authored in (the conversion factor is the runtime's, `tools.specs.SCENE_PER_MM`), so the
number a person reads is the number a prompt says and a tool takes."""

from __future__ import annotations

from tools.specs import CAD_UNIT, SCENE_PER_MM, SCENE_UNIT


def object_unit(obj: dict) -> str:
    return CAD_UNIT if obj.get("source") == "cad" else SCENE_UNIT


def size_text(obj: dict) -> str:
    """An object's bounding size with its unit: `100 × 70 × 10 mm`, `1 × 0.5 × 2 m`."""
    dims = obj.get("dimensions") or []
    if not dims:
        return ""
    unit = object_unit(obj)
    scale = 1 / SCENE_PER_MM if unit == CAD_UNIT else 1.0
    return " × ".join(f"{round(d * scale, 4):g}" for d in dims) + f" {unit}"


def location_text(obj: dict) -> str:
    loc = obj.get("location") or []
    return "(" + ", ".join(f"{round(v, 4):g}" for v in loc) + f") {SCENE_UNIT}" if loc else ""
