"""Task picker: choose a task (family, level, seed), see its prompt and target, and the live
reward of the scene as you model; Finish checks it and saves the demonstration."""

from __future__ import annotations

import threading

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPixmap
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from studio.foreign import png_image
from studio.tasks.review import StepReview


class TaskDock(QWidget):
    sig_families = Signal(object)  # the task families' names, once the suite is imported

    def __init__(self, controller, parent=None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.family = QComboBox()
        # never narrower than its longest family name
        self.family.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.family.setMinimumContentsLength(len("drawing_reconstruction"))
        self.level = QSpinBox()
        self.level.setRange(1, 3)
        self.seed = QSpinBox()
        self.seed.setRange(0, 1_000_000)
        self.seed.setValue(42)
        self.task_id = QLineEdit()
        self.task_id.setPlaceholderText("family:level:seed")
        for w in (self.family, self.level, self.seed):
            (w.currentTextChanged if isinstance(w, QComboBox) else w.valueChanged).connect(self._compose)
        load, clear = QPushButton("Load task"), QPushButton("No task")
        load.setObjectName("accent")
        load.clicked.connect(self.load)
        clear.clicked.connect(lambda: controller.load_task(None))
        self.prompt = QLabel("No task chosen: model freely.")
        self.prompt.setWordWrap(True)
        self.prompt.setMinimumHeight(64)
        self.prompt.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.prompt.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.target = QLabel()
        self.target.setMinimumHeight(110)
        self.target.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.reward = QLabel("reward —")
        self.reward.setObjectName("reward")
        self.components = QLabel("")
        self.components.setWordWrap(True)
        self.components.setObjectName("hint")
        finish = QPushButton("Finish (check and save demonstration)")
        self.review = StepReview(controller)
        finish.clicked.connect(self.review.finish)
        finish.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # a later Space never finishes again
        self.steps = QLabel("")
        self.steps.setObjectName("hint")
        # the family on a row of its own: beside level and seed the dock's column left it 150 px,
        # and 'drawing_reconstruction' needs more
        row = QHBoxLayout()
        row.addWidget(QLabel("level"))
        row.addWidget(self.level, 1)
        row.addWidget(QLabel("seed"))
        row.addWidget(self.seed, 1)
        buttons = QHBoxLayout()
        buttons.addWidget(self.task_id, 1)
        buttons.addWidget(load)
        buttons.addWidget(clear)
        layout = QVBoxLayout(self)
        layout.addWidget(self.family)
        layout.addLayout(row)
        layout.addLayout(buttons)
        layout.addWidget(self.prompt)
        layout.addWidget(self.target, 1)
        layout.addWidget(self.reward)
        layout.addWidget(self.components)
        layout.addWidget(self.steps)
        layout.addWidget(self.review)
        layout.addWidget(finish)
        controller.sig_task.connect(self._on_task)
        controller.sig_target.connect(self._on_target)
        controller.sig_reward.connect(self._on_reward)
        self.review.sig_changed.connect(lambda n: self.steps.setText(
            f"demonstration: {n} recorded step(s) — untick one to drop it" if n else ""))
        # the task suite takes ~1.5 s to import: off the GUI thread, the combo fills when it is in
        self.sig_families.connect(self._families)
        threading.Thread(target=self._load_families, daemon=True, name="mw-task-families").start()

    def _load_families(self) -> None:
        try:
            from training import list_families

            self.sig_families.emit([f["family"] for f in list_families()])
        except Exception as exc:  # the picker still works with a typed id
            self.controller.sig_error.emit(f"Could not list task families: {exc}")

    def _families(self, names: list[str]) -> None:
        self.family.blockSignals(True)
        self.family.addItems(names)
        if self.controller.task is not None:
            self.family.setCurrentText(self.controller.task.family)
        self.family.blockSignals(False)

    def _compose(self) -> None:
        self.task_id.setText(f"{self.family.currentText()}:{self.level.value()}:{self.seed.value()}")

    def load(self) -> None:
        self.controller.load_task(self.task_id.text().strip() or None)

    def _on_task(self, task) -> None:
        self.target.clear()
        self.reward.setText("reward —")
        self.components.setText("")
        if task is None:
            self.prompt.setText("No task chosen: model freely.")
            return
        for w, value in ((self.family, task.family), (self.level, task.level), (self.seed, task.seed)):
            w.blockSignals(True)
            w.setCurrentText(value) if isinstance(w, QComboBox) else w.setValue(value)
            w.blockSignals(False)
        self.task_id.setText(task.id)
        self.prompt.setText(f"<b>{task.id}</b> (budget {task.budget} steps)<br>{task.prompt}")
        self.target.setText("rendering the target...")

    def _on_target(self, task, png) -> None:
        if png is None:
            self.target.setText("(no target image)")
            return
        pix = QPixmap.fromImage(png_image(png))
        self.target.setPixmap(pix.scaled(200, 130, Qt.AspectRatioMode.KeepAspectRatio,
                                         Qt.TransformationMode.SmoothTransformation))
        self.target.setToolTip("the task solved by the oracle")

    def _on_reward(self, verdict) -> None:
        mark = "✔ success" if verdict.success else "not yet"
        self.reward.setText(f"reward {verdict.total:.3f} — {mark}")
        self.components.setText("  ".join(f"{k} {v:.2f}" for k, v in sorted(verdict.components.items())))

    def show_summary(self, summary: dict) -> None:
        """An agent run's outcome (its checker already scored the final scene)."""
        reward = summary.get("reward")
        if reward is None:
            return
        mark = "✔ success" if summary.get("success") else "not solved"
        self.reward.setText(f"reward {reward:.3f} — {mark} (agent)")
        comps = summary.get("components") or {}
        self.components.setText("  ".join(f"{k} {v:.2f}" for k, v in sorted(comps.items())))
