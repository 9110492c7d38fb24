"""The window at its default size (offscreen): no clipped text in the docks (labels, table and
tree headers, combo box items), and docks keep their size when a long message arrives."""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # these tests never need a display

import pytest  # noqa: E402
from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtWidgets import (  # noqa: E402
    QComboBox,
    QDockWidget,
    QHeaderView,
    QLabel,
    QStyle,
    QStyleOptionComboBox,
)

from studio.controller import StudioController  # noqa: E402
from studio.theme import apply_theme  # noqa: E402
from studio.window import MainWindow  # noqa: E402


@pytest.fixture
def window(qtbot, qapp, tmp_path):
    apply_theme(qapp, "dark")
    controller = StudioController(data_dir=str(tmp_path / "data"))  # not started: no worker needed
    w = MainWindow(controller, QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.resize(1600, 1000)
    w.show()
    qtbot.waitExposed(w)
    qtbot.wait(50)
    yield w
    w.training.shutdown()
    w.server.shutdown()


def visible_docks(w):
    return [d for d in w.findChildren(QDockWidget) if d.isVisible() and not d.visibleRegion().isEmpty()]


def clipped(w) -> list[str]:
    out = []
    for dock in visible_docks(w):
        for label in dock.findChildren(QLabel):
            if not label.isVisible() or label.wordWrap() or not label.text() or label.textFormat() == 1:
                continue
            if "\n" in label.text() or label.pixmap() is not None and not label.pixmap().isNull():
                continue
            need = label.fontMetrics().horizontalAdvance(label.text())
            if need > label.contentsRect().width() + 1:
                out.append(f"{dock.windowTitle()}: label {label.text()!r} needs {need}px, has {label.contentsRect().width()}")
        for header in dock.findChildren(QHeaderView):
            if not header.isVisible():
                continue
            model = header.model()
            for i in range(header.count()):
                if header.isSectionHidden(i):
                    continue
                text = str(model.headerData(i, header.orientation()) or "")
                need = header.fontMetrics().horizontalAdvance(text) + 12
                if need > header.sectionSize(i):
                    out.append(f"{dock.windowTitle()}: header {text!r} needs {need}px, has {header.sectionSize(i)}")
        for combo in dock.findChildren(QComboBox):
            if not combo.isVisible():
                continue
            opt = QStyleOptionComboBox()
            combo.initStyleOption(opt)
            room = combo.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, opt,
                                                QStyle.SubControl.SC_ComboBoxEditField, combo).width()
            for i in range(combo.count()):
                need = combo.fontMetrics().horizontalAdvance(combo.itemText(i))
                if need > room:
                    out.append(f"{dock.windowTitle()}: combo item {combo.itemText(i)!r} needs {need}px, has {room}")
    return out


def settled(window, qtbot, rounds: int = 50) -> None:
    """Let the layout finish: events processed until every widget's geometry is the same on
    two rounds running (a loaded machine can take several rounds; no clock is read)."""
    from PySide6.QtWidgets import QWidget

    def shape():
        return [w.geometry().getRect() for w in window.findChildren(QWidget) if w.isVisible()]

    before = None
    for _ in range(rounds):
        qtbot.wait(20)
        now = shape()
        if now == before:
            return
        before = now


def test_no_clipped_text_at_the_default_size(window, qtbot):
    # The Task dock's family list fills when the task suite has been imported (a thread): check
    # it full (empty, it clips nothing; full, it once needed 153 px and had 126).
    qtbot.waitUntil(lambda: window.tasks.family.count() > 0, timeout=120_000)
    problems = []
    for dock in window.findChildren(QDockWidget):  # tabbed docks too: each in turn on top
        dock.raise_()
        settled(window, qtbot)
        problems += [p for p in clipped(window) if p.startswith(dock.windowTitle() + ":")]
    assert sorted(set(problems)) == []


def test_docks_keep_their_size_on_long_messages(window, qtbot):
    before = {d.windowTitle(): d.size() for d in visible_docks(window)}
    long = "a long message that goes on " * 20
    window.agent.status.setText(long)
    window.agent.attach_label.setText(long)
    window.tasks.reward.setText(long)
    window.tasks.steps.setText(long)
    window.show_error(long)
    qtbot.wait(100)
    after = {d.windowTitle(): d.size() for d in visible_docks(window)}
    assert after.keys() == before.keys()
    for title, size in after.items():  # (a wrapped label's new height may move a split by 1 px)
        assert abs(size.width() - before[title].width()) <= 1, (title, size, before[title])
        assert abs(size.height() - before[title].height()) <= 2, (title, size, before[title])
