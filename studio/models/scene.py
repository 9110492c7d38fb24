"""The scene as the studio knows it: the runtime's `get_scene` objects and the selection.

The selection is a list (shift-click and box select add to it); `selected` is its last
member, the one the palette's `name` fields and the gizmo's origin follow."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from studio.models.evented import Emitter


@dataclass
class SceneModel:
    objects: list[dict[str, Any]] = field(default_factory=list)
    selected: str | None = None
    scene_hash: str | None = None
    selection: list[str] = field(default_factory=list)
    select_next: str | None = None  # a person's new object: selected when the scene shows it
    units: str = "auto"  # the display unit chosen in View → Units (studio.models.units.CHOICES)

    def __post_init__(self) -> None:
        self.changed = Emitter()  # ()
        self.selection_changed = Emitter()  # (name | None)

    def names(self) -> list[str]:
        return [o["name"] for o in self.objects]

    def set_scene(self, scene: dict[str, Any], scene_hash: str | None = None) -> None:
        self.objects = list(scene.get("objects", []))
        self.scene_hash = scene_hash
        names = self.names()
        if self.select_next in names:
            self.select_next, new = None, self.select_next
            self.selection, self.selected = [new], new
            self.selection_changed.emit(new)
        elif any(n not in names for n in self.selection):
            self.select_many([n for n in self.selection if n in names])
        self.changed.emit()

    def select(self, name: str | None) -> None:
        self.select_many([name] if name else [])

    def toggle(self, name: str) -> None:
        """Shift-click: add `name` to the selection (it becomes the active one), or take it out."""
        if name in self.selection:
            self.select_many([n for n in self.selection if n != name])
        else:
            self.select_many([*self.selection, name])

    def select_many(self, names: list[str]) -> None:
        known = self.names()
        chosen = list(dict.fromkeys(n for n in names if n in known))
        if chosen == self.selection and (chosen[-1] if chosen else None) == self.selected:
            return
        self.selection = chosen
        self.selected = chosen[-1] if chosen else None
        self.selection_changed.emit(self.selected)

    def get(self, name: str) -> dict[str, Any] | None:
        return next((o for o in self.objects if o["name"] == name), None)

    def bounds(self, names: list[str] | None = None) -> tuple[list[float], list[float]] | None:
        """World-space box around every object (or those named), or None for none."""
        boxes = [
            (o.get("bbox_min"), o.get("bbox_max"))
            for o in self.objects
            if names is None or o["name"] in names
        ]
        boxes = [(lo, hi) for lo, hi in boxes if lo and hi]
        if not boxes:
            return None
        lo = [min(b[0][i] for b in boxes) for i in range(3)]
        hi = [max(b[1][i] for b in boxes) for i in range(3)]
        return lo, hi
