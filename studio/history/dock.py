"""History: the undo stack (each entry one successful mutating call) and named snapshots.

Undo sends the runtime's `undo`; Redo sends the undone call again. Both are recorded steps
of the demonstration, so a replay sees exactly what the person did.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QPushButton,
    QUndoView,
    QVBoxLayout,
    QWidget,
)


class HistoryDock(QWidget):
    def __init__(self, controller, parent=None) -> None:
        super().__init__(parent)
        self.controller = controller
        stack = controller.undo_stack
        self.view = QUndoView(stack)
        self.view.setEmptyLabel("(start)")
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
