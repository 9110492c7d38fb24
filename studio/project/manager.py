"""The studio's File menu: New / Open / Save / Save As / Recent, the title's modified marker,
the question before anything replaces the model, autosave and crash recovery.

The scene is saved in the worker's own format (studio/project/archive.py); the studio adds
its undo stack, journal, view, chat and episode links. Work on the session runs as jobs on
the session thread, in order, so a Save chosen before a replacement is taken before it.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox

from studio.outliner.units_menu import set_units
from studio.project import archive, contents
from studio.project.archive import Project, ProjectError
from studio.project.recovery import RecoveryBanner
from tools import ToolError
from tools.sandbox import jail
from tools.trust.outbox import Outbox

log = logging.getLogger(__name__)

RECENT_KEY, RECENT_MAX = "project/recent", 8
RUNNING_KEY = "project/running"  # set while a studio runs; still set at start = it crashed
AUTOSAVE_MS = 3 * 60 * 1000
AUTOSAVE_NAME = "autosave" + archive.SUFFIX
FILTER = f"Modelwright project (*{archive.SUFFIX})"


class ProjectManager(QObject):
    sig_opened = Signal(str, bool)  # (path, ok): a project is in place, or could not be opened

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window, self.controller, self.settings = window, window.controller, window.settings
        self.path: Path | None = None
        self.modified = False
        self._since_autosave = False
        self._quiet = False  # while a project is being put in place: its own changes are not edits
        self.unattended = False  # scripted runs: nobody to ask, nothing to offer
        # tests and scripts answer the question here: f(what) -> "save" | "discard" | "cancel"
        self.answer: Callable[[str], str] | None = None
        self.last_question: str | None = None
        self.episodes: list[str] = []
        c = self.controller
        c.confirm_replace = self.confirm_replace
        # edits are what the undo stack records (the person's calls, an agent's run, undo and
        # redo); a reset (load, restore, replay, new) starts a model nothing was done to yet
        c.undo_stack.indexChanged.connect(self._edited)
        c.worker.sig_reset.connect(self._replaced)
        window.agent.sig_finished.connect(self._agent_finished)
        self.timer = QTimer(self)
        self.timer.timeout.connect(self.autosave)
        self.timer.start(AUTOSAVE_MS)
        self.banner: RecoveryBanner | None = None
        self._title()

    def start(self, unattended: bool = False, open_path: str | os.PathLike | None = None) -> None:
        """At start: offer the autosave if the last studio did not close cleanly (a banner:
        never a dialog that blocks), and open `open_path` once the session is up."""
        self.unattended = unattended
        crashed = str(self.settings.value(RUNNING_KEY, "false")).lower() == "true"
        self.settings.setValue(RUNNING_KEY, True)
        self.settings.sync()
        if crashed and not unattended and self.autosave_path().is_file():
            self.banner = RecoveryBanner(self.window, self.autosave_path(), self.open)
        if open_path is not None:
            if self.controller.ready:
                self.open(open_path)
            else:
                self.controller.sig_ready.connect(lambda: self.open(open_path))

    # -- menu ------------------------------------------------------------------------------
    def add_actions(self, menu) -> None:
        def act(text: str, slot, key=None) -> QAction:
            action = QAction(text, self.window)
            if key is not None:
                action.setShortcut(key)
            action.triggered.connect(lambda _=False: slot())
            menu.addAction(action)
            return action

        self.actions = {
            "new": act("New", self.new, QKeySequence.StandardKey.New),
            "open": act("Open…", self.open_dialog, QKeySequence.StandardKey.Open),
        }
        self.recent_menu = menu.addMenu("Open Recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        self.actions["save"] = act("Save", self.save, QKeySequence.StandardKey.Save)
        self.actions["save_as"] = act("Save As…", self.save_as, QKeySequence("Ctrl+Shift+S"))
        menu.addSeparator()

    def recent(self) -> list[str]:
        value = self.settings.value(RECENT_KEY, [])
        items = [value] if isinstance(value, str) else list(value or [])
        return [str(p) for p in items if p][:RECENT_MAX]

    def _remember(self, path: Path) -> None:
        items = [str(path)] + [p for p in self.recent() if p != str(path)]
        self.settings.setValue(RECENT_KEY, items[:RECENT_MAX])

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        for p in self.recent():
            action = self.recent_menu.addAction(Path(p).name)
            action.setToolTip(p)
            action.triggered.connect(lambda _=False, p=p: self.open(p))
        self.recent_menu.setEnabled(bool(self.recent()))

    # -- state -------------------------------------------------------------------------------
    def _edited(self, *_: object) -> None:
        try:
            edited = not self._quiet and self.controller.undo_stack.count() > 0
        except RuntimeError:  # the stack is being destroyed with the window
            return
        if edited:
            self.modified = self._since_autosave = True
            self._title()

    def _replaced(self, origin: str) -> None:
        if origin != "project":  # the person was asked first (Save / Discard)
            self.modified = False
            self._title()

    def _agent_finished(self, summary: dict) -> None:
        if summary.get("episode_id"):
            self.episodes.append(str(summary["episode_id"]))

    def _title(self) -> None:
        name = self.path.stem if self.path else "Untitled"
        self.window.setWindowTitle(f"{name}[*] — Modelwright Studio")
        self.window.setWindowModified(self.modified)

    def _error(self, message: str) -> None:
        self.controller.sig_error.emit(message)

    # -- asking --------------------------------------------------------------------------------
    def confirm_replace(self, what: str) -> bool:
        """True when `what` may replace the model: unmodified, or the person chose Save (queued
        first) or Discard; Cancel keeps everything."""
        if not self.modified:
            return True
        self.last_question = what
        if self.answer is not None:
            choice = self.answer(what)
        elif self.unattended or QApplication.platformName() == "offscreen":
            choice = "discard"  # nobody to ask; the autosave keeps the last state
        else:
            choice = self._ask(what)
        if choice == "save":
            return self.save()
        return choice == "discard"

    def _ask(self, what: str) -> str:
        box = QMessageBox(
            QMessageBox.Icon.Question,
            "Unsaved changes",
            f"{what} replaces the model. Save your changes first?",
            QMessageBox.StandardButton.Save
            | QMessageBox.StandardButton.Discard
            | QMessageBox.StandardButton.Cancel,
            self.window,
        )
        box.setDefaultButton(QMessageBox.StandardButton.Save)
        self.question_box = box  # a test reaches the open dialog here
        answer = box.exec()
        self.question_box = None
        return {
            QMessageBox.StandardButton.Save: "save",
            QMessageBox.StandardButton.Discard: "discard",
        }.get(QMessageBox.StandardButton(answer), "cancel")

    # -- new / save ------------------------------------------------------------------------------
    def new(self) -> None:
        if not self.confirm_replace("New"):
            return
        self.modified = False  # asked once: new_scene must not ask again
        self.controller.new_scene()
        self.path, self.episodes = None, []
        self.window.agent.steps.clear()
        self._title()

    def save(self) -> bool:
        """Save to the project's file (Save As when it has none); False if cancelled."""
        if self.path is None:
            return self.save_as()
        return self.save_to(self.path)

    def save_as(self) -> bool:
        start = str(self.path or Path(self._last_folder(), "Untitled" + archive.SUFFIX))
        chosen, _ = QFileDialog.getSaveFileName(self.window, "Save project", start, FILTER)
        if not chosen:
            return False
        if not chosen.endswith(archive.SUFFIX):
            chosen += archive.SUFFIX
        return self.save_to(Path(chosen))

    def _last_folder(self) -> str:
        recent = self.recent()
        return str(Path(recent[0]).parent) if recent else str(Path.home())

    def save_to(
        self, path: Path, done: Callable[[Path], None] | None = None, autosave: bool = False
    ) -> bool:
        """Queue a save: the worker's state is read on the session thread now (before any
        replacement queued after it), the file is written when it arrives. False if refused."""
        path = Path(path)
        if self.controller.agent_running:  # its changes are not yet one undo step to save
            self._error(f"The agent is working on the scene: press Stop, then save {path.name}.")
            return False
        project, steps = contents.snapshot(self.window, self.episodes)

        def write(taken: tuple[dict, int]) -> None:
            try:
                _write(path, project, taken)
            except (ToolError, OSError) as e:
                why = f"Saving {path.name} failed: {getattr(e, 'message', None) or e}"
                if not autosave:  # a replacement may follow: keep the scene where it can be found
                    try:
                        _write(self.autosave_path(), project, taken)
                        why += f"; the scene was kept in {self.autosave_path()}"
                    except (ToolError, OSError):
                        pass
                self._error(why)
                return
            if not autosave:
                self.path, self.modified = path, False
                self._remember(path)
                self._title()
                self.controller.sig_status.emit(f"Saved {path}")
            if done is not None:
                done(path)

        self._since_autosave = False
        self.controller.worker.submit(
            lambda s: archive.take_state(os.fspath(s.scratch), steps),
            "save project",
            on_done=write,
            on_error=lambda e: self._error(f"Saving {path.name} failed: {e}"),
        )
        return True

    # -- open --------------------------------------------------------------------------------
    def open_dialog(self) -> None:
        chosen, _ = QFileDialog.getOpenFileName(
            self.window, "Open project", self._last_folder(), FILTER
        )
        if chosen:
            self.open(chosen)

    def open(self, path: str | os.PathLike) -> bool:
        """Open a project; a file that cannot be read is one line and changes nothing.
        `sig_opened(path, ok)` says when it is in place (view included) or has failed."""
        path = Path(path)
        try:
            project = archive.read_project(path)
            # its Blender files are someone else's input, like an import: only into a jail
            jail.require_jail(f"opening {path.name}")
        except ToolError as e:
            self._failed(path, e.message)
            return False
        if not self.confirm_replace("Open"):
            return False
        c = self.controller
        key, prev = f"mwproj_{secrets.token_hex(6)}", f"mwprev_{secrets.token_hex(6)}"

        def place(session: Any) -> None:
            scratch = os.fspath(session.scratch)
            try:
                archive.hand_over(scratch, archive.place_state(scratch, project.state, key))
                session.switch(park=prev, take=key)
            except ToolError as e:
                try:  # the live state was parked: put it back as it was
                    session.switch(park=None, take=prev)
                except ToolError as again:  # a worker that died was restarted on the old scene
                    log.debug("after a failed open: %s", again.message)
                shutil.rmtree(os.path.join(scratch, "state", "stash", key), ignore_errors=True)
                raise ProjectError(
                    f"{path.name} does not load: {e.message.splitlines()[0][:200]}"
                ) from None
            shutil.rmtree(os.path.join(scratch, "state", "stash", prev), ignore_errors=True)
            c.worker.sig_reset.emit("project")

        def placed(_: object) -> None:
            self._quiet = True
            try:
                c.finish_demonstration(check=False)
                self._restore(project)
            finally:
                self._quiet = False
            if path.parent == self.autosave_path().parent:  # recovered: not saved anywhere yet
                self.path, self.modified, self._since_autosave = None, True, True
            else:
                self.path, self.modified, self._since_autosave = path, False, False
                self._remember(path)
            self._title()
            c.sig_status.emit(f"Opened {path}")
            # after the scene read that the reset queued: else its first frame would reframe
            c.worker.submit(
                lambda _s: None, "view", on_done=lambda _: self._apply_view(path, project.view)
            )

        c.worker.submit(
            place,
            "open project",
            on_done=placed,
            on_error=lambda e: self._failed(
                path, getattr(e, "message", None) or f"Opening {path.name} failed: {e}"
            ),
        )
        return True

    def _failed(self, path: Path, message: str) -> None:
        self._error(message)
        self.sig_opened.emit(str(path), False)

    def _restore(self, project: Project) -> None:
        c = self.controller
        c.journal.reset([dict(x) for x in project.journal])
        contents.restore_undo(c, project.undo)
        contents.restore_chat(self.window.agent, project.chat)
        self.episodes = list(project.episodes)
        if self.episodes:  # the project's newest episode, when this store has it
            self.window.episodes.refresh()
            self.window.episodes.select_episode(self.episodes[-1])
        if project.task:
            self._set_task(project.task)
        c.refresh()
        c.sig_scene_changed.emit()

    def _set_task(self, task_id: str) -> None:
        """The saved task is chosen again without building its start state (the scene is the
        project's); an id this version does not know is left out."""
        from training import get_task

        try:
            task = get_task(task_id)
        except Exception:
            self.controller.sig_status.emit(f"The project's task {task_id!r} is not known here")
            return
        self.controller.task = task
        self.controller.demo.set_task(task.id, task.prompt, task.parameters)
        self.controller.sig_task.emit(task)

    def _apply_view(self, path: Path, view: dict) -> None:
        panel = self.window.viewport_panel
        if view:
            contents.apply_view(panel.viewport.camera, view)
            if "units" in view:  # the project's display unit, as saved
                set_units(self.controller.scene, self.window.settings, view["units"],
                          self.window.units_menu)  # fmt: skip
            panel.viewport.request()
            if panel.live_active:
                panel.live.update()
        self.sig_opened.emit(str(path), True)

    # -- autosave and recovery -------------------------------------------------------------------
    def autosave_path(self) -> Path:
        return Path(self.controller.store().data_dir) / "autosave" / AUTOSAVE_NAME

    def autosave(self) -> None:
        c = self.controller
        if self._since_autosave and c.ready and not c.agent_running:
            self.save_to(self.autosave_path(), autosave=True)

    def on_close(self) -> None:
        """Autosave what changed (waiting for it: the session ends next), then mark a clean exit."""
        c = self.controller
        if self._since_autosave and c.ready:
            try:
                project, steps = contents.snapshot(self.window, self.episodes)
                fut = c.worker.submit(
                    lambda s: archive.take_state(os.fspath(s.scratch), steps), "autosave"
                )
                _write(self.autosave_path(), project, fut.result(timeout=30))
            except Exception as e:  # closing must not fail: say it in the log
                log.warning("autosave on close failed: %s", e)
        self.settings.setValue(RUNNING_KEY, False)
        self.settings.sync()


def _write(path: Path, project: Project, taken: tuple[dict, int]) -> None:
    """The project with the worker's files, through the outbox (the one writer into a
    person's folder: a link or FIFO at the name is refused, never followed)."""
    project.state, depth = taken
    project.undo = contents.keep_last(project.undo, depth)
    Outbox(path.parent).write(path.name, project.to_bytes())
