"""The main window: the viewport in the middle, one dock per feature around it.

Layout and settings persist in QSettings; errors from anywhere land in the error bar and
the status bar, never only in a terminal.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QByteArray, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from studio.agent.dock import AgentDock
from studio.episodes.dock import EpisodesDock
from studio.files import FileActions
from studio.foreign import plain_label
from studio.history.dock import HistoryDock
from studio.outliner.dock import OutlinerDock
from studio.outliner.units_menu import unit_actions
from studio.palette.dock import PaletteDock
from studio.project.manager import ProjectManager
from studio.server.dock import ServerDock
from studio.tasks.dock import TaskDock
from studio.theme import apply_theme
from studio.training.dock import TrainingDock
from studio.viewport.panel import ViewportPanel
from tools.text import printable, printable_line

log = logging.getLogger(__name__)
DEFAULT_SIZE = (1600, 1000)  # on a first start, as far as the screen allows


class ErrorBar(QFrame):
    """The latest error, until dismissed or the next call that works; all of them are kept in
    `errors`. One line in a slot that keeps its height when empty: it never moves the layout
    (the full text is the tooltip)."""

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("errorbar")
        self.errors: list[str] = []
        self.text = plain_label()  # errors quote workers, policies and files
        self.text.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        dismiss = QPushButton("Dismiss")
        dismiss.clicked.connect(self.hide)
        policy = self.sizePolicy()
        policy.setRetainSizeWhenHidden(True)
        policy.setVerticalPolicy(QSizePolicy.Policy.Fixed)
        self.setSizePolicy(policy)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 8, 4)
        row.addWidget(self.text, 1)
        row.addWidget(dismiss)
        self.hide()

    def show_error(self, message: str) -> None:
        self.errors.append(message)
        more = f"  (+{len(self.errors) - 1} earlier)" if len(self.errors) > 1 else ""
        self.text.setText(printable_line(f"⚠ {message}{more}"))
        self.setToolTip(printable(message))
        self.show()


class MainWindow(QMainWindow):
    def __init__(self, controller, settings, view_size: int = 384) -> None:
        super().__init__()
        self.controller, self.settings = controller, settings
        self.setWindowTitle("Modelwright Studio")
        self.setObjectName("studio")
        self.setDockOptions(QMainWindow.DockOption.AnimatedDocks | QMainWindow.DockOption.AllowTabbedDocks)
        self._shown_once = False
        self.fixed_size = False  # a scripted run's size for its screenshot: not fitted to the screen
        self.errors = ErrorBar()
        self.viewport_panel = ViewportPanel(controller, size=view_size)
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.errors)
        layout.addWidget(self.viewport_panel, 1)
        self.setCentralWidget(central)

        self.agent = AgentDock(controller, settings)
        self.palette = PaletteDock(controller)
        self.outliner = OutlinerDock(controller)
        self.history = HistoryDock(controller)
        self.tasks = TaskDock(controller)
        self.episodes = EpisodesDock(controller)
        self.training = TrainingDock(controller, settings)
        self.server = ServerDock(controller, settings)
        self.docks: dict[str, QDockWidget] = {}
        # the agent column runs the full height: the streamed steps need the room
        self.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)
        left, right, bottom = (Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea,
                               Qt.DockWidgetArea.BottomDockWidgetArea)
        self._dock("Outliner", self.outliner, left)
        self._dock("Tool palette", self.palette, left)
        self._dock("History", self.history, left, tab_with="Tool palette")
        self._dock("Agent", self.agent, right)
        self._dock("Task", self.tasks, right)
        self._dock("Episodes", self.episodes, bottom)
        self._dock("Training", self.training, bottom, tab_with="Episodes")
        self._dock("Model server", self.server, bottom, tab_with="Training")
        self.docks["Tool palette"].raise_()
        self.docks["Episodes"].raise_()
        self._default_sizes()
        self._keep_dock_sizes()
        self._menus()
        self.busy = QLabel("")
        self.statusBar().addPermanentWidget(self.busy)
        controller.sig_error.connect(self.show_error)
        controller.sig_call.connect(lambda result, _origin: result.ok and self.errors.hide())
        controller.sig_status.connect(lambda m: self.statusBar().showMessage(m, 8000))
        controller.sig_busy.connect(lambda b: self.busy.setText("working..." if b else ""))
        controller.sig_ready.connect(lambda: self.statusBar().showMessage("Tool runtime ready", 5000))
        self.viewport_panel.sig_send_to_agent.connect(self.agent.attach)
        self.agent.sig_finished.connect(self.tasks.show_summary)
        self.agent.sig_finished.connect(lambda _summary: self.episodes.refresh())  # the new episode
        self.docks["Episodes"].visibilityChanged.connect(lambda shown: shown and self.episodes.refresh())
        self.agent.sig_finished.connect(self.viewport_panel.viewport.reframe_on_next_scene)
        self.statusBar().showMessage("Starting the tool runtime (Blender + CadQuery)...")
        self.restore_layout()

    def _default_sizes(self) -> None:
        left = max(330, self.outliner.wanted_width())  # wide enough for the outliner's columns
        self.resizeDocks([self.docks["Outliner"], self.docks["Agent"]], [left, 430], Qt.Orientation.Horizontal)
        self.resizeDocks([self.docks["Episodes"], self.docks["Agent"], self.docks["Task"], self.docks["Outliner"]],
                         [190, 600, 330, 260], Qt.Orientation.Vertical)

    def _keep_dock_sizes(self) -> None:
        """Labels that show messages wrap instead of widening their dock (a long status
        line used to push the agent column to thousands of pixels)."""
        for label in (self.agent.status, self.agent.attach_label, self.tasks.reward, self.tasks.steps):
            label.setWordWrap(True)
            label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not self._shown_once:
            self._shown_once = True
            if self.settings.value("window/state") is None:  # first start: sizes once laid out
                QTimer.singleShot(0, self._default_sizes)
            if not self.fixed_size:  # again with the window manager's frame known
                QTimer.singleShot(0, self.fit_to_screen)

    def _dock(self, title: str, widget: QWidget, area, tab_with: str | None = None) -> None:
        dock = QDockWidget(title, self)
        dock.setObjectName(f"dock-{title}")
        if widget is self.palette:  # its own form scrolls; its width is its own (never cut)
            dock.setWidget(widget)
        else:  # on a small screen a dock scrolls rather than push the window past the screen
            scroll = QScrollArea()
            scroll.setObjectName(f"scroll-{title}")
            scroll.setFrameShape(QFrame.Shape.NoFrame)
            scroll.setWidgetResizable(True)
            scroll.setWidget(widget)
            dock.setWidget(scroll)
        self.addDockWidget(area, dock)
        if tab_with:
            self.tabifyDockWidget(self.docks[tab_with], dock)
        self.docks[title] = dock

    def _menus(self) -> None:
        file = self.menuBar().addMenu("&File")
        self.project = ProjectManager(self)
        self.project.add_actions(file)
        self.files = FileActions(self, self.controller, self.settings)  # Export.../Import...
        file.addSeparator()
        file.addActions([self.files.import_action, self.files.export_action])
        file.addSeparator()
        quit_ = QAction("Quit", self)
        quit_.setShortcut(QKeySequence.StandardKey.Quit)
        quit_.triggered.connect(self.close)
        file.addAction(quit_)
        edit = self.menuBar().addMenu("&Edit")
        undo = self.controller.undo_stack.createUndoAction(self, "Undo")
        undo.setShortcut(QKeySequence.StandardKey.Undo)
        redo = self.controller.undo_stack.createRedoAction(self, "Redo")
        redo.setShortcut(QKeySequence.StandardKey.Redo)
        edit.addAction(undo)
        edit.addAction(redo)
        view = self.menuBar().addMenu("&View")
        for name in ("dark", "light"):
            action = QAction(f"{name.title()} theme", self)
            action.triggered.connect(lambda _=False, n=name: self.set_theme(n))
            view.addAction(action)
        view.addSeparator()
        self.units_menu = unit_actions(view.addMenu("Units"), self.controller.scene, self.settings)
        view.addSeparator()
        for dock in self.docks.values():
            view.addAction(dock.toggleViewAction())
        viewport = self.menuBar().addMenu("View&port")
        for action in self.viewport_panel.actions_by_key.values():
            viewport.addAction(action)
        help_ = self.menuBar().addMenu("&Help")
        keys = QAction("Keyboard shortcuts", self)
        keys.setShortcut(QKeySequence("F1"))
        keys.triggered.connect(self.show_shortcuts)
        help_.addAction(keys)

    def shortcuts_text(self) -> str:
        from studio.viewport.panel import MOUSE_HELP, SHORTCUTS

        rows = [(label, keys) for label, keys, _ in SHORTCUTS]
        rows += [("Import a file", "Ctrl+I"), ("Export the scene", "Ctrl+E")]
        rows += [("New", "Ctrl+N"), ("Open", "Ctrl+O"), ("Save", "Ctrl+S"), ("Save As", "Ctrl+Shift+S"),
                 ("Undo", "Ctrl+Z"), ("Redo", "Ctrl+Shift+Z"), ("Quit", "Ctrl+Q"),
                 ("This list", "F1")]
        lines = "".join(f"<tr><td><b>{k}</b></td><td>&nbsp;&nbsp;{label}</td></tr>" for label, k in rows)
        return f"<table>{lines}</table><p>{MOUSE_HELP}</p>"

    def show_shortcuts(self) -> None:
        box = QMessageBox(QMessageBox.Icon.NoIcon, "Keyboard shortcuts", self.shortcuts_text(),
                          QMessageBox.StandardButton.Close, self)
        box.setTextFormat(Qt.TextFormat.RichText)
        box.open()
        self.shortcuts_box = box

    def set_theme(self, name: str) -> None:
        applied = apply_theme(QApplication.instance(), name)
        self.settings.setValue("theme", applied)

    def show_error(self, message: str) -> None:
        log.warning("%s", message)
        self.errors.show_error(message)
        self.statusBar().showMessage(printable_line(message), 10000)

    def restore_layout(self) -> None:
        geometry = self.settings.value("window/geometry")
        state = self.settings.value("window/state")
        restored = isinstance(geometry, QByteArray | bytes) and self.restoreGeometry(geometry)
        if not restored:
            self.resize(*DEFAULT_SIZE)
        if isinstance(state, QByteArray | bytes):
            self.restoreState(state)
        self.fit_to_screen(centre=not restored)

    def fit_to_screen(self, centre: bool = False) -> None:
        """Size and place the window inside its screen's available area (the desktop less
        its panels): a default or remembered size larger than this screen is cut down to it,
        and a window off its edges is moved in. `centre`: put it in the middle (first start).
        Offscreen there is no screen to fit: the size asked for is kept."""
        screen = self.screen() or QApplication.primaryScreen()
        if screen is None or QApplication.platformName() == "offscreen" or self.isMaximized() \
                or self.isFullScreen():
            return
        room = screen.availableGeometry()
        border = self.frameGeometry().size() - self.geometry().size()  # title bar, frame: known once shown
        width = max(min(self.width(), room.width() - border.width()), self.minimumSizeHint().width())
        height = max(min(self.height(), room.height() - border.height()), self.minimumSizeHint().height())
        if (width, height) != (self.width(), self.height()):
            self.resize(width, height)
        outer = self.frameGeometry()
        if centre:
            x = room.x() + (room.width() - outer.width()) // 2
            y = room.y() + (room.height() - outer.height()) // 2
        else:
            x, y = outer.x(), outer.y()
        x = max(room.x(), min(x, room.x() + room.width() - outer.width()))
        y = max(room.y(), min(y, room.y() + room.height() - outer.height()))
        if (x, y) != (outer.x(), outer.y()):
            self.move(x, y)

    def save_layout(self) -> None:
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState())
        self.settings.sync()

    def closeEvent(self, event) -> None:
        if not self.project.may_close():  # unsaved changes: Save / Discard / Cancel, as New asks
            event.ignore()
            return
        self.save_layout()
        if self.agent.running:
            self.agent.stop()
            self.agent.runner.wait(20000)
        self.project.on_close()
        self.training.shutdown()
        self.server.shutdown()
        self.controller.shutdown()
        super().closeEvent(event)
