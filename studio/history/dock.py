"""History: the undo stack (each entry one successful mutating call) and named snapshots.

Undo sends the runtime's `undo`; Redo sends the undone call again. Both are recorded steps
of the demonstration, so a replay sees exactly what the person did. The list follows the
selection (viewport, outliner): the steps that touched the selected object are marked (bold,
a dot) and the newest of them is scrolled into view.
"""

from __future__ import annotations

import shiboken6
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QPushButton,
    QStyledItemDelegate,
    QUndoView,
    QVBoxLayout,
    QWidget,
)

# the arguments of a call that name scene objects (snapshot/restore name snapshots, not objects)
OBJECT_KEYS = ("name", "new_name", "target", "cutter", "child", "parent", "into", "others")


def touched_names(tool: str, args: dict) -> set[str]:
    """The objects a call named."""
    if tool in ("snapshot", "restore", "undo"):
        return set()
    out: set[str] = set()
    for key in OBJECT_KEYS:
        value = args.get(key)
        values = value if isinstance(value, list) else [value]
        out |= {v for v in values if isinstance(v, str) and v}
    return out


def command_names(command) -> set[str]:
    """The objects an undo-stack entry touched: one call's, or every call of an agent run."""
    calls = getattr(command, "calls", None)
    if calls is not None:
        return set().union(*(touched_names(c["tool"], c.get("args", {})) for c in calls))
    tool, args = getattr(command, "tool", None), getattr(command, "args", None)
    if tool and isinstance(args, dict):
        return touched_names(tool, args)
    # a macro (an agent run's entry while it is open, and after it closed): its children's
    return set().union(*(command_names(command.child(i)) for i in range(command.childCount())))


class _Marked(QStyledItemDelegate):
    """Draws the entries that touched the selected object in bold, behind a dot."""

    def __init__(self, dock: HistoryDock) -> None:
        super().__init__(dock.view)
        self.dock = dock

    def initStyleOption(self, option, index) -> None:
        super().initStyleOption(option, index)
        if index.row() in self.dock.marked:
            option.font.setBold(True)
            option.text = "\u25cf " + option.text


class HistoryDock(QWidget):
    def __init__(self, controller, parent=None) -> None:
        super().__init__(parent)
        self.controller = controller
        stack = controller.undo_stack
        self.view = QUndoView(stack)
        self.view.setEmptyLabel("(start)")
        self.marked: set[int] = set()  # rows (0 is "(start)") that touched the selected object
        self.view.setItemDelegate(_Marked(self))
        controller.scene.selection_changed.connect(lambda _name: self.follow_selection())
        stack.indexChanged.connect(lambda _i: self.follow_selection(scroll=False))  # the view shows its row
        self.undo_button, self.redo_button = QPushButton("Undo"), QPushButton("Redo")
        self.undo_button.clicked.connect(stack.undo)
        self.redo_button.clicked.connect(stack.redo)
        stack.canUndoChanged.connect(self.undo_button.setEnabled)
        stack.canRedoChanged.connect(self.redo_button.setEnabled)
        self.undo_button.setEnabled(False)
        self.redo_button.setEnabled(False)
        self.snapshot_name = QLineEdit()
        self.snapshot_name.setPlaceholderText("snapshot name")
        take, restore = QPushButton("Snapshot"), QPushButton("Restore")
        take.clicked.connect(self.take_snapshot)
        restore.clicked.connect(self.restore_snapshot)
        self.snapshots = QListWidget()
        self.snapshots.setMaximumHeight(90)
        self.snapshots.currentTextChanged.connect(self.snapshot_name.setText)
        row = QHBoxLayout()
        row.addWidget(self.undo_button)
        row.addWidget(self.redo_button)
        snap = QHBoxLayout()
        snap.addWidget(self.snapshot_name, 1)
        snap.addWidget(take)
        snap.addWidget(restore)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.view, 1)
        layout.addLayout(snap)
        layout.addWidget(self.snapshots)

    def follow_selection(self, scroll: bool = True) -> None:
        """Mark the steps that touched the selected object; show the newest of them."""
        stack = self.controller.undo_stack
        if not (shiboken6.isValid(self) and shiboken6.isValid(stack)):
            return  # the window is closing: the scene model (no Qt) outlives the widgets
        name = self.controller.scene.selected
        self.marked = ({i + 1 for i in range(stack.count()) if name in command_names(stack.command(i))}
                       if name else set())
        if self.marked and scroll:
            self.view.scrollTo(self.view.model().index(max(self.marked), 0))
        self.view.viewport().update()

    def take_snapshot(self) -> None:
        name = self.snapshot_name.text().strip() or f"snap{self.snapshots.count() + 1}"
        error = self.controller.validate("snapshot", {"name": name})
        if error:
            self.controller.sig_error.emit(error)
            return

        def done(result) -> None:
            if result.ok and not self.snapshots.findItems(name, self._exact()):
                self.snapshots.addItem(name)

        self.controller.worker.call("snapshot", {"name": name}, origin="human", on_done=done)

    def restore_snapshot(self) -> None:
        name = self.snapshot_name.text().strip()
        if name:
            self.controller.manual_call("restore", {"name": name})

    @staticmethod
    def _exact():
        from PySide6.QtCore import Qt

        return Qt.MatchFlag.MatchExactly
