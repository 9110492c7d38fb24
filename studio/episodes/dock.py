"""Episodes: browse and filter the trajectory store, see a step timeline with thumbnails,
restore the scene at a step, replay, export the selection (Parquet), delete."""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QIcon, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from studio.folders import remember, start_folder
from studio.foreign import png_image, tooltip
from tools import Session
from tools.text import printable_line

COLUMNS = ("id", "when", "source", "task", "status", "steps", "reward", "success")


class _Unclosed:
    """The studio's session lent to `replay_episode`, which opens and closes its own."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def __enter__(self):
        return self._s

    def __exit__(self, *exc: Any) -> None:
        return None


class EpisodesDock(QWidget):
    def __init__(self, controller, parent=None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.episodes: list[Any] = []
        self.steps_of: list[Any] = []
        self.last_replay: Any = None
        # tests and scripts answer "Delete …?" here: f(question) -> bool (None: a real dialog)
        self.answer_delete: Any = None
        self.delete_box: QMessageBox | None = None
        self.source = QComboBox()
        self.source.addItems(["any source", "human", "agent", "oracle", "rollout"])
        self.family = QLineEdit()
        self.family.setPlaceholderText("task family")
        self.success = QComboBox()
        self.success.addItems(["any outcome", "success", "failure"])
        refresh = QPushButton("Refresh")
        refresh.clicked.connect(self.refresh)
        for w in (self.source, self.success):
            w.currentIndexChanged.connect(self.refresh)
        self.family.returnPressed.connect(self.refresh)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._show_steps)
        self.timeline = QListWidget()
        self.timeline.setViewMode(QListWidget.ViewMode.IconMode)
        self.timeline.setFlow(QListWidget.Flow.LeftToRight)
        self.timeline.setWrapping(False)
        self.timeline.setIconSize(QSize(96, 96))
        self.timeline.setGridSize(QSize(130, 130))
        buttons = QHBoxLayout()
        for label, slot in (("Restore step", self.restore_selected_step), ("Replay", self.replay_selected),
                            ("Export...", self.export_selected), ("Delete…", self.delete_selected)):
            b = QPushButton(label)
            b.clicked.connect(slot)
            buttons.addWidget(b)
        filters = QHBoxLayout()
        filters.addWidget(self.source)
        filters.addWidget(self.family)
        filters.addWidget(self.success)
        filters.addWidget(refresh)
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.addLayout(filters)
        lv.addWidget(self.table, 1)
        right = QWidget()
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        rv.addWidget(self.timeline, 1)
        rv.addLayout(buttons)
        split = QSplitter()
        split.addWidget(left)
        split.addWidget(right)
        split.setSizes([520, 480])
        layout = QVBoxLayout(self)
        layout.addWidget(split)
        controller.sig_ready.connect(self.refresh)
        controller.sig_episode_saved.connect(lambda _id: self.refresh())  # Finish shows it at once

    def filter(self):
        from agents.store import EpisodeFilter

        source = self.source.currentText()
        success = {"success": True, "failure": False}.get(self.success.currentText())
        return EpisodeFilter(source=None if source.startswith("any") else source,
                             task_family=self.family.text().strip() or None, success=success, limit=500)

    def refresh(self) -> None:
        try:
            self.episodes = self.controller.store().list_episodes(self.filter())
        except Exception as exc:
            self.controller.sig_error.emit(f"Could not read the episode store: {exc}")
            return
        self.table.setRowCount(len(self.episodes))
        for row, e in enumerate(self.episodes):
            values = (e.id, time.strftime("%m-%d %H:%M", time.localtime(e.created_at)), e.source,
                      e.task_id or (e.prompt or "")[:40], e.status, str(e.n_steps),
                      "" if e.reward is None else f"{e.reward:.3f}",
                      "" if e.success is None else ("✔" if e.success else "✘"))
            for col, v in enumerate(values):
                self.table.setItem(row, col, QTableWidgetItem(v))
        self.table.resizeColumnsToContents()

    def selected(self) -> list[Any]:
        rows = sorted({i.row() for i in self.table.selectedItems()})
        return [self.episodes[r] for r in rows if r < len(self.episodes)]

    def select_episode(self, episode_id: str) -> None:
        for row, e in enumerate(self.episodes):
            if e.id == episode_id:
                self.table.selectRow(row)
                return

    def _show_steps(self) -> None:
        self.timeline.clear()
        chosen = self.selected()
        if not chosen:
            return
        store = self.controller.store()
        episode = chosen[0]
        self.steps_of = store.steps(episode.id)
        for step in self.steps_of:
            icon = QIcon()
            try:
                png = store.step_frame(step)
            except Exception:
                png = None
            if png:
                icon = QIcon(QPixmap.fromImage(png_image(png)))
            mark = "" if step.ok else " ✘"
            item = QListWidgetItem(icon, printable_line(f"{step.index}: {step.tool}{mark}"))
            item.setToolTip(tooltip(step.result_text or step.error_message or ""))
            item.setData(Qt.ItemDataRole.UserRole, step.index)
            self.timeline.addItem(item)

    def restore_selected_step(self) -> None:
        chosen, item = self.selected(), self.timeline.currentItem()
        if not chosen:
            return
        index = item.data(Qt.ItemDataRole.UserRole) if item else len(self.steps_of) - 1
        self.restore(chosen[0], index)

    def restore(self, episode: Any, index: int) -> None:
        """Rebuild the scene as it was after step `index` (setup, then steps 0..index)."""
        if not self.controller.confirm_replace("Restore step"):
            return
        calls = list(episode.setup) + [{"tool": s.tool, "args": s.args} for s in self.steps_of[: index + 1]]
        worker = self.controller.worker
        self.controller.drop_demonstration()

        def rebuild(s: Any) -> list[dict]:
            s.reset()
            worker.sig_reset.emit("restore")
            return [c for c in calls if s.call(c["tool"], c.get("args", {})).ok]

        def rebuilt(done: list[dict]) -> None:
            failed = len(calls) - len(done)
            self.controller.journal.reset(done)  # a later demonstration's setup: what succeeded
            self.controller.refresh()
            self.controller.sig_scene_changed.emit()
            self.controller.sig_status.emit(f"Restored {episode.id} at step {index}"
                                            + (f" ({failed} calls failed, as recorded)" if failed else ""))

        worker.submit(rebuild, "restore", on_done=rebuilt,
                      on_error=lambda e: self.controller.sig_error.emit(f"Restore failed: {e}"))

    def replay_selected(self) -> None:
        for episode in self.selected()[:1]:
            self.replay(episode.id)

    def replay(self, episode_id: str) -> None:
        from agents.store.replay import replay_episode

        if not self.controller.confirm_replace("Replay"):
            return
        store, worker = self.controller.store(), self.controller.worker
        self.controller.drop_demonstration()

        def run(s: Any):
            report = replay_episode(store, episode_id, session_factory=lambda: _Unclosed(s))
            worker.sig_reset.emit("replay")
            # the scene is the episode's end: the calls that built it start what comes next
            built = _built_by(store, episode_id) if report.matched else None
            return report, built

        def done(replayed) -> None:
            report, built = replayed
            self.last_replay = report
            if built is not None:
                self.controller.journal.reset(built)
            self.controller.refresh()
            self.controller.sig_scene_changed.emit()
            if report.matched:
                self.controller.sig_status.emit(report.summary())
            else:
                self.controller.sig_error.emit(report.summary())

        worker.submit(run, "replay", on_done=done,
                      on_error=lambda e: self.controller.sig_error.emit(f"Replay failed: {e}"))

    def export_selected(self, path: str | None = None) -> None:
        from pathlib import Path

        from agents.store import EpisodeFilter
        from agents.store.export import export_parquet

        chosen = self.selected()
        if not chosen:
            return
        if not path:
            window = self.window()
            settings = getattr(window, "settings", None)
            path = QFileDialog.getExistingDirectory(self, "Export the selected episodes to",
                                                    start_folder(window, settings))
            if not path:
                return
            remember(settings, path)
        try:
            report = export_parquet(self.controller.store(), Path(path),  # chosen by hand: all of them
                                    EpisodeFilter(ids=tuple(e.id for e in chosen)), include_untasked=True)
        except Exception as exc:
            self.controller.sig_error.emit(f"Export failed: {exc}")
            return
        self.controller.sig_status.emit(f"Exported to {path}: {report}")

    def delete_selected(self) -> bool:
        """Delete the selected episodes from the store, after the person confirms (its rows,
        frames and artifacts go; nothing else). True when they were deleted."""
        chosen = self.selected()
        if not chosen:
            return False
        what = chosen[0].id if len(chosen) == 1 else f"{len(chosen)} episodes"
        if not self._confirm_delete(f"Delete {what} from the store? Its steps, frames and files "
                                    "go with it; this cannot be undone."):
            return False
        from agents.store import StoreError

        try:
            deleted = self.controller.store().delete([e.id for e in chosen])
        except StoreError as exc:  # the open demonstration is still being recorded
            self.controller.sig_error.emit(f"Not deleted: {exc}")
            return False
        self.refresh()
        self.controller.sig_status.emit(
            f"Deleted {deleted[0] if len(deleted) == 1 else f'{len(deleted)} episodes'}")
        return True

    def _confirm_delete(self, text: str) -> bool:
        if self.answer_delete is not None:  # tests and scripts answer here
            return bool(self.answer_delete(text))
        if QApplication.platformName() == "offscreen":  # nobody to ask: nothing is deleted
            return False
        box = QMessageBox(QMessageBox.Icon.Warning, "Delete episodes", text,
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel, self)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        self.delete_box = box  # a test reaches the open dialog here
        answer = box.exec()
        self.delete_box = None
        return QMessageBox.StandardButton(answer) == QMessageBox.StandardButton.Yes


def _built_by(store: Any, episode_id: str) -> list[dict]:
    """The calls that built an episode's final scene: its setup, then its successful
    mutating steps (read on the session thread, like the replay itself)."""
    from tools import TOOLS

    return list(store.episode(episode_id).setup) + [
        {"tool": s.tool, "args": s.args} for s in store.steps(episode_id)
        if s.ok and s.tool in TOOLS and TOOLS[s.tool].mutating]
