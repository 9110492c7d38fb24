"""The central viewport: the scene rendered by the runtime, from an orbit camera or fixed views.

Drag to orbit, wheel to zoom, middle- or shift-drag to pan. While dragging, frames are
rendered small (draft) and the newest request replaces any pending one (the session
worker keeps one slot), so a drag never queues stale frames; on release one full frame.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QPoint, QRect, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPainter, QPixmap
from PySide6.QtWidgets import QWidget

from studio.foreign import png_image
from studio.models.orbit import OrbitCamera
from studio.runtime.worker import ViewRequest

MODES = ("orbit", "montage", "iso", "front", "top", "right", "back", "left", "bottom")


class Viewport(QWidget):
    sig_frame = Signal(object)  # ViewRequest of the frame now shown

    def __init__(self, controller, size: int = 384, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("viewport")
        self.controller = controller
        self.camera = OrbitCamera()
        self.mode = "orbit"
        self.shading = "solid"
        self.size = size
        self.draft_size = 128
        self.pixmap: QPixmap | None = None
        self.frame_png: bytes | None = None
        self.shown_serial = 0
        self.frames = 0  # frames shown (the benchmark counts them)
        self._serial = 0
        self._drag: QPoint | None = None
        self._drag_button = Qt.MouseButton.NoButton
        self._framed = False
        self.rendering = True  # False while the live GPU viewport shows the scene instead
        self.setMinimumSize(320, 320)
        self.setMouseTracking(False)
        self.setFocusPolicy(Qt.FocusPolicy.WheelFocus)
        controller.worker.sig_view.connect(self._on_view)
        controller.sig_scene_changed.connect(self.request)
        controller.sig_ready.connect(self.request)
        controller.scene.changed.connect(self._maybe_frame)

    # -- requests ------------------------------------------------------------------------
    def set_mode(self, mode: str) -> None:
        self.mode = mode
        self.request()

    def set_wireframe(self, on: bool) -> None:
        self.shading = "wireframe" if on else "solid"
        self.request()

    def request(self, draft: bool = False) -> None:
        if not self.controller.ready or not self.rendering:
            return
        size = self.draft_size if draft else self.size
        if self.mode == "orbit":
            args = self.camera.render_args(size)
        elif self.mode == "montage":
            args = {"size": max(64, size // 2)}  # the four-view montage the model sees, tiled 2x2
        else:
            args = {"views": [self.mode], "size": size}
        if self.shading != "solid":
            args = {**args, "shading": self.shading}
        self._serial += 1
        self.controller.worker.request_view(ViewRequest(args, self._serial, draft))

    def frame_scene(self) -> None:
        self.camera.frame(self.controller.scene.bounds())
        self.request()

    def reframe_on_next_scene(self, *_: object) -> None:
        """Frame the whole scene when it next arrives (after an agent run, a restore...)."""
        self._framed = False

    @property
    def settled(self) -> bool:
        """Framed, and the newest request is the frame on screen."""
        return (self._framed or not self.controller.scene.objects) and self.shown_serial >= self._serial

    def _maybe_frame(self) -> None:
        if not self._framed and self.controller.scene.objects:
            self._framed = True
            self.camera.frame(self.controller.scene.bounds())
            self.request()

    def _on_view(self, request: ViewRequest, result) -> None:
        if request.serial < self.shown_serial:
            return  # an older frame finished after a newer one was shown
        if not result.ok or not result.images:
            if result.error is not None:
                self.controller.sig_error.emit(f"render: {result.error.message}")
            return
        image = png_image(result.images[0])
        if image.isNull():
            return
        self.shown_serial = request.serial
        self.pixmap = QPixmap.fromImage(image)
        self.frame_png = result.images[0]
        self.frames += 1
        self.last_frame_at = time.perf_counter()
        self.update()
        self.sig_frame.emit(request)

    # -- painting ----------------------------------------------------------------------------
    def image_rect(self) -> QRect:
        """Where the frame is drawn: centred, scaled to fit, aspect kept."""
        if self.pixmap is None:
            return QRect()
        scaled = self.pixmap.size().scaled(self.size_hint_area(), Qt.AspectRatioMode.KeepAspectRatio)
        x = (self.width() - scaled.width()) // 2
        y = (self.height() - scaled.height()) // 2
        return QRect(x, y, scaled.width(), scaled.height())

    def size_hint_area(self):
        return self.rect().size()

    def paintEvent(self, event) -> None:
        p = QPainter(self)
        p.fillRect(self.rect(), self.palette().window().color().darker(115))
        if self.pixmap is None:
            p.setPen(QColor("#8a8f98"))
            p.setFont(QFont(self.font().family(), 11))
            text = "Starting the tool runtime..." if not self.controller.ready else "Rendering..."
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, text)
        else:
            p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
            p.drawPixmap(self.image_rect(), self.pixmap)
            p.setPen(QColor("#b8bcc4"))
            p.drawText(self.rect().adjusted(8, 6, -8, -6), Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft,
                       self.mode if self.mode != "orbit" else f"orbit  az {self.camera.azimuth_deg:.0f}°  "
                       f"el {self.camera.elevation_deg:.0f}°")
        p.end()

    # -- interaction ------------------------------------------------------------------------
    def mousePressEvent(self, event) -> None:
        self._drag = event.position().toPoint()
        self._drag_button = event.button()
        if self.mode != "orbit":
            self.mode = "orbit"

    def mouseMoveEvent(self, event) -> None:
        if self._drag is None:
            return
        pos = event.position().toPoint()
        delta = pos - self._drag
        self._drag = pos
        self.drag_by(delta.x(), delta.y(), pan=self._drag_button == Qt.MouseButton.MiddleButton
                     or bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier))

    def mouseReleaseEvent(self, event) -> None:
        self._drag = None
        self.request()  # the full-resolution frame

    def wheelEvent(self, event) -> None:
        self.mode = "orbit"
        self.camera.zoom(event.angleDelta().y() / 120.0)
        self.request()

    def drag_by(self, dx: float, dy: float, pan: bool = False) -> None:
        """One drag movement in pixels: orbit (or pan) and ask for a draft frame."""
        self.mode = "orbit"
        self.camera.drag(dx, dy, pan, max(1, min(self.width(), self.height())))
        self.request(draft=True)
