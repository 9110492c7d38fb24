"""The live viewport: the scene rasterised on the GPU in a native OpenGL window (moderngl).

The worker sends tessellated meshes when the scene changes (only geometry the view lacks);
orbiting, picking, hover and gizmo drags never touch the worker. Left click selects (the
scene model's selection: the outliner and the palette follow), left-drag on empty space
orbits, middle/shift-drag pans, wheel zooms; dragging a gizmo arrow moves the selected
object, a ring turns it, a box scales it along its own axis, and on release the drag sends ONE
`transform` call (one undo step, a human step). Shift-click adds to the selection, B then a
drag selects what lies in the rectangle; the gizmo then moves every selected object, still as
one undo step. G/R/S then X/Y/Z and a number, Enter: the same with a typed value (`typed.py`).
"""

from __future__ import annotations

import logging
import os
import sys
import time

import numpy as np
from PySide6.QtCore import QEvent, QKeyCombination, QPointF, Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QSurfaceFormat
from PySide6.QtOpenGL import QOpenGLWindow

from studio.models.orbit import OrbitCamera
from studio.models.units import display_unit, length_text
from studio.viewport.camera import VIEWS, ViewMath
from studio.viewport.gizmo import GIZMO_PX, drag_amount, dragged_model, no_change, rotated_euler
from studio.viewport.live_tools import SelectionTools
from studio.viewport.typed import AXES, TypedTransform

log = logging.getLogger(__name__)
CLICK_SLOP_PX = 4


def guard_llvm(renderer: str) -> None:
    """With Mesa's software rasteriser (llvmpipe: Xvfb, no GPU driver) its LLVM is in this
    process, and importing triton's LLVM afterwards segfaults (seen here: torch imports triton
    when the studio builds or runs a local model). torch runs without triton, so keep it out."""
    if "llvmpipe" in renderer.lower() and "triton" not in sys.modules:
        sys.modules["triton"] = None  # type: ignore[assignment]  # import triton -> ImportError


def gl_format() -> QSurfaceFormat:
    fmt = QSurfaceFormat()
    fmt.setVersion(3, 3)
    fmt.setProfile(QSurfaceFormat.OpenGLContextProfile.CoreProfile)
    fmt.setDepthBufferSize(24)
    fmt.setSamples(int(os.environ.get("MW_VIEWPORT_SAMPLES", "0")))
    return fmt


class LiveView(SelectionTools, QOpenGLWindow):
    sig_frame = Signal()  # a frame was drawn
    sig_status = Signal(str)  # grid spacing and view, for the panel's label
    sig_failed = Signal(str)  # no usable OpenGL 3.3 here: the panel falls back to worker frames
    sig_readout = Signal(str)  # the drag's or typed value's numbers ("" when done)
    sig_key = Signal(object)  # QKeySequence of a key pressed here (a native window: the
    # widgets' shortcut map never sees it, so the panel matches it to the window's actions)

    def __init__(self, controller, camera: OrbitCamera) -> None:
        super().__init__()
        self.setFormat(gl_format())
        self.controller = controller
        self.camera = camera
        self.renderer = None
        self.failed: str | None = None
        self.frames = 0
        self.view_name = "orbit"
        self.hovered: str | None = None
        self._pending: tuple[dict, list[bytes]] | None = None
        self._syncing = False
        self._dirty = False
        self._press: QPointF | None = None
        self._last: QPointF | None = None
        self._button = Qt.MouseButton.NoButton
        self._moved = False
        self.drag_axis: int | None = None
        self.drag_offset = 0.0  # world units along the dragged axis, degrees about it, or a factor
        self._drag_base = np.identity(4)  # the active object's model matrix when the drag began
        self._drag_bases: dict[str, np.ndarray] = {}  # every selected object's, by name
        self.typed: TypedTransform | None = None  # G/R/S in progress
        self.box_mode = False  # B pressed: the next left drag selects a rectangle
        self._drag_length = 1.0  # the gizmo's arrow length (world units) when the drag began
        self._snap = False
        self.changed_at: float | None = None  # when the scene last changed (for the benchmark)
        self.scene_to_frame_s: float | None = None
        self._frame_after_change = False  # the next frame shows a changed scene: time it
        self._hover_at: QPointF | None = None
        self._hover_timer = QTimer(self)
        self._hover_timer.setSingleShot(True)
        self._hover_timer.setInterval(30)
        self._hover_timer.timeout.connect(self._hover_pick)
        controller.sig_scene_changed.connect(self.sync)
        controller.sig_ready.connect(self.sync)
        controller.scene.selection_changed.connect(lambda _n: self.update())
        controller.scene.changed.connect(self.update)  # View → Units: the grid's label follows

    # -- the worker's meshes ---------------------------------------------------------------
    def known(self) -> dict[str, str]:
        return {n: m.key for n, m in self.renderer.meshes.items()} if self.renderer else {}

    def sync(self, *_: object) -> None:
        """Ask the worker for what changed; one request in flight, the latest change wins."""
        if self.changed_at is None:
            self.changed_at = time.perf_counter()
        if not self.controller.ready:
            return
        if self._syncing:
            self._dirty = True
            return
        self._syncing = True
        known = self.known() if self._pending is None else {}
        self.controller.worker.submit(lambda s: s.meshes(known), "viewport meshes",
                                      on_done=self._arrived, on_error=self._sync_failed)

    @property
    def idle(self) -> bool:
        """No mesh request in flight and the last reply drawn."""
        return not self._syncing and not self._dirty and self._pending is None and self.frames > 0

    def _arrived(self, reply: tuple[dict, list[bytes]]) -> None:
        self._syncing = False
        self._pending = reply
        self.update()
        if self._dirty:
            self._dirty = False
            self.sync()

    def _sync_failed(self, exc: BaseException) -> None:
        self._syncing = False
        self.controller.sig_error.emit(f"viewport: reading the scene's meshes failed: {exc}")

    # -- GL --------------------------------------------------------------------------------
    def initializeGL(self) -> None:
        try:
            import moderngl

            from studio.viewport.gl import SceneRenderer

            self.ctx = moderngl.create_context(require=330)
            self.renderer = SceneRenderer(self.ctx)
            guard_llvm(self.ctx.info.get("GL_RENDERER", ""))
        except Exception as exc:  # no usable OpenGL 3.3: the panel falls back to worker renders
            log.warning("live viewport unavailable: %s", exc)
            self.failed = str(exc)
            QTimer.singleShot(0, lambda: self.sig_failed.emit(self.failed))

    def view_math(self) -> ViewMath:
        r = self.devicePixelRatio()
        return ViewMath(self.camera, int(self.width() * r), int(self.height() * r), ortho=self.view_name != "orbit")

    def paintGL(self) -> None:
        if self.renderer is None:
            return
        if self._pending is not None:
            objects, blobs = self._pending
            self._pending = None
            self.renderer.apply(objects["objects"], blobs)
            if self.changed_at is not None:
                self._frame_after_change = True
        fbo = self.ctx.detect_framebuffer(self.defaultFramebufferObject())
        fbo.use()
        vm = self.view_math()
        self.ctx.viewport = (0, 0, vm.width, vm.height)
        self.renderer.draw(vm, self.controller.scene.selection, self.hovered, self.gizmo(vm))
        if self.box_mode and self._press is not None and self._last is not None:
            self.renderer.draw_box(vm, self._device_px(self._press), self._device_px(self._last))
        self.frames += 1
        if self._frame_after_change:
            self.ctx.finish()
            self.scene_to_frame_s = time.perf_counter() - self.changed_at
            self.changed_at, self._frame_after_change = None, False
        grid = length_text(self.renderer.grid_step, self.unit())  # in the unit View → Units shows
        shown = self.view_name if self.view_name == "orbit" else f"{self.view_name} (ortho)"
        self.sig_status.emit(f"grid {grid}  ·  {shown}")
        self.sig_frame.emit()

    # -- selection and gizmo -----------------------------------------------------------------
    def selected_mesh(self):
        name = self.controller.scene.selected
        return self.renderer.meshes.get(name) if self.renderer and name else None

    def gizmo(self, vm: ViewMath) -> tuple[np.ndarray, float, int | None, np.ndarray] | None:
        """(origin, arrow length in world units, the handle being dragged, the model matrix)."""
        m = self.selected_mesh()
        if m is None:
            return None
        origin = m.model[:3, 3].copy()
        length = GIZMO_PX * self.devicePixelRatio() / vm.pixels_per_unit(origin)
        return origin, length, self.drag_axis, m.model.copy()

    def pick(self, pos: QPointF):
        """What is under a point in this window's coordinates: a gizmo axis, a name or None."""
        if self.renderer is None:
            return None
        self.makeCurrent()
        try:
            vm = self.view_math()
            r = self.devicePixelRatio()
            return self.renderer.pick(vm, int(pos.x() * r), int(pos.y() * r), self.gizmo(vm))
        finally:
            self.doneCurrent()

    def _device_px(self, pos: QPointF) -> np.ndarray:
        r = self.devicePixelRatio()
        return np.array([pos.x() * r, pos.y() * r])

    def _drag_to(self, pos: QPointF) -> None:
        """Move or turn the selection as the pointer, now at `pos`, says (not sent yet)."""
        origin = self._drag_base[:3, 3]
        t = drag_amount(self.view_math(), origin, self.drag_axis, self._device_px(self._press),
                        self._device_px(pos), self._snap, self._drag_base, self._drag_length)
        self._apply_drag(t)

    def _apply_drag(self, t: float) -> None:
        for name, base in self._drag_bases.items():
            if name in self.renderer.meshes:
                self.renderer.meshes[name].model = dragged_model(base, self.drag_axis, t)
        self.drag_offset = t
        self.sig_readout.emit(self.readout(self.drag_axis, t))

    def unit(self) -> str:
        scene = self.controller.scene
        return display_unit(scene.objects, getattr(scene, "units", "auto"))

    def readout(self, handle: int, t: float) -> str:
        """The drag's numbers as a person reads them: Δx 25 mm, Rz 30°, Sx ×1.2."""
        axis = AXES[handle % 3].lower()
        if handle < 3:
            return f"Δ{axis} {'+' if t >= 0 else ''}{length_text(t, self.unit())}"
        if handle < 6:
            return f"R{axis} {t:+.1f}°"
        return f"S{axis} ×{t:.3g}"

    def _grab(self, handle: int) -> None:
        """Start moving the selection by handle `handle` (a drag, or a typed G/R/S)."""
        meshes = self.renderer.meshes
        self.drag_axis, self.drag_offset = handle, no_change(handle)
        self._drag_base = self.selected_mesh().model.copy()
        self._drag_bases = {n: meshes[n].model.copy() for n in self.controller.scene.selection if n in meshes}

    def cancel_drag(self) -> bool:
        if self.box_mode or self.typed is not None:
            self.box_mode, self.typed = False, None
            self.sig_readout.emit("")
            if self.drag_axis is None:
                return True
        if self.drag_axis is None:
            return False
        self._apply_drag(no_change(self.drag_axis))
        self.drag_axis, self._press, self.typed = None, None, None
        self.sig_readout.emit("")
        self.update()
        return True

    def _finish_drag(self) -> None:
        axis, t, bases = self.drag_axis, self.drag_offset, self._drag_bases
        self.drag_axis, self.drag_offset, self._drag_bases = None, 0.0, {}
        self.sig_readout.emit("")
        if self.selected_mesh() is None or abs(t - no_change(axis)) < 1e-12:
            self.update()
            return
        calls = [("transform", self._drag_args(name, base, axis, t)) for name, base in bases.items()]
        self._send(calls)

    def _send(self, calls: list[tuple[str, dict]]) -> None:
        n = len(calls)
        label = calls[0][1]["name"] if n == 1 else f"{n} objects"
        try:
            self.controller.manual_calls(calls, f"transform {label}")
        except Exception as exc:
            self.controller.sig_error.emit(f"move: {exc}")
        self.update()

    def _drag_args(self, name: str, base: np.ndarray, axis: int, t: float) -> dict:
        obj = self.controller.scene.get(name) or {}
        if axis >= 6:  # a factor along the object's own axis: Blender's `scale` is per axis
            scale = [float(v) for v in obj.get("scale", [1.0, 1.0, 1.0])]
            scale[axis % 3] = round(scale[axis % 3] * t, 6)
            return {"name": name, "scale": scale}
        if axis >= 3:  # a rotation about the world axis, composed with the object's own
            return {"name": name, "rotation_deg": rotated_euler(obj.get("rotation_deg", [0.0, 0.0, 0.0]),
                                                                axis % 3, t)}
        m = self.renderer.meshes.get(name)
        location = [float(v) for v in (m.location if m is not None else base[:3, 3])]
        location[axis] = round(location[axis] + t, 6)
        if m is not None:
            m.location = location
        return {"name": name, "location": location}

    # -- views -------------------------------------------------------------------------------
    def set_view(self, name: str) -> None:
        az, el = VIEWS[name]
        self.camera.azimuth_deg, self.camera.elevation_deg = az, el
        self.view_name = name
        self.update()

    def frame_all(self) -> None:
        if self.renderer is not None:
            self.camera.frame(self.renderer.bounds())
        self.update()

    def frame_selected(self) -> None:
        """Zoom to fit the selection, from where the camera looks now (its view stays)."""
        meshes = [self.renderer.meshes[n] for n in self.controller.scene.selection
                  if self.renderer is not None and n in self.renderer.meshes]
        if not meshes:
            return self.frame_all()
        boxes = [m.world_bounds() for m in meshes]
        lo = [min(float(b[0][i]) for b in boxes) for i in range(3)]
        hi = [max(float(b[1][i]) for b in boxes) for i in range(3)]
        self.camera.frame((lo, hi))
        self.update()

    # -- events ------------------------------------------------------------------------------
    def mousePressEvent(self, event) -> None:
        self._press = self._last = event.position()
        self._button = event.button()
        self._moved = False
        self._snap = bool(event.modifiers() & Qt.KeyboardModifier.ControlModifier)
        if event.button() == Qt.MouseButton.LeftButton and not self.box_mode:
            hit = self.pick(event.position())
            if isinstance(hit, int) and self.selected_mesh() is not None and self.typed is None:
                self._grab(hit)
                self._drag_length = self.gizmo(self.view_math())[1]
                self.update()

    def mouseMoveEvent(self, event) -> None:
        pos = event.position()
        if self._press is None:
            self._hover_at = pos
            if not self._hover_timer.isActive():
                self._hover_timer.start()
            return
        if (pos - self._press).manhattanLength() > CLICK_SLOP_PX:
            self._moved = True
        self._snap = bool(event.modifiers() & Qt.KeyboardModifier.ControlModifier)
        if self.drag_axis is not None:
            self._drag_to(pos)
        elif self.box_mode:
            self.sig_readout.emit("Box select: release to select what lies inside")
        else:
            delta = pos - self._last
            pan = (self._button == Qt.MouseButton.MiddleButton
                   or bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier))
            self.drag_by(delta.x(), delta.y(), pan)
        self._last = pos
        self.update()

    def mouseReleaseEvent(self, event) -> None:
        if self.drag_axis is not None:  # the release decides: its position, Ctrl held or not
            self._snap = bool(event.modifiers() & Qt.KeyboardModifier.ControlModifier)
            self._drag_to(event.position())
            self._press = None
            self._finish_drag()
            return
        shift = bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
        if self.box_mode and self._press is not None and event.button() == Qt.MouseButton.LeftButton:
            self._box_select(self._press, event.position(), shift)
        elif self._press is not None and not self._moved and event.button() == Qt.MouseButton.LeftButton:
            hit = self.pick(event.position())
            if shift and isinstance(hit, str):
                self.controller.scene.toggle(hit)
            elif not shift:
                self.controller.scene.select(hit if isinstance(hit, str) else None)
        self._press = None
        self.update()

    def event(self, event) -> bool:
        # While a typed G/R/S is open every key is its own (digits, sign, point, X/Y/Z in either
        # case, Backspace, Enter, Esc): claimed before the window's shortcuts see it, so 0, 1,
        # 3, 7 and the other view keys do nothing until Enter or Esc closes it.
        if event.type() == QEvent.Type.ShortcutOverride and self.typed is not None:
            event.accept()
            return True
        return super().event(event)

    def keyPressEvent(self, event) -> None:
        if self.typed is not None:
            return self._typed_key(event)
        mods = event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
        self.sig_key.emit(QKeySequence(QKeyCombination(mods, Qt.Key(event.key()))))

    def wheelEvent(self, event) -> None:
        self.camera.zoom(event.angleDelta().y() / 120.0)
        self.update()

    def drag_by(self, dx: float, dy: float, pan: bool = False) -> None:
        self.view_name = "orbit"
        self.camera.drag(dx, dy, pan, max(1, min(self.width(), self.height())))
        self.update()

    def _hover_pick(self) -> None:
        if self._hover_at is None or self._press is not None:
            return
        hit = self.pick(self._hover_at)
        name = hit if isinstance(hit, str) else None
        if name != self.hovered:
            self.hovered = name
            self.update()

    def release(self) -> None:
        if self.renderer is not None:
            self.makeCurrent()
            self.renderer.release()
            self.doneCurrent()
