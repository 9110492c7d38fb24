"""Review before Finish: the open episode's recorded steps, each ticked to keep, and its
prompt when it has none yet. Unticked steps are dropped from the demonstration (and so from
its export); the store refuses a drop that the replay could not follow (agents/store/revise)."""

from __future__ import annotations

import json
import logging

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLineEdit, QListWidget, QListWidgetItem, QVBoxLayout, QWidget

from tools.text import printable

log = logging.getLogger(__name__)


class StepReview(QWidget):
    sig_changed = Signal(int)  # the episode's step count (from any thread: queued to the GUI)

    def __init__(self, controller, parent=None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.dropped: set[int] = set()
        self._episode: str | None = None
        self.steps = QListWidget()
        self.steps.setToolTip("Untick a step to leave it out of the demonstration before Finish")
        self.steps.setMaximumHeight(140)
        self.steps.itemChanged.connect(self._ticked)
        self.prompt = QLineEdit()
        self.prompt.setPlaceholderText("What this demonstration builds (its prompt)")
        self.prompt.textChanged.connect(lambda text: setattr(controller.demo, "typed_prompt", text))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.steps)
        layout.addWidget(self.prompt)
        self.sig_changed.connect(self.refresh)
        controller.demo.changed.connect(self.sig_changed.emit)
        self.refresh()

    def refresh(self, *_: object) -> None:
        demo = self.controller.demo
        if demo.episode_id != self._episode or not demo.active:
            self.dropped, self._episode = set(), demo.episode_id if demo.active else None
        self.steps.blockSignals(True)
        self.steps.clear()
        steps = []
        if demo.active:
            try:
                steps = self.controller.store().steps(demo.episode_id)
            except Exception:  # the list is a view: Finish still works without it
                log.exception("reading the open episode's steps failed")
        for s in steps:
            args = printable(json.dumps(s.args)[:80])
            mark = f" — {s.error_kind}" if s.error_kind else ""
            item = QListWidgetItem(f"{s.index + 1}. {s.actor}: {s.tool} {args}{mark}")
            item.setData(Qt.ItemDataRole.UserRole, s.index)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(
                Qt.CheckState.Unchecked if s.index in self.dropped else Qt.CheckState.Checked
            )
            if s.error_kind:
                item.setForeground(QColor("#e07a5f"))
            self.steps.addItem(item)
        self.steps.blockSignals(False)
        self.steps.scrollToBottom()
        self.steps.setVisible(bool(steps))
        self.prompt.setVisible(demo.active and not demo.episode_prompt)

    def _ticked(self, item: QListWidgetItem) -> None:
        index = item.data(Qt.ItemDataRole.UserRole)
        if item.checkState() == Qt.CheckState.Checked:
            self.dropped.discard(index)
        else:
            self.dropped.add(index)

    def drop(self, *indices: int) -> None:
        """Untick steps by index (what a person's clicks do)."""
        for i in range(self.steps.count()):
            item = self.steps.item(i)
            if item.data(Qt.ItemDataRole.UserRole) in indices:
                item.setCheckState(Qt.CheckState.Unchecked)

    def finish(self) -> bool:
        """Finish with the unticked steps dropped; False (and the reason shown) when the
        episode still needs a prompt or the drop would not replay."""
        c = self.controller
        prompt = None if self.prompt.isHidden() else self.prompt.text().strip()
        if c.demo.active and not c.demo.episode_prompt and not prompt and c.task is None:
            c.sig_error.emit("Say what this demonstration builds (its prompt) before Finish.")
            return False
        ok = c.finish_demonstration(check=True, drop=set(self.dropped), prompt=prompt)
        if ok:
            self.prompt.clear()
            self.refresh()
        return ok
