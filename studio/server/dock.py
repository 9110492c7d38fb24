"""Model server: start/stop `modelwright serve` (vLLM) as a child process, show its status,
endpoint and loaded adapters, test the connection. Without vLLM or a GPU it says so plainly
and points at what still works (the oracle, or any OpenAI-compatible endpoint)."""

from __future__ import annotations

import shutil
import sys
import threading

from PySide6.QtCore import QProcess, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from tools.text import printable

NO_VLLM_HINT = ("The model server needs vLLM and a GPU (pip install -e '.[gpu]' on a GPU machine). "
                "Meanwhile use the oracle policy, or point the Agent dock at any OpenAI-compatible endpoint.")


def vllm_problem() -> str | None:
    """Why `modelwright serve` cannot run here, or None when it might."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed. " + NO_VLLM_HINT
    if shutil.which("nvidia-smi") is None:
        return "No NVIDIA GPU driver found (nvidia-smi is missing). " + NO_VLLM_HINT
    return None


class ServerDock(QWidget):
    sig_status = Signal(str)  # the status line, in words
    sig_models = Signal(object)  # list of served model ids, from Test connection

    def __init__(self, controller, settings, parent=None) -> None:
        super().__init__(parent)
        self.controller, self.settings = controller, settings
        self.process: QProcess | None = None
        self.model = QLineEdit(str(settings.value("server/model", "")))
        self.model.setPlaceholderText("local model folder")
        self.port = QSpinBox()
        self.port.setRange(1024, 65535)
        self.port.setValue(int(settings.value("server/port", 8000)))
        self.profile = QComboBox()
        self.profile.addItems(["full", "fast"])
        self.endpoint = QLineEdit(str(settings.value("server/endpoint", "http://127.0.0.1:8000")))
        self.start_button, self.stop_button = QPushButton("Start"), QPushButton("Stop")
        test = QPushButton("Test connection")
        self.start_button.setObjectName("accent")
        self.start_button.clicked.connect(self.start)
        self.stop_button.clicked.connect(self.stop)
        test.clicked.connect(self.test_connection)
        self.stop_button.setEnabled(False)
        self.status = QLabel("stopped")
        self.status.setWordWrap(True)
        self.adapters = QListWidget()
        self.adapters.setMaximumHeight(70)
        self.log = QPlainTextEdit()
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(300)
        form = QFormLayout()
        form.addRow("Model", self.model)
        row = QHBoxLayout()
        row.addWidget(self.port)
        row.addWidget(QLabel("profile"))
        row.addWidget(self.profile)
        form.addRow("Port", row)
        form.addRow("Endpoint", self.endpoint)
        buttons = QHBoxLayout()
        for b in (self.start_button, self.stop_button, test):
            buttons.addWidget(b)
        left = QVBoxLayout()
        left.addLayout(form)
        left.addLayout(buttons)
        left.addWidget(self.status)
        right = QVBoxLayout()
        right.addWidget(QLabel("Served models and adapters"))
        right.addWidget(self.adapters)
        right.addWidget(self.log, 1)
        layout = QHBoxLayout(self)
        layout.addLayout(left, 1)
        layout.addLayout(right, 1)
        self.sig_status.connect(self.status.setText)
        self.sig_models.connect(self._show_models)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.state() != QProcess.ProcessState.NotRunning

    def start(self) -> None:
        if self.running:
            return
        problem = vllm_problem()
        if problem:  # say so before launching anything; the CLI would fail the same way
            self.sig_status.emit(problem)
            self.controller.sig_error.emit(problem)
            return
        model = self.model.text().strip()
        if not model:
            self.controller.sig_error.emit("Model server: choose a model folder first.")
            return
        self.settings.setValue("server/model", model)
        self.settings.setValue("server/port", self.port.value())
        self.endpoint.setText(f"http://127.0.0.1:{self.port.value()}")
        self.settings.setValue("server/endpoint", self.endpoint.text())
        self.process = QProcess(self)
        self.process.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        self.process.readyReadStandardOutput.connect(self._read)
        self.process.finished.connect(self._finished)
        args = ["-m", "studio.cli", "serve", "--model", model, "--port", str(self.port.value()),
                "--profile", self.profile.currentText()]
        self.log.appendPlainText("$ modelwright " + " ".join(args[2:]))
        self.process.start(sys.executable, args)
        self.start_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.sig_status.emit("starting (waiting for /health)...")

    def stop(self) -> None:
        if self.running:
            self.process.terminate()  # `serve` forwards it to vLLM's process group

    def shutdown(self) -> None:
        if self.running:
            self.process.terminate()
            if not self.process.waitForFinished(15000):
                self.process.kill()
                self.process.waitForFinished(5000)

    def _read(self) -> None:
        text = bytes(self.process.readAllStandardOutput().data()).decode(errors="replace")
        for line in text.splitlines():
            self.log.appendPlainText(printable(line))
            if "http://" in line and ("serving" in line.lower() or "endpoint" in line.lower()):
                self.sig_status.emit(f"running: {line.strip()}")

    def _finished(self, code: int, _status) -> None:
        self.start_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        lines = [ln for ln in self.log.toPlainText().splitlines() if ln.strip()]
        last = lines[-1] if lines else ""
        if code:
            message = f"The model server exited ({code}): {last}"
            if "vllm" in last.lower() and "not installed" in last.lower():
                message = "vLLM is not installed. " + NO_VLLM_HINT
            self.sig_status.emit(message)
            self.controller.sig_error.emit(message)
        else:
            self.sig_status.emit("stopped")

    def test_connection(self) -> None:
        base = self.endpoint.text().strip().rstrip("/")
        self.settings.setValue("server/endpoint", base)
        self.sig_status.emit(f"testing {base}...")

        def work() -> None:
            import httpx

            url = base + ("/models" if base.endswith("/v1") else "/v1/models")
            try:
                reply = httpx.get(url, timeout=5.0)
                reply.raise_for_status()
                models = [m.get("id", "?") + (f"  (adapter of {m['parent']})" if m.get("parent") else "")
                          for m in reply.json().get("data", [])]
            except Exception as exc:
                self.sig_status.emit(f"No model server at {base}: {type(exc).__name__}: {exc}. "
                                     "Start one here (needs vLLM and a GPU) or check the address.")
                return
            self.sig_models.emit(models)
            self.sig_status.emit(f"connected to {base}: {len(models)} model(s)")

        threading.Thread(target=work, daemon=True, name="mw-test-server").start()

    def _show_models(self, models: list[str]) -> None:
        self.adapters.clear()
        self.adapters.addItems(models)
