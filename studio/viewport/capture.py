"""Capturing what a widget shows: `mss` from the real screen, `QWidget.grab` when offscreen."""

from __future__ import annotations

import logging

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPoint, QRect
from PySide6.QtGui import QGuiApplication, QImage
from PySide6.QtWidgets import QWidget

log = logging.getLogger(__name__)

OFFSCREEN = ("offscreen", "minimal", "vnc")


def on_real_display() -> bool:
    return QGuiApplication.platformName() not in OFFSCREEN


def screen_capture(widget: QWidget) -> QImage:
    """The widget's on-screen pixels as the display shows them (needs a real display)."""
    import mss

    ratio = widget.devicePixelRatioF()
    top_left = widget.mapToGlobal(QPoint(0, 0))
    # only the part on the screen: X refuses (BadMatch) a grab that reaches past its edge
    shown = QRect(top_left, widget.size()).intersected(widget.screen().virtualGeometry())
    if shown.isEmpty():
        raise OSError("the window is not on the screen")
    region = {"left": int(shown.x() * ratio), "top": int(shown.y() * ratio),
              "width": int(shown.width() * ratio), "height": int(shown.height() * ratio)}
    with mss.MSS() as sct:
        shot = sct.grab(region)
        data = bytes(shot.bgra)
    image = QImage(data, shot.width, shot.height, shot.width * 4, QImage.Format.Format_ARGB32)
    return image.copy()  # own the pixels: `data` goes away


def capture(widget: QWidget) -> QImage:
    """What the person sees in `widget`: the screen when there is one, else the widget's own
    paint (also when the screen refuses the grab: then a native GL view may come out blank)."""
    if on_real_display() and widget.isVisible():
        try:
            return screen_capture(widget)
        except Exception as exc:  # mss's X errors, a window off the screen
            log.warning("screen capture failed (%s); using the widget's own paint", str(exc).splitlines()[0])
    return widget.grab().toImage()


def png_bytes(image: QImage) -> bytes:
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    return bytes(data.data())
