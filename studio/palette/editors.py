"""Field editors the generated forms use beyond a line edit: a Python code editor (line
numbers, highlighting) for scripts, and a colour field with a picker."""

from __future__ import annotations

import keyword
import re

from PySide6.QtCore import QRect, QRegularExpression, QSize, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QPainter,
    QSyntaxHighlighter,
    QTextCharFormat,
)
from PySide6.QtWidgets import (
    QColorDialog,
    QHBoxLayout,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QWidget,
)

COLOR_PATTERN = re.compile(r"^#[0-9A-Fa-f]{6}$")


def _fmt(color: str, bold: bool = False, italic: bool = False) -> QTextCharFormat:
    f = QTextCharFormat()
    f.setForeground(QColor(color))
    if bold:
        f.setFontWeight(QFont.Weight.Bold)
    f.setFontItalic(italic)
    return f


class PythonHighlighter(QSyntaxHighlighter):
    """Keywords, builtins, numbers, strings and comments (one line at a time: no multi-line
    strings, enough for a CadQuery script)."""

    def __init__(self, document) -> None:
        super().__init__(document)
        words = "|".join(keyword.kwlist)
        self.rules = [
            (QRegularExpression(rf"\b({words})\b"), _fmt("#c678dd", bold=True)),
            (QRegularExpression(r"\b(cq|show_object|result|math|True|False|None|self)\b"), _fmt("#56b6c2")),
            (QRegularExpression(r"\b[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?\b"), _fmt("#d19a66")),
            (QRegularExpression(r"\"[^\"\\n]*\"|'[^'\\n]*'"), _fmt("#98c379")),
            (QRegularExpression(r"#[^\n]*"), _fmt("#7f848e", italic=True)),
        ]

    def highlightBlock(self, text: str) -> None:
        for pattern, fmt in self.rules:
            it = pattern.globalMatch(text)
            while it.hasNext():
                m = it.next()
                self.setFormat(m.capturedStart(), m.capturedLength(), fmt)


class _Gutter(QWidget):
    def __init__(self, editor: CodeEditor) -> None:
        super().__init__(editor)
        self.editor = editor

    def sizeHint(self) -> QSize:
        return QSize(self.editor.gutter_width(), 0)

    def paintEvent(self, event) -> None:
        self.editor.paint_gutter(event)


class CodeEditor(QPlainTextEdit):
    """A multi-line, monospaced editor with line numbers and Python highlighting."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setTabStopDistance(4 * self.fontMetrics().horizontalAdvance(" "))
        self.setMinimumHeight(12 * self.fontMetrics().height())
        self.gutter = _Gutter(self)
        self.highlighter = PythonHighlighter(self.document())
        self.blockCountChanged.connect(lambda _n: self.setViewportMargins(self.gutter_width(), 0, 0, 0))
        self.updateRequest.connect(self._scroll_gutter)
        self.setViewportMargins(self.gutter_width(), 0, 0, 0)

    def text(self) -> str:
        return self.toPlainText()

    def setText(self, text: str) -> None:
        self.setPlainText(text)

    def gutter_width(self) -> int:
        digits = max(2, len(str(self.blockCount())))
        return 10 + self.fontMetrics().horizontalAdvance("9") * digits

    def _scroll_gutter(self, rect: QRect, dy: int) -> None:
        if dy:
            self.gutter.scroll(0, dy)
        else:
            self.gutter.update(0, rect.y(), self.gutter.width(), rect.height())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        r = self.contentsRect()
        self.gutter.setGeometry(QRect(r.left(), r.top(), self.gutter_width(), r.height()))

    def paint_gutter(self, event) -> None:
        p = QPainter(self.gutter)
        pal = self.palette()
        p.fillRect(event.rect(), pal.alternateBase())
        p.setPen(pal.placeholderText().color())
        block = self.firstVisibleBlock()
        top = round(self.blockBoundingGeometry(block).translated(self.contentOffset()).top())
        h = self.fontMetrics().height()
        while block.isValid() and top <= event.rect().bottom():
            if block.isVisible():
                p.drawText(0, top, self.gutter.width() - 5, h, Qt.AlignmentFlag.AlignRight,
                           str(block.blockNumber() + 1))
            top += round(self.blockBoundingRect(block).height())
            block = block.next()
        p.end()


class ColorField(QWidget):
    """`#RRGGBB` as text, with a swatch button that opens a colour picker."""

    changed = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.edit = QLineEdit()
        self.edit.setPlaceholderText("#RRGGBB")
        self.swatch = QPushButton()
        self.swatch.setObjectName("swatch")
        self.swatch.setFixedWidth(36)
        self.swatch.setToolTip("Pick a colour")
        self.swatch.clicked.connect(self.pick)
        self.edit.textChanged.connect(self._show)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.edit, 1)
        row.addWidget(self.swatch)
        self.dialog: QColorDialog | None = None

    def text(self) -> str:
        return self.edit.text()

    def setText(self, text: str) -> None:
        self.edit.setText(text)

    def setPlaceholderText(self, text: str) -> None:
        self.edit.setPlaceholderText(text)

    def _show(self, text: str) -> None:
        ok = bool(COLOR_PATTERN.match(text.strip()))
        self.swatch.setStyleSheet(f"background: {text.strip()};" if ok else "")
        if ok:
            self.changed.emit(text.strip().upper())

    def pick(self) -> None:
        """Open the picker (non-blocking); the chosen colour fills the field."""
        start = QColor(self.text()) if COLOR_PATTERN.match(self.text().strip()) else QColor("#B4B4B4")
        self.dialog = QColorDialog(start, self)
        self.dialog.colorSelected.connect(lambda c: self.setText(c.name().upper()))
        self.dialog.open()
