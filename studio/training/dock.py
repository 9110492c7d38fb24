"""Training: launch SFT / GRPO / the pipeline / eval as a child process (`modelwright train`),
plot loss and reward components live from the run's metrics.jsonl, show progress and ETA,
Stop and Resume, open the report, load the finished adapter into the running model server.

For a newcomer: "From my demonstrations" exports this studio's finished episodes and writes
an SFT config from the shipped one (`assets/configs/sft-studio-demos.yaml`: LoRA on the
packaged base, nothing downloaded); Launch trains; "Use in agent" puts the newest saved adapter
on that base in the Agent dock: the run saves one every few steps or minutes
(RUN/adapter-latest, `training/runs.py`), so it works long before the run ends, and the button
says which step it would use. A run resolves model names in the studio's data dir, as the dock does.
A failed run shows its own error line here, and the log is as tall as the person drags it."""

from __future__ import annotations

import shlex
import sys
import threading
from pathlib import Path

from PySide6.QtCore import QProcess, QProcessEnvironment, Qt, QTimer, QUrl, Signal
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
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from studio.foreign import plain_label
from studio.training.demos import (
    NoDemonstrations,
    base_model,
    error_line,
    free_run_dir,
    prepare_demo_run,
)
from studio.training.metrics import MetricsTail, RunMetrics, planned_steps
from studio.training.plot import LinePlot
from tools.text import printable

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
        demos, use = QPushButton("From my demonstrations"), QPushButton("Use in agent")
        demos.setToolTip("Export this studio's finished episodes and prepare an SFT run on them")
        use.setToolTip("Drive the Agent dock with the run's newest saved adapter (hf policy)")
        self.use_button = use
        demos.clicked.connect(self.from_demonstrations)
        use.clicked.connect(self.use_in_agent)
        self.error = plain_label()  # it quotes the run's output
        self.error.setObjectName("error")
        self.error.setWordWrap(True)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.hide()
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
        self.log.setMaximumBlockCount(2000)
        self.log.setMinimumHeight(80)
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
        newcomer = QHBoxLayout()
        newcomer.addWidget(demos)
        newcomer.addWidget(use)
        newcomer.addStretch(1)
        top = QWidget()
        controls = QVBoxLayout(top)
        controls.setContentsMargins(0, 0, 0, 0)
        controls.addLayout(form)
        controls.addLayout(buttons)
        controls.addLayout(newcomer)
        progress = QHBoxLayout()
        progress.addWidget(self.progress, 1)
        progress.addWidget(self.eta, 1)
        controls.addLayout(progress)
        controls.addWidget(self.error)
        self.left = QSplitter(Qt.Orientation.Vertical)  # the log is as tall as it is dragged
        self.left.addWidget(top)
        self.left.addWidget(self.log)
        self.left.setStretchFactor(1, 1)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        plots = QSplitter(Qt.Orientation.Horizontal)
        plots.addWidget(self.loss_plot)
        plots.addWidget(self.reward_plot)
        self.splitter.addWidget(self.left)
        self.splitter.addWidget(plots)
        self.splitter.setStretchFactor(0, 2)
        self.splitter.setStretchFactor(1, 3)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.splitter)
        self.timer = QTimer(self)
        self.timer.setInterval(400)
        self.timer.timeout.connect(self.poll)
        self.sig_adapter.connect(controller.sig_status)
        self.out.textChanged.connect(lambda _text: self.show_newest_adapter())
        self.show_newest_adapter()

    # -- launching ----------------------------------------------------------------------
    def command(self, resume: bool = False) -> list[str]:
        kind = self.kind.currentText()
        args = ["-m", "studio.cli"]
        extra = shlex.split(self.extra.text())
        out = self.out.text().strip()
        if kind == "eval":  # the report lands in the run folder, where Open report looks
            args += ["eval", *extra, "--json", str(Path(out) / "eval.json")]
            if self.controller.data_dir and "--data-dir" not in extra:
                args += ["--data-dir", str(self.controller.data_dir)]
        else:
            args += ["train", kind, "--config", self.config.text().strip(), "--out", out]
            args += (["--resume"] if resume else []) + extra
        return [sys.executable, *args]

    def launch(self, resume: bool = False) -> None:
        if self.running:
            return
        kind = self.kind.currentText()
        try:
            shlex.split(self.extra.text())
        except ValueError as exc:
            self.controller.sig_error.emit(f"Training: the arguments do not parse: {exc}")
            return
        if kind == "eval":
            Path(self.out.text().strip()).mkdir(parents=True, exist_ok=True)
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
        self.use_button.setText("Use in agent")
        from agents.models.cpu import background_command, child_env

        # Below the GUI (nice 5, SCHED_BATCH), its torch threads sleeping when they wait.
        shown, *shown_args = self.command(resume)
        program, *args = background_command([shown, *shown_args])
        self.process = QProcess(self)
        env = QProcessEnvironment()
        for key, value in child_env().items():
            env.insert(key, value)
        if self.controller.data_dir:  # a model name (the packaged base) resolves where the studio's do
            from agents.store.location import ENV_VAR

            env.insert(ENV_VAR, str(Path(self.controller.data_dir).expanduser().resolve()))
        self.process.setProcessEnvironment(env)
        self.process.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        self.process.readyReadStandardOutput.connect(self._read_output)
        self.process.finished.connect(self._finished)
        self.process.errorOccurred.connect(lambda e: self.controller.sig_error.emit(f"Training process: {e}"))
        self.error.hide()
        self.log.appendPlainText("$ " + " ".join([Path(shown).name, *shown_args]) + "  (at nice 5)")
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
        rows = self.tail.read_new()
        if any("adapter_saved" in row for row in rows):
            self.show_newest_adapter()
        if self.metrics.add(rows):
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
                self.log.appendPlainText(printable(line))

    def _finished(self, code: int, status) -> None:
        self.poll()
        self.show_newest_adapter()
        self.timer.stop()
        self.launch_button.setEnabled(True)
        self.resume_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        crashed = status == QProcess.ExitStatus.CrashExit
        self.eta.setText(f"stopped at step {self.metrics.last_step}" if crashed or code else
                         f"finished at step {self.metrics.last_step}")
        if code and not crashed:
            words = f"{self.kind.currentText()} failed (exit {code}): " + error_line(
                self.log.toPlainText())
            self.error.setText(printable(words))
            self.error.show()
            self.controller.sig_error.emit(words)
        self.sig_stopped.emit(-1 if crashed else code)

    # -- a newcomer's fine-tune -----------------------------------------------------------
    def from_demonstrations(self) -> bool:
        """Export this studio's finished episodes and set up an SFT run on them (Launch
        starts it). False, with the reason shown, when there is nothing to learn from."""
        run_dir = Path(self.out.text().strip() or "runs/studio")
        try:
            config, n = prepare_demo_run(self.controller.store(), run_dir,
                                         self.controller.session_episodes or None)
        except NoDemonstrations as exc:
            self.controller.sig_error.emit(str(exc))
            return False
        self.kind.setCurrentText("sft")
        self.config.setText(str(config))
        self.out.setText(str(free_run_dir(run_dir, "sft")))
        self.extra.clear()
        self.log.appendPlainText(f"exported {n} episode(s) to {run_dir / 'demos'}; config {config}")
        self.controller.sig_status.emit(f"SFT on {n} demonstration(s) ready: press Launch")
        return True

    def show_newest_adapter(self) -> tuple[Path, int | None] | None:
        """Name the adapter "Use in agent" would use on its button: the step of one saved while
        the run trains, or the final one."""
        from training import newest_adapter

        found = newest_adapter(Path(self.out.text().strip()))
        if found is None:
            self.use_button.setText("Use in agent")
            self.use_button.setToolTip("Drive the Agent dock with the run's newest saved adapter "
                                       "(hf policy); none is saved in the run folder yet")
        else:
            path, step = found
            final = path.name == "adapter"
            self.use_button.setText("Use in agent (final)" if final else
                                    f"Use in agent (step {step})" if step is not None
                                    else "Use in agent")
            self.use_button.setToolTip(f"Drive the Agent dock with {path}")
        return found

    def use_in_agent(self) -> bool:
        """Drive the Agent dock with this run's newest saved adapter on the model it was trained
        from (a run saves one every few steps or minutes, so before it ends too)."""
        adapter, base = self.adapter_path(), base_model(Path(self.out.text().strip()))
        if adapter is None or base is None:
            self.controller.sig_error.emit(
                "No adapter saved in the run folder yet: launch a run; it saves one every few "
                "steps or minutes, and at its end.")
            return False
        from agents.models.registry import remember_adapter
        from tools.cli.exits import UserError

        try:  # listed under its base in the Agent dock and `modelwright models list`
            remember_adapter(adapter, self.controller.data_dir)
        except (UserError, OSError):
            pass  # the run's adapter still drives the agent; it is only not listed
        self.controller.sig_agent_policy.emit("hf", {"model": str(base), "adapter": str(adapter)})
        found = self.show_newest_adapter()
        step = f" (step {found[1]})" if found and found[1] is not None and found[0] == adapter else ""
        self.controller.sig_status.emit(f"Agent dock: hf policy with the adapter {adapter}{step}")
        return True

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
        """The run's newest saved adapter: final, saved while training, or a checkpoint's."""
        from training import newest_adapter

        found = newest_adapter(Path(self.out.text().strip()))
        return found[0] if found else None

    def load_adapter(self) -> None:
        path = self.adapter_path()
        if path is None:
            self.controller.sig_error.emit("No finished adapter or complete checkpoint in the run folder yet.")
            return
        base_url = str(self.settings.value("server/endpoint", "http://127.0.0.1:8000"))
        name = Path(self.out.text().strip()).name or "studio"

        def work() -> None:
            try:
                from agents.serving.adapters import load_adapter

                loaded = load_adapter(base_url, name, str(path))
                self.sig_adapter.emit(f"Loaded {path} into {base_url} as {getattr(loaded, 'name', loaded)}")
            except Exception as exc:
                self.controller.sig_error.emit(f"Loading the adapter into {base_url} failed: {exc}")

        threading.Thread(target=work, daemon=True, name="mw-load-adapter").start()
