"""A small line plot drawn with QPainter (QtCharts is not in PySide6-Essentials)."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QWidget

COLORS = ("#5aa9e6", "#f28c28", "#7bc96f", "#e05d5d", "#b48ead", "#e6c84c", "#4fd1c5", "#c0c0c0")


class LinePlot(QWidget):
    def __init__(self, title: str, parent=None) -> None:
        super().__init__(parent)
        self.title = title
        self.series: dict[str, list[tuple[float, float]]] = {}
        self.setMinimumSize(180, 110)

    def set_series(self, series: dict[str, list[tuple[float, float]]]) -> None:
        self.series = {k: list(v) for k, v in series.items() if v}
        self.update()

    def paintEvent(self, event) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        fg = self.palette().windowText().color()
        p.fillRect(self.rect(), self.palette().base().color())
        area = QRectF(self.rect()).adjusted(46, 22, -12, -24)
        p.setPen(fg)
        p.drawText(QRectF(self.rect()).adjusted(8, 2, -8, 0), Qt.AlignmentFlag.AlignTop, self.title)
        points = [pt for s in self.series.values() for pt in s]
        if not points:
            p.setPen(QColor("#888"))
            p.drawText(area, Qt.AlignmentFlag.AlignCenter, "no points yet")
            p.end()
            return
        x0, x1 = min(x for x, _ in points), max(x for x, _ in points)
        y0, y1 = min(y for _, y in points), max(y for _, y in points)
        if x1 == x0:
            x1 = x0 + 1
        if y1 == y0:
            y0, y1 = y0 - 0.5, y1 + 0.5
        pad = (y1 - y0) * 0.06
        y0, y1 = y0 - pad, y1 + pad

        def at(x: float, y: float) -> QPointF:
            return QPointF(area.left() + (x - x0) / (x1 - x0) * area.width(),
                           area.bottom() - (y - y0) / (y1 - y0) * area.height())

        grid = QColor(fg)
        grid.setAlpha(40)
        p.setPen(QPen(grid, 1))
        for i in range(5):
            y = area.top() + i * area.height() / 4
            p.drawLine(QPointF(area.left(), y), QPointF(area.right(), y))
            p.drawText(QRectF(0, y - 8, 42, 16), Qt.AlignmentFlag.AlignRight,
                       f"{y1 - i * (y1 - y0) / 4:.3g}")
        p.drawText(QRectF(area.left(), area.bottom() + 4, 80, 16), Qt.AlignmentFlag.AlignLeft, f"{x0:g}")
        p.drawText(QRectF(area.right() - 80, area.bottom() + 4, 80, 16), Qt.AlignmentFlag.AlignRight,
                   f"step {x1:g}")
        for i, (name, pts) in enumerate(sorted(self.series.items())):
            color = QColor(COLORS[i % len(COLORS)])
            p.setPen(QPen(color, 2))
            path = QPainterPath(at(*pts[0]))
            for pt in pts[1:]:
                path.lineTo(at(*pt))
            p.drawPath(path)
            if len(pts) == 1:
                p.drawEllipse(at(*pts[0]), 3, 3)
            p.drawText(QPointF(area.left() + 8 + (i % 3) * 110, area.top() + 14 + (i // 3) * 14), name)
        p.end()
