"""Capturing what a widget shows: `mss` from the real screen, `QWidget.grab` when offscreen."""

from __future__ import annotations

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPoint
from PySide6.QtGui import QGuiApplication, QImage
from PySide6.QtWidgets import QWidget

OFFSCREEN = ("offscreen", "minimal", "vnc")


def on_real_display() -> bool:
    return QGuiApplication.platformName() not in OFFSCREEN


def screen_capture(widget: QWidget) -> QImage:
    """The widget's on-screen pixels as the display shows them (needs a real display)."""
    import mss

    ratio = widget.devicePixelRatioF()
    top_left = widget.mapToGlobal(QPoint(0, 0))
    region = {"left": int(top_left.x() * ratio), "top": int(top_left.y() * ratio),
              "width": int(widget.width() * ratio), "height": int(widget.height() * ratio)}
    with mss.MSS() as sct:
        shot = sct.grab(region)
        data = bytes(shot.bgra)
    image = QImage(data, shot.width, shot.height, shot.width * 4, QImage.Format.Format_ARGB32)
    return image.copy()  # own the pixels: `data` goes away


def capture(widget: QWidget) -> QImage:
    """What the person sees in `widget`: the screen when there is one, else the widget's own paint."""
    if on_real_display() and widget.isVisible():
        return screen_capture(widget)
    return widget.grab().toImage()


def png_bytes(image: QImage) -> bytes:
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    return bytes(data.data())
