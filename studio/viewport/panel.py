"""The viewport with its toolbar: view, frame, screenshot, send what I see to the agent.

On a display with OpenGL 3.3 the live GPU viewport (`live.LiveView`) draws the scene; the
montage (the four views the model sees) and sessions without OpenGL (offscreen) use the
worker-rendered `widget.Viewport`. Both share one orbit camera.
"""

from __future__ import annotations

import os

from PySide6.QtCore import QEvent, QSize, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from studio.folders import remember, start_folder
from studio.viewport.capture import capture, on_real_display, png_bytes
from studio.viewport.widget import MODES, Viewport

# (label, key sequence, what it does): the Help menu lists these
SHORTCUTS = (
    ("Frame selected", "F", "frame_selected"),
    ("Frame all", "Home", "frame_all"),
    ("Front view", "1", "view:front"),
    ("Back view", "Ctrl+1", "view:back"),
    ("Right view", "3", "view:right"),
    ("Left view", "Ctrl+3", "view:left"),
    ("Top view", "7", "view:top"),
    ("Bottom view", "Ctrl+7", "view:bottom"),
    ("Isometric view", "0", "view:iso"),
    ("Delete selected", "Delete", "delete"),
    ("Duplicate selected", "Ctrl+D", "duplicate"),
    ("Cancel drag / deselect", "Esc", "cancel"),
    ("Move by a typed value (then X/Y/Z, a number, Enter)", "G", "typed:move"),
    ("Rotate by a typed value", "R", "typed:rotate"),
    ("Scale by a typed value", "S", "typed:scale"),
    ("Box select (then drag)", "B", "box"),
)
MOUSE_HELP = ("click: select · shift-click: add · drag: orbit · shift-drag: pan · wheel: zoom · "
              "arrow: move · ring: rotate · box: scale (Ctrl snaps) · F1: keys")


class ElidedLabel(QLabel):
    """One line that ends in "…" when its room is short (the whole text is the tooltip); its
    minimum width is a few letters, so a long help line never sets the window's width."""

    def __init__(self, text: str = "") -> None:
        super().__init__(text)
        self.full = text
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def setText(self, text: str) -> None:
        self.full = text
        self._elide()

    def minimumSizeHint(self) -> QSize:
        return QSize(self.fontMetrics().horizontalAdvance("…") * 4, super().minimumSizeHint().height())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        shown = self.fontMetrics().elidedText(self.full, Qt.TextElideMode.ElideRight, self.contentsRect().width())
        if shown != super().text():
            super().setText(shown)


def live_wanted() -> bool:
    return on_real_display() and os.environ.get("MW_VIEWPORT", "live") != "worker"


class ViewportPanel(QWidget):
    sig_send_to_agent = Signal(bytes)  # PNG of what the person sees

    def __init__(self, controller, size: int = 384, parent=None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.viewport = Viewport(controller, size=size)
        self.live = None
        self.stack = QStackedWidget()
        self.stack.addWidget(self.viewport)
        if live_wanted():
            from studio.viewport.live import LiveView

            self.live = LiveView(controller, self.viewport.camera)
            self.live_widget = QWidget.createWindowContainer(self.live)
            self.live_widget.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            self.live_widget.setMinimumSize(320, 320)
            # keys that reach the container (the main window kept the focus) while a typed
            # G/R/S is open: they are the live view's, never the window's shortcuts
            self.live_widget.installEventFilter(self)
            self.stack.addWidget(self.live_widget)
            self.live.sig_status.connect(self._status)
            self.live.sig_frame.connect(self._check_live)
            self.live.sig_failed.connect(self._check_live)
            self.live.sig_key.connect(self._key_from_live)
            self.live.sig_readout.connect(self._readout)
        self.mode = QComboBox()
        self.mode.addItems(MODES)
        self.mode.currentTextChanged.connect(self.set_mode)
        frame = QPushButton("Frame all")
        frame.clicked.connect(self.frame_all)
        self.wireframe = QCheckBox("Wireframe")
        self.wireframe.toggled.connect(self.viewport.set_wireframe)
        shot = QPushButton("Screenshot...")
        shot.clicked.connect(self._screenshot)
        send = QPushButton("Send what I see to the agent")
        send.setToolTip("Attach the viewport as you see it to the next agent run")
        send.setObjectName("accent")
        send.clicked.connect(self.send_to_agent)
        send.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # a later Space never sends it again
        self.hint = ElidedLabel(MOUSE_HELP)  # shortened to the room it has: never widens the window
        self.hint.setObjectName("hint")
        self.hint.setToolTip(MOUSE_HELP)
        self.hint.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.scale = QLabel("")
        self.scale.setObjectName("hint")
        self.readout = QLabel("")  # the drag's or the typed value's numbers
        self.readout.setObjectName("readout")
        # a fixed slot: text appearing mid-drag must not resize the view under the pointer
        self.readout.setFixedWidth(300)
        self.readout.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Preferred)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("View"))
        bar.addWidget(self.mode)
        bar.addWidget(frame)
        bar.addWidget(self.wireframe)
        bar.addStretch(1)
        bar.addWidget(shot)
        bar.addWidget(send)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(bar)
        layout.addWidget(self.stack, 1)
        below = QHBoxLayout()  # under the view: the whole width for the scale and the help
        below.addWidget(self.scale)
        below.addWidget(self.readout)
        below.addWidget(self.hint, 1)
        layout.addLayout(below)
        self.actions_by_key: dict[str, QAction] = {}
        for label, keys, what in SHORTCUTS:
            action = QAction(label, self)
            action.setShortcut(QKeySequence(keys))
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            action.triggered.connect(lambda _=False, w=what: self.do(w))
            self.addAction(action)
            self.actions_by_key[keys] = action
        self.set_mode("orbit")
        controller.worker.sig_reset.connect(self.reframe_on_next_scene)

    def reframe_on_next_scene(self, origin: str = "") -> None:
        """A load, restore, replay or opened project: frame it when its scene arrives (the
        camera both views share; a new empty scene keeps it; a project's saved view is
        applied after this)."""
        if origin != "human":
            self.viewport.reframe_on_next_scene()

    # -- which view draws ----------------------------------------------------------------
    @property
    def live_active(self) -> bool:
        return self.live is not None and self.live.failed is None and self.stack.currentWidget() is not self.viewport

    @property
    def settled(self) -> bool:
        """Framed, and the newest scene is what the view shows."""
        if not self.live_active:
            return self.viewport.settled
        return self.viewport.settled and self.live.idle

    def set_mode(self, mode: str) -> None:
        use_live = self.live is not None and self.live.failed is None and mode != "montage"
        self.wireframe.setVisible(not use_live)
        if use_live:
            self.viewport.rendering = False
            self.stack.setCurrentWidget(self.live_widget)
            if mode != "orbit":
                self.live.set_view(mode)
        else:
            self.viewport.rendering = True
            self.stack.setCurrentWidget(self.viewport)
            self.viewport.set_mode(mode)

    def _check_live(self, *_: object) -> None:
        if self.live is not None and self.live.failed is not None and self.stack.currentWidget() is not self.viewport:
            self.set_mode(self.mode.currentText())
            self.viewport.request()

    def eventFilter(self, watched, event) -> bool:
        if watched is self.live_widget and self.live is not None and self.live.typed is not None:
            if event.type() == QEvent.Type.ShortcutOverride:
                event.accept()
                return True
            if event.type() == QEvent.Type.KeyPress:
                self.live.keyPressEvent(event)
                return True
        return super().eventFilter(watched, event)

    def _key_from_live(self, seq: QKeySequence) -> None:
        """A key pressed in the live view triggers the window's action with that shortcut."""
        for action in self.window().findChildren(QAction):
            if action.isEnabled() and any(s.matches(seq) == QKeySequence.SequenceMatch.ExactMatch
                                          for s in action.shortcuts()):
                action.trigger()
                return

    def _status(self, text: str) -> None:
        self.scale.setText(text)

    def _readout(self, text: str) -> None:
        self.readout.setText(text)
        if text and self.window() is not None and hasattr(self.window(), "statusBar"):
            self.window().statusBar().showMessage(text, 4000)

    # -- actions --------------------------------------------------------------------------------
    def frame_all(self) -> None:
        if self.live_active:
            self.live.frame_all()
        else:
            self.viewport.frame_scene()

    def do(self, what: str) -> None:
        """One shortcut's action (see SHORTCUTS)."""
        scene = self.controller.scene
        if what.startswith("view:"):
            self.mode.setCurrentText(what[5:])
            return
        if what == "frame_all":
            self.frame_all()
        elif what == "frame_selected":
            if self.live_active:
                self.live.frame_selected()
            else:  # a fixed view stays that view (its projection); orbit zooms to fit
                self.viewport.camera.frame(scene.bounds(scene.selection) or scene.bounds())
                self.viewport.request()
        elif what == "delete" and scene.selected:
            names = scene.selection or [scene.selected]
            self.controller.manual_calls([("delete", {"name": n}) for n in names],
                                         f"delete {names[0] if len(names) == 1 else f'{len(names)} objects'}")
        elif what == "duplicate" and scene.selected:
            new = _free_name(scene.names(), scene.selected)
            self.controller.manual_call("duplicate", {"name": scene.selected, "new_name": new})
        elif what.startswith("typed:") and self.live_active and scene.selected:
            if self.live.start_typed(what[6:]):
                self.live_widget.setFocus()
        elif what == "box" and self.live_active:
            self.live.start_box_select()
            self.live_widget.setFocus()
        elif what == "cancel":
            if not (self.live is not None and self.live.cancel_drag()):
                scene.select(None)

    def capture_png(self) -> bytes:
        return png_bytes(self.capture_image())

    def capture_image(self):
        if self.live_active:
            if on_real_display() and self.live_widget.isVisible():
                return capture(self.live_widget)
            return self.live.grabFramebuffer()
        return capture(self.viewport)

    def send_to_agent(self) -> None:
        self.sig_send_to_agent.emit(self.capture_png())

    def _screenshot(self) -> None:
        window = self.window()
        settings = getattr(window, "settings", None)
        start = os.path.join(start_folder(window, settings), "viewport.png")
        path, _ = QFileDialog.getSaveFileName(self, "Save the viewport", start, "PNG (*.png)")
        if path:
            remember(settings, path)
            self.capture_image().save(path, "PNG")


def _free_name(names: list[str], base: str) -> str:
    stem = base.rsplit(".", 1)[0] if base.rsplit(".", 1)[-1].isdigit() else base
    for i in range(1, 1000):
        candidate = f"{stem}.{i:03d}"
        if candidate not in names:
            return candidate
    return f"{stem}.copy"
