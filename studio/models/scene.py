"""The scene as the studio knows it: the runtime's `get_scene` objects and the selection."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from studio.models.evented import Emitter


@dataclass
class SceneModel:
    objects: list[dict[str, Any]] = field(default_factory=list)
    selected: str | None = None
    scene_hash: str | None = None

    def __post_init__(self) -> None:
        self.changed = Emitter()  # ()
        self.selection_changed = Emitter()  # (name | None)

    def names(self) -> list[str]:
        return [o["name"] for o in self.objects]

    def set_scene(self, scene: dict[str, Any], scene_hash: str | None = None) -> None:
        self.objects = list(scene.get("objects", []))
        self.scene_hash = scene_hash
        if self.selected not in self.names():
            self.selected = None
            self.selection_changed.emit(None)
        self.changed.emit()

    def select(self, name: str | None) -> None:
        if name == self.selected:
            return
        self.selected = name if name in self.names() else None
        self.selection_changed.emit(self.selected)

    def get(self, name: str) -> dict[str, Any] | None:
        return next((o for o in self.objects if o["name"] == name), None)

    def bounds(self) -> tuple[list[float], list[float]] | None:
        """World-space box around every object, or None for an empty scene."""
        boxes = [(o.get("bbox_min"), o.get("bbox_max")) for o in self.objects]
        boxes = [(lo, hi) for lo, hi in boxes if lo and hi]
        if not boxes:
            return None
        lo = [min(b[0][i] for b in boxes) for i in range(3)]
        hi = [max(b[1][i] for b in boxes) for i in range(3)]
        return lo, hi
