"""How the studio writes lengths: ONE display unit per project (metres, or millimetres when
the parts were authored in mm: CAD parts are, `tools.specs.CAD_UNIT`), used by the outliner,
the viewport's readouts and typed values, so every number on screen is in the same unit.
The scene itself is in metres (`tools.specs.SCENE_PER_MM` converts)."""

from __future__ import annotations

from tools.specs import CAD_UNIT, SCENE_PER_MM, SCENE_UNIT

CHOICES = ("auto", CAD_UNIT, SCENE_UNIT)  # View → Units


def object_unit(obj: dict) -> str:
    return CAD_UNIT if obj.get("source") == "cad" else SCENE_UNIT


def display_unit(objects: list[dict], choice: str = "auto") -> str:
    """The unit the project shows: the person's choice, or mm when any part was authored in mm."""
    if choice in (CAD_UNIT, SCENE_UNIT):
        return choice
    return CAD_UNIT if any(object_unit(o) == CAD_UNIT for o in objects) else SCENE_UNIT


def from_scene(metres: float, unit: str) -> float:
    return metres / SCENE_PER_MM if unit == CAD_UNIT else metres


def to_scene(value: float, unit: str) -> float:
    return value * SCENE_PER_MM if unit == CAD_UNIT else value


def length_text(metres: float, unit: str) -> str:
    return f"{round(from_scene(metres, unit), 4):g} {unit}"


def size_text(obj: dict, unit: str | None = None) -> str:
    """An object's bounding size: `100 × 70 × 10 mm`, `1 × 0.5 × 2 m` (its own unit by default)."""
    dims = obj.get("dimensions") or []
    if not dims:
        return ""
    unit = unit or object_unit(obj)
    return " × ".join(f"{round(from_scene(d, unit), 4):g}" for d in dims) + f" {unit}"


def location_text(obj: dict, unit: str = SCENE_UNIT) -> str:
    loc = obj.get("location") or []
    return (
        "(" + ", ".join(f"{round(from_scene(v, unit), 4):g}" for v in loc) + f") {unit}"
        if loc
        else ""
    )
