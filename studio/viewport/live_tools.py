"""The live view's keyboard and rectangle tools, kept apart from its drawing and dragging:
G/R/S with a typed value (`typed.TypedTransform`: X/Y/Z, a number, Enter; Esc cancels),
previewed on the meshes and sent as one call per selected object (one undo step), and box
select (B, then drag: what lies inside becomes the selection; Shift adds)."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, Qt

from studio.viewport.gizmo import no_change
from studio.viewport.typed import TypedTransform


class SelectionTools:
    """Mixed into `live.LiveView` (it provides the renderer, the camera and the drag state)."""

    def start_typed(self, kind: str) -> bool:
        if self.selected_mesh() is None or self.drag_axis is not None:
            return False
        self.typed = TypedTransform(kind)
        self.sig_readout.emit(self.typed.readout(self.unit()))
        return True

    def _typed_key(self, event) -> None:
        key, typed = event.key(), self.typed
        if key == Qt.Key.Key_Escape:
            self.cancel_drag()
            self.typed = None
            self.sig_readout.emit("")
            self.update()
            return
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            return self._typed_apply()
        char = "\b" if key == Qt.Key.Key_Backspace else event.text()
        if not char or not typed.key(char):
            return
        self._typed_preview()
        self.sig_readout.emit(typed.readout(self.unit()))

    def _typed_preview(self) -> None:
        """Show the typed value on the meshes (a scale without an axis shows after Enter)."""
        typed, amount = self.typed, self.typed.amount(self.unit())
        if self.drag_axis is not None:
            self._apply_drag(no_change(self.drag_axis))
            self.drag_axis = None
        axis = typed.axis if typed.axis is not None else (2 if typed.kind == "rotate" else None)
        if amount is None or axis is None or (typed.kind == "scale" and amount <= 0):
            self.update()
            return
        self._grab(axis + {"move": 0, "rotate": 3, "scale": 6}[typed.kind])
        self._apply_drag(amount)
        self.sig_readout.emit(typed.readout(self.unit()))
        self.update()

    def _typed_apply(self) -> None:
        typed, names = self.typed, list(self.controller.scene.selection)
        objects = [o for o in (self.controller.scene.get(n) for n in names) if o]
        try:
            calls = typed.calls(objects, self.unit())
        except ValueError as exc:
            self.controller.sig_error.emit(str(exc))
            return
        if self.drag_axis is not None:  # the preview stays until the scene comes back
            self.drag_axis, self.drag_offset, self._drag_bases = None, 0.0, {}
        self.typed = None
        self.sig_readout.emit("")
        self._send(calls)

    def _box_select(self, a: QPointF, b: QPointF, add: bool) -> None:
        """Select every object whose middle lies in the rectangle from `a` to `b`."""
        self.box_mode = False
        self.sig_readout.emit("")
        vm, r = self.view_math(), self.devicePixelRatio()
        x0, x1 = sorted((a.x() * r, b.x() * r))
        y0, y1 = sorted((a.y() * r, b.y() * r))
        inside = []
        for name, m in self.renderer.meshes.items() if self.renderer else ():
            lo, hi = m.world_bounds()
            x, y = vm.to_screen((np.asarray(lo) + np.asarray(hi)) / 2)
            if x0 <= x <= x1 and y0 <= y <= y1:
                inside.append(name)
        scene = self.controller.scene
        scene.select_many([*scene.selection, *inside] if add else inside)

    def start_box_select(self) -> None:
        self.box_mode = True
        self.sig_readout.emit("Box select: drag a rectangle (Shift adds)")
