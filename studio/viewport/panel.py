"""The viewport with its toolbar: view mode, frame all, screenshot, send what I see to the agent."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from studio.viewport.capture import capture, png_bytes
from studio.viewport.widget import MODES, Viewport


class ViewportPanel(QWidget):
    sig_send_to_agent = Signal(bytes)  # PNG of what the person sees

    def __init__(self, controller, size: int = 384, parent=None) -> None:
        super().__init__(parent)
        self.viewport = Viewport(controller, size=size)
        self.mode = QComboBox()
        self.mode.addItems(MODES)
        self.mode.currentTextChanged.connect(self.viewport.set_mode)
        frame = QPushButton("Frame all")
        frame.clicked.connect(self.viewport.frame_scene)
        self.wireframe = QCheckBox("Wireframe")
        self.wireframe.toggled.connect(self.viewport.set_wireframe)
        shot = QPushButton("Screenshot...")
        shot.clicked.connect(self._screenshot)
        send = QPushButton("Send what I see to the agent")
        send.setToolTip("Attach the viewport as you see it to the next agent run")
        send.setObjectName("accent")
        send.clicked.connect(self.send_to_agent)
        self.hint = QLabel("drag: orbit · wheel: zoom · middle/shift-drag: pan")
        self.hint.setObjectName("hint")
        self.hint.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("View"))
        bar.addWidget(self.mode)
        bar.addWidget(frame)
        bar.addWidget(self.wireframe)
        bar.addStretch(1)
        bar.addWidget(self.hint)
        bar.addStretch(1)
        bar.addWidget(shot)
        bar.addWidget(send)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(bar)
        layout.addWidget(self.viewport, 1)

    def capture_png(self) -> bytes:
        return png_bytes(capture(self.viewport))

    def send_to_agent(self) -> None:
        self.sig_send_to_agent.emit(self.capture_png())

    def _screenshot(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save the viewport", "viewport.png", "PNG (*.png)")
        if path:
            capture(self.viewport).save(path, "PNG")
