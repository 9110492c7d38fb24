"""Foreign text and images in widgets: what a worker, a policy or a store wrote is shown as
plain, escaped text, and a PNG is decoded only after its header passed the pixel cap.

A QLabel or a tooltip guesses rich text from its content, so an object named
`<img src=...>` would be rendered as HTML; labels that show foreign text are fixed to plain
text, and tooltips get the text converted from plain. Control and bidi characters are shown
as escapes (tools/text.py), for they reorder or hide what a person reads.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtGui import Qt as GuiQt  # convertFromPlainText lives in QtGui's Qt
from PySide6.QtWidgets import QLabel

from tools.text import printable
from tools.trust import images


def plain_label(text: str = "") -> QLabel:
    """A label that never reads its text as rich text."""
    label = QLabel(printable(text))
    label.setTextFormat(Qt.TextFormat.PlainText)
    return label


def tooltip(text: str) -> str:
    """`text` as a tooltip shows it: escaped, and marked up as plain (no tag is obeyed)."""
    return GuiQt.convertFromPlainText(printable(text), GuiQt.WhiteSpaceMode.WhiteSpacePre) if text else ""


def png_image(data: bytes | None) -> QImage:
    """The PNG as a QImage, or a null one if it is not a PNG or claims more pixels than the
    cap (checked on its header, before Qt allocates anything)."""
    if not data:
        return QImage()
    try:
        images.png_size(data)
    except images.ImageError:
        return QImage()
    return QImage.fromData(data, "PNG")
