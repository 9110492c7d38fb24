"""Starting the studio: the QApplication, the window, and the scripted mode used by
`modelwright studio --task ID --policy P --autorun --screenshot PNG --exit-when-done`."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QSettings, QTimer
from PySide6.QtWidgets import QApplication

from studio.controller import StudioController
from studio.theme import apply_theme
from studio.window import MainWindow

log = logging.getLogger(__name__)


@dataclass
class StudioOptions:
    task: str | None = None
    policy: str = "oracle"
    autorun: bool = False
    screenshot: Path | None = None
    exit_when_done: bool = False
    theme: str | None = None
    data_dir: str | None = None
    settings_file: str | None = None  # an .ini instead of the user's settings (tests, scripted runs)
    size: tuple[int, int] = (1600, 1000)
    hand: Path | None = None  # JSONL of calls made by hand (as the person's) before the agent runs
    goal: str | None = None  # the agent's free-form goal (continues the scene as it is)
    select: str | None = None  # select this object after the run (`auto`: the first CAD part)
    project: str | None = None  # a .mwproj to open once the session is up
    recover: str = "ask"  # a scene left by a studio that did not close cleanly: ask | yes | no


def settings_for(options: StudioOptions) -> QSettings:
    if options.settings_file:
        return QSettings(options.settings_file, QSettings.Format.IniFormat)
    return QSettings("Modelwright", "Studio")


def build(options: StudioOptions, session_factory=None) -> tuple[MainWindow, StudioController]:
    """The window and its controller (the session starts; the window is not shown yet)."""
    app = QApplication.instance()
    settings = settings_for(options)
    apply_theme(app, options.theme or str(settings.value("theme", "dark")))
    controller = StudioController(session_factory=session_factory, data_dir=options.data_dir)
    window = MainWindow(controller, settings)
    if options.exit_when_done or options.screenshot:
        window.fixed_size = True
        window.resize(*options.size)  # scripted runs: a known size for the screenshot
    window.project.start(unattended=bool(options.exit_when_done or options.screenshot), open_path=options.project,
                         recover=options.recover)
    controller.start()
    return window, controller


class ScriptedRun:
    """Loads the task, runs the policy in the real window, waits for the last frame,
    saves a screenshot of the whole window, prints the summary JSON, and (optionally) quits."""

    def __init__(self, window: MainWindow, options: StudioOptions) -> None:
        self.window, self.options = window, options
        self.summary: dict | None = None
        self.exit_code = 0
        self.after_last_frame: list = []  # callables run (with this run) before the screenshot
        c = window.controller
        c.sig_ready.connect(self._ready)
        c.sig_task_ready.connect(self._task_ready)
        window.agent.sig_finished.connect(self._finished)
        window.project.sig_opened.connect(self._project_opened)

    def _ready(self) -> None:
        if not self.options.project:  # else the project opens first (ProjectManager.start)
            self._go()

    def _project_opened(self, path: str, ok: bool) -> None:
        if not ok:
            self._finished({"project": path, "status": "fatal", "error": "the project did not open"})
        elif self.options.goal or self.options.autorun:
            self._go()
        else:
            self._finished({"project": path, "status": "opened"})

    def _go(self) -> None:
        if self.options.goal:  # shown in the Agent dock, also before a run
            self.window.agent.goal.setPlainText(self.options.goal)
            self.window.agent.policy.setCurrentText(self.options.policy)
            self.window.agent.use_task.setChecked(False)
        if self.options.hand:
            self._by_hand([json.loads(line) for line in Path(self.options.hand).read_text().splitlines()
                           if line.strip() and not line.lstrip().startswith("#")])
        elif self.options.task:
            self.window.controller.load_task(self.options.task)
        elif self.options.autorun and self.options.goal:
            self._run_goal()
        elif self.options.autorun:
            self.window.show_error("--autorun needs --task ID or --goal TEXT")

    def _by_hand(self, calls: list[dict]) -> None:
        """The person's calls, one after another (recorded as human turns), then the run."""
        c = self.window.controller
        if not calls:
            if self.options.task:
                c.load_task(self.options.task)
            elif self.options.autorun:
                self._run_goal()
            else:
                QTimer.singleShot(500, lambda: self._finished({"status": "hand-made"}))
            return
        call, rest = calls[0], calls[1:]
        c.send(call["tool"], call.get("args", {}), origin="human",
               on_done=lambda _r: self._by_hand(rest))

    def _run_goal(self) -> None:
        from studio.agent.runner import AgentRequest

        agent = self.window.agent
        agent.approval.setChecked(False)
        agent.run(AgentRequest(policy=self.options.policy, goal=self.options.goal or ""))

    def _task_ready(self, task) -> None:
        if not self.options.autorun:
            if self.options.exit_when_done or self.options.screenshot:  # just the loaded task
                self._finished({"task": task.id, "status": "loaded"})
            return
        agent = self.window.agent
        agent.policy.setCurrentText(self.options.policy)
        agent.use_task.setChecked(True)
        agent.approval.setChecked(False)  # nobody is there to answer
        agent.run()

    def _finished(self, summary: dict) -> None:
        self.summary = summary
        self.exit_code = 2 if summary.get("status") == "fatal" else 0
        viewport = self.window.viewport_panel  # .settled: framed, and the last change drawn
        self.window.episodes.refresh()
        if summary.get("episode_id"):
            self.window.episodes.select_episode(summary["episode_id"])
        if self.options.select:
            self._select(self.options.select)
        # wait until the final scene is framed and its frame is on screen, then shoot
        deadline = time.monotonic() + 30

        def check() -> None:
            if viewport.settled or time.monotonic() > deadline:
                QTimer.singleShot(300, self._shoot)  # let the docks repaint
            else:
                QTimer.singleShot(100, check)

        QTimer.singleShot(100, check)

    def _select(self, name: str) -> None:
        scene = self.window.controller.scene
        if name == "auto":
            cad = [o["name"] for o in scene.objects if o.get("source") == "cad"]
            name = (cad or scene.names() or [""])[0]
        scene.select(name)

    def _shoot(self) -> None:
        out = dict(self.summary or {})
        try:
            for hook in self.after_last_frame:
                out.update(hook(self) or {})
            if self.options.screenshot:
                path = Path(self.options.screenshot)
                path.parent.mkdir(parents=True, exist_ok=True)
                from studio.viewport.capture import capture

                # from the screen on a display: the live viewport is a native GL window that
                # QWidget.grab does not paint
                if capture(self.window).save(str(path), "PNG"):
                    out["screenshot"] = str(path)
                else:
                    out["screenshot_error"] = f"could not write {path}"
                    print(f"screenshot: could not write {path}", file=sys.stderr)
            out["data_dir"] = str(self.window.controller.store().data_dir)
        except Exception as exc:  # never hang a scripted run: say it in one line and exit
            log.debug("the scripted run's last step failed", exc_info=True)
            out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            print(f"studio: {out['error']}", file=sys.stderr)
            self.exit_code = self.exit_code or 1
        finally:
            print(json.dumps(out, default=str), flush=True)
            if self.options.exit_when_done:
                self.window.close()
                QApplication.instance().exit(self.exit_code)


def run_studio(options: StudioOptions) -> int:
    """Open the studio (blocking); returns the process exit code."""
    logging.basicConfig(level=os.environ.get("MODELWRIGHT_LOG", "WARNING"))
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Modelwright Studio")
    app.setOrganizationName("Modelwright")
    window, _ = build(options)
    scripted = ScriptedRun(window, options) if (options.task or options.autorun or options.hand or (
        options.project and (options.exit_when_done or options.screenshot))) else None
    window.show()
    code = app.exec()
    return scripted.exit_code if scripted and code == 0 else code
