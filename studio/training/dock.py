"""Training: launch SFT / GRPO / the pipeline / eval as a child process (`modelwright train`),
plot loss and reward components live from the run's metrics.jsonl, show progress and ETA,
Stop and Resume, open the report, load the finished adapter into the running model server."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from PySide6.QtCore import QProcess, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from studio.training.metrics import MetricsTail, RunMetrics, planned_steps
from studio.training.plot import LinePlot

KINDS = ("sft", "grpo", "pipeline", "eval")
ASSETS_CONFIGS = Path(__file__).resolve().parents[2] / "assets" / "configs"


class TrainingDock(QWidget):
    sig_points = Signal(int)  # plot points so far
    sig_stopped = Signal(int)  # exit code
    sig_adapter = Signal(str)  # result of loading an adapter, in words

    def __init__(self, controller, settings, parent=None) -> None:
        super().__init__(parent)
        self.controller, self.settings = controller, settings
        self.process: QProcess | None = None
        self.metrics = RunMetrics()
        self.tail: MetricsTail | None = None
        self.kind = QComboBox()
        self.kind.addItems(KINDS)
        self.kind.setCurrentText(str(settings.value("training/kind", "sft")))
        self.config = QLineEdit(str(settings.value("training/config", "")))
        self.config.setPlaceholderText("configs/*.yaml")
        browse = QPushButton("...")
        browse.clicked.connect(self._browse)
        self.out = QLineEdit(str(settings.value("training/out", "runs/studio")))
        self.extra = QLineEdit()
        self.extra.setPlaceholderText("extra arguments, e.g. for eval: --policy oracle --per-family 1")
        self.launch_button, self.stop_button = QPushButton("Launch"), QPushButton("Stop")
        self.resume_button, report = QPushButton("Resume"), QPushButton("Open report")
        load = QPushButton("Load into server")
        self.launch_button.setObjectName("accent")
        self.launch_button.clicked.connect(lambda: self.launch(resume=False))
        self.resume_button.clicked.connect(lambda: self.launch(resume=True))
        self.stop_button.clicked.connect(self.stop)
        report.clicked.connect(self.open_report)
        load.clicked.connect(self.load_adapter)
        self.stop_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.eta = QLabel("idle")
        self.loss_plot = LinePlot("loss")
        self.reward_plot = LinePlot("reward, components and held-out eval")
        self.log = QPlainTextEdit()
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(400)
        self.log.setMaximumHeight(56)
        config_row = QHBoxLayout()
        config_row.addWidget(self.config, 1)
        config_row.addWidget(browse)
        form = QFormLayout()
        form.setVerticalSpacing(3)
        config_row.insertWidget(0, self.kind)
        form.addRow("Config", config_row)
        form.addRow("Run folder", self.out)
        form.addRow("Arguments", self.extra)
        buttons = QHBoxLayout()
        for b in (self.launch_button, self.stop_button, self.resume_button, report, load):
            buttons.addWidget(b)
        controls = QVBoxLayout()
        controls.addLayout(form)
        controls.addLayout(buttons)
        progress = QHBoxLayout()
        progress.addWidget(self.progress, 1)
        progress.addWidget(self.eta, 1)
        controls.addLayout(progress)
        controls.addWidget(self.log)
        plots = QHBoxLayout()
        plots.addWidget(self.loss_plot)
        plots.addWidget(self.reward_plot)
        layout = QHBoxLayout(self)
        layout.addLayout(controls, 2)
        layout.addLayout(plots, 3)
        self.timer = QTimer(self)
        self.timer.setInterval(400)
        self.timer.timeout.connect(self.poll)
        self.sig_adapter.connect(controller.sig_status)

    # -- launching ----------------------------------------------------------------------
    def command(self, resume: bool = False) -> list[str]:
        kind = self.kind.currentText()
        args = ["-m", "studio.cli"]
        if kind == "eval":
            args += ["eval", "--json", *self.extra.text().split()]
        else:
            args += ["train", kind, "--config", self.config.text().strip(), "--out", self.out.text().strip()]
            args += (["--resume"] if resume else []) + self.extra.text().split()
        return [sys.executable, *args]

    def launch(self, resume: bool = False) -> None:
        if self.running:
            return
        kind = self.kind.currentText()
        if kind != "eval" and not Path(self.config.text().strip()).is_file():
            self.controller.sig_error.emit(f"Training: no config file at {self.config.text()!r}; choose one.")
            return
        for key, w in (("kind", self.kind), ("config", self.config), ("out", self.out)):
            self.settings.setValue(f"training/{key}", w.currentText() if w is self.kind else w.text())
        out = Path(self.out.text().strip())
        metrics = out / "metrics.jsonl"
        if not resume and metrics.exists():
            metrics.unlink()  # a fresh run: old points would mix into the plot
        self.metrics = RunMetrics(total_steps=planned_steps(self.config.text().strip(), kind))
        self.tail = MetricsTail(metrics)
        self.loss_plot.set_series({})
        self.reward_plot.set_series({})
        program, *args = self.command(resume)
        self.process = QProcess(self)
        self.process.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        self.process.readyReadStandardOutput.connect(self._read_output)
        self.process.finished.connect(self._finished)
        self.process.errorOccurred.connect(lambda e: self.controller.sig_error.emit(f"Training process: {e}"))
        self.log.appendPlainText("$ " + " ".join([Path(program).name, *args]))
        self.process.start(program, args)
        self.launch_button.setEnabled(False)
        self.resume_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.eta.setText("starting...")
        self.timer.start()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.state() != QProcess.ProcessState.NotRunning

    def stop(self) -> None:
        """SIGTERM (the trainer saves what it can), then kill after 15 s."""
        if not self.running:
            return
        self.eta.setText("stopping...")
        self.process.terminate()
        QTimer.singleShot(15000, lambda: self.process.kill() if self.running else None)

    def shutdown(self) -> None:
        if self.running:
            self.process.terminate()
            if not self.process.waitForFinished(10000):
                self.process.kill()
                self.process.waitForFinished(5000)

    # -- following ----------------------------------------------------------------------
    def poll(self) -> None:
        if self.tail is None:
            return
        if self.metrics.add(self.tail.read_new()):
            series = self.metrics.series
            self.loss_plot.set_series({k: v for k, v in series.items() if k == "loss"})
            self.reward_plot.set_series(
                {k: v for k, v in series.items() if k.startswith(("reward", "eval/"))}
            )
            self.sig_points.emit(self.metrics.points())
        fraction, eta = self.metrics.progress(), self.metrics.eta_s()
        if fraction is not None:
            self.progress.setValue(int(fraction * 1000))
        if self.running:
            words = f"step {self.metrics.last_step}" + (f"/{self.metrics.total_steps}" if self.metrics.total_steps else "")
            if eta is not None:
                words += f" — ETA {int(eta // 60)} min {int(eta % 60)} s"
            self.eta.setText(words)

    def _read_output(self) -> None:
        text = bytes(self.process.readAllStandardOutput().data()).decode(errors="replace")
        for line in text.splitlines():
            if line.strip():
                self.log.appendPlainText(line)

    def _finished(self, code: int, status) -> None:
        self.poll()
        self.timer.stop()
        self.launch_button.setEnabled(True)
        self.resume_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        crashed = status == QProcess.ExitStatus.CrashExit
        self.eta.setText(f"stopped at step {self.metrics.last_step}" if crashed or code else
                         f"finished at step {self.metrics.last_step}")
        if code and not crashed:
            last = self.log.toPlainText().strip().splitlines()[-1:] or [""]
            self.controller.sig_error.emit(f"Training exited with code {code}: {last[0]}")
        self.sig_stopped.emit(-1 if crashed else code)

    # -- results ------------------------------------------------------------------------
    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Training config", str(ASSETS_CONFIGS), "YAML (*.yaml *.yml)")
        if path:
            self.config.setText(path)

    def open_report(self) -> None:
        out = Path(self.out.text().strip())
        for name in ("report.md", "report.html", "eval.json", "report.json", "metrics.jsonl"):
            if (out / name).is_file():
                QDesktopServices.openUrl(QUrl.fromLocalFile(str((out / name).resolve())))
                return
        self.controller.sig_error.emit(f"No report in {out} yet.")

    def adapter_path(self) -> Path | None:
        from training.runs import latest_checkpoint

        out = Path(self.out.text().strip())
        if (out / "adapter").is_dir():
            return out / "adapter"
        return latest_checkpoint(out)

    def load_adapter(self) -> None:
        path = self.adapter_path()
        if path is None:
            self.controller.sig_error.emit("No finished adapter or complete checkpoint in the run folder yet.")
            return
        base_url = str(self.settings.value("server/endpoint", "http://127.0.0.1:8000"))
        name = Path(self.out.text().strip()).name or "studio"

        def work() -> None:
            try:
                from agents.serving_adapters import load_adapter

                loaded = load_adapter(base_url, name, str(path))
                self.sig_adapter.emit(f"Loaded {path} into {base_url} as {getattr(loaded, 'name', loaded)}")
            except Exception as exc:
                self.controller.sig_error.emit(f"Loading the adapter into {base_url} failed: {exc}")

        threading.Thread(target=work, daemon=True, name="mw-load-adapter").start()
