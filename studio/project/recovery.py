"""The offer to recover the autosaved scene after a studio that did not close cleanly: a bar
above the viewport, never a dialog (a scripted or unattended start must not wait on it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton


class RecoveryBanner(QFrame):
    def __init__(self, window, path: Path, open_project: Callable[[Path], object]) -> None:
        super().__init__()
        self.setObjectName("recoverybar")
        self.path, self._open = path, open_project
        text = QLabel("The studio did not close cleanly last time. Recover the autosaved scene?")
        text.setWordWrap(True)
        self.recover_button = QPushButton("Recover")
        self.recover_button.clicked.connect(self.recover)
        dismiss = QPushButton("Dismiss")
        dismiss.clicked.connect(self.hide)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 8, 4)
        row.addWidget(text, 1)
        row.addWidget(self.recover_button)
        row.addWidget(dismiss)
        window.centralWidget().layout().insertWidget(0, self)

    def recover(self) -> None:
        self.hide()
        self._open(self.path)
