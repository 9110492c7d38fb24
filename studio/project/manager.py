"""The studio's File menu: New / Open / Save / Save As / Recent, the title's modified marker,
the question before anything replaces the model or the studio quits, autosave and crash
recovery.

The scene is saved in the worker's own format (studio/project/archive.py); the studio adds
its undo stack, journal, view, chat and episode links. Work on the session runs as jobs on
the session thread, in order, so a Save chosen before a replacement is taken before it; the
file itself is written on a writer thread, never on the GUI thread.

Autosave: a modified scene is copied to this studio's recovery slot (studio/project/recovery.py)
AUTOSAVE_AFTER_EDIT_MS after an edit and every AUTOSAVE_MS while it stays modified; the copy
goes when the scene is saved, discarded or replaced, and with the slot at a clean exit. Any
other exit (a crash, kill -9, a lost session) leaves it, and the next start offers it.
"""

from __future__ import annotations

import concurrent.futures
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

from studio.folders import remember, start_folder
from studio.outliner.units_menu import set_units
from studio.project import archive, contents, recovery
from studio.project.archive import Project, ProjectError
from studio.project.recovery import AutosaveSlot, RecoveryBanner
from tools import ToolError
from tools.sandbox import jail
from tools.trust.outbox import Outbox

log = logging.getLogger(__name__)

RECENT_KEY, RECENT_MAX = "project/recent", 8
AUTOSAVE_MS = 30 * 1000  # while the scene stays modified
AUTOSAVE_AFTER_EDIT_MS = 2 * 1000  # after an edit (edits in between join the same copy)
FILTER = f"Modelwright project (*{archive.SUFFIX})"
_SKIPPED = object()  # a recovery copy not written: the scene was saved or discarded since

# chooser(parent, caption, start, filter) -> (path, chosen filter); "" when cancelled
Chooser = Callable[[object, str, str, str], tuple[str, str]]


class ProjectManager(QObject):
    sig_opened = Signal(str, bool)  # (path, ok): a project is in place, or could not be opened
    sig_autosaved = Signal(str)  # a recovery copy was written (its path)
    _sig_written = Signal(object, object)  # internal: (callback, error or None) from the writer

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
        # the file dialogs (tests answer them here): QFileDialog's static functions by default
        self.save_chooser: Chooser = QFileDialog.getSaveFileName
        self.open_chooser: Chooser = QFileDialog.getOpenFileName
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
        self.soon = QTimer(self)  # the copy after an edit
        self.soon.setSingleShot(True)
        self.soon.setInterval(AUTOSAVE_AFTER_EDIT_MS)
        self.soon.timeout.connect(self.autosave)
        self._sig_written.connect(lambda callback, error: callback(error))
        # files are written here, one at a time, in the order they were taken
        self._writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mw-project-writer")
        self._generation = 0  # bumped when the recovery copy is dropped: older copies are not written
        self.slot: AutosaveSlot | None = None
        self.recovering: Path | None = None  # the copy being recovered, until it is in place
        self.banner: RecoveryBanner | None = None
        self._title()

    def start(self, unattended: bool = False, open_path: str | os.PathLike | None = None,
              recover: str = "ask") -> None:
        """At start: take this studio's recovery slot; offer the copy a studio that did not
        close cleanly left (a banner, never a dialog that blocks; `recover` "yes" recovers it
        and "no" discards it unasked; scripted runs are not offered it), and open `open_path`
        once the session is up."""
        self.unattended = unattended
        root = self.autosave_root()
        left = recovery.orphans(root)  # (this studio's own slot is held: never among them)
        if self.slot is None:
            self.slot = AutosaveSlot(root)
        if left and recover == "no":
            for copy in left:
                recovery.forget(copy)
        elif left and recover == "yes":
            self._when_ready(lambda: self.recover(left[0]))
        elif left and not unattended:
            try:
                self.banner = RecoveryBanner(self.window, left[0], self.recover, self.discard_copy)
            except OSError as e:  # gone meanwhile (another studio took it): nothing to offer
                log.debug("no recovery offer: %s", e)
        if open_path is not None:
            self._when_ready(lambda: self.open(open_path))

    def _when_ready(self, then: Callable[[], object]) -> None:
        if self.controller.ready:
            then()
        else:
            self.controller.sig_ready.connect(lambda: then())

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
            if not self.soon.isActive():
                self.soon.start()

    def _replaced(self, origin: str) -> None:
        if origin != "project":  # the person was asked first (Save / Discard)
            self.modified = self._since_autosave = False
            self._title()
            self.drop_copy()  # what it held was saved or discarded

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
        choice = self._choice(what, f"{what} replaces the model. Save your changes first?")
        if choice == "save":
            return self.save()
        return choice == "discard"

    def may_close(self) -> bool:
        """Quit or the window's close: True when the studio may close now. A modified scene
        asks Save / Discard / Cancel first, as New does; with Save the window closes once the
        file is written (False now; it stays open when the save fails or is cancelled)."""
        if not self.modified:
            return True
        choice = self._choice("Quit", "The model has unsaved changes. Save them before you quit?")
        if choice == "save":
            self.save(then=lambda _path: QTimer.singleShot(0, self.window.close))
            return False
        return choice == "discard"

    def _choice(self, what: str, question: str) -> str:
        self.last_question = what
        if self.answer is not None:
            return self.answer(what)
        if self.unattended or QApplication.platformName() == "offscreen":
            return "discard"  # nobody to ask
        return self._ask(question)

    def _ask(self, question: str) -> str:
        box = QMessageBox(
            QMessageBox.Icon.Question,
            "Unsaved changes",
            question,
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

    def save(self, then: Callable[[Path], None] | None = None) -> bool:
        """Save to the project's file (Save As when it has none); False if cancelled. `then`:
        called with the path once the file is written."""
        if self.path is None:
            return self.save_as(then)
        return self.save_to(self.path, done=then)

    def save_as(self, then: Callable[[Path], None] | None = None) -> bool:
        name = self.path.name if self.path else "Untitled" + archive.SUFFIX
        start = os.path.join(self._start_folder(), name)
        chosen, _ = self.save_chooser(self.window, "Save project", start, FILTER)
        if not chosen:
            return False
        remember(self.settings, chosen)
        if not chosen.endswith(archive.SUFFIX):
            chosen += archive.SUFFIX
        return self.save_to(Path(chosen), done=then)

    def _start_folder(self) -> str:
        """The open project's folder, else the last project's, else the last any dialog used."""
        recent = self.recent()
        return start_folder(self.window, self.settings, str(Path(recent[0]).parent) if recent else None)

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
        generation, origin, keep = self._generation, self.path, self.autosave_path()

        def write(taken: tuple[dict, int]) -> None:  # on the writer thread
            if autosave and generation != self._generation:
                return _SKIPPED  # dropped since it was taken (saved, discarded, replaced)
            try:
                _write(path, project, taken)
                if autosave and self.slot is not None:
                    self.slot.note_origin(origin)
            except (ToolError, OSError) as e:
                why = f"Saving {path.name} failed: {getattr(e, 'message', None) or e}"
                if not autosave:  # a replacement may follow: keep the scene where it can be found
                    try:
                        _write(keep, project, taken)
                        why += f"; the scene was kept in {keep}"
                    except (ToolError, OSError):
                        pass
                return why
            return None

        def written(why: object) -> None:  # back on the GUI thread
            if why is _SKIPPED:
                return
            if why is not None:
                self._error(why)
                return
            if autosave:
                self.sig_autosaved.emit(str(path))
            else:
                self.path = path
                self._remember(path)
                if self.controller.undo_stack.index() == undo_index:  # nothing done since
                    self.modified = False
                    self.drop_copy()
                self._title()
                self.controller.sig_status.emit(f"Saved {path}")
            if done is not None:
                done(path)

        def taken(state: tuple[dict, int]) -> None:
            self._in_writer(lambda: write(state), written)

        undo_index = self.controller.undo_stack.index()
        self._since_autosave = False
        self.controller.worker.submit(
            lambda s: archive.take_state(os.fspath(s.scratch), steps),
            "save project",
            on_done=taken,
            on_error=lambda e: self._error(f"Saving {path.name} failed: {e}"),
        )
        return True

    def _in_writer(self, job: Callable[[], object], then: Callable[[object], None]) -> None:
        """Run `job` on the writer thread; `then(its value)` on the GUI thread."""
        def run() -> None:
            try:
                value = job()
            except Exception as e:  # never lost: said in the error bar
                log.exception("writing a project failed")
                value = f"Writing the project failed: {e}"
            self._sig_written.emit(then, value)

        try:
            self._writer.submit(run)
        except RuntimeError:  # the studio is closing
            log.debug("a project write after close was dropped")

    # -- open --------------------------------------------------------------------------------
    def open_dialog(self) -> None:
        chosen, _ = self.open_chooser(self.window, "Open project", self._start_folder(), FILTER)
        if chosen:
            remember(self.settings, chosen)
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
                c.drop_demonstration()
                self._restore(project)
            finally:
                self._quiet = False
            copy, self.recovering = self.recovering, None
            if copy is not None and copy == path:  # recovered: as it was, not saved anywhere yet
                self.path, self.modified, self._since_autosave = recovery.origin_of(copy), True, True
                # this studio's own copy first, then the old one goes
                self.autosave(then=lambda _p: recovery.forget(copy))
            else:
                self.path, self.modified, self._since_autosave = path, False, False
                self._remember(path)
                self.drop_copy()
            self._title()
            c.sig_status.emit("Recovered the autosaved scene" if copy is not None else f"Opened {path}")
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
        if self.recovering == path:
            self.recovering = None
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
    def autosave_root(self) -> Path:
        """DATA/autosave, the store's folder (found without opening the store)."""
        from agents.store.location import resolve_data_dir

        return resolve_data_dir(self.controller.data_dir) / "autosave"

    def autosave_path(self) -> Path:
        """Where this studio's recovery copy is written."""
        if self.slot is None:  # not started (a window built without `build`): take one now
            self.slot = AutosaveSlot(self.autosave_root())
        return self.slot.path

    def autosave(self, then: Callable[[Path], None] | None = None) -> bool:
        """Write the recovery copy if the scene changed since the last one (the state is taken
        on the session thread, the file written on the writer thread). False if not now."""
        c = self.controller
        if not (self._since_autosave and c.ready and not c.agent_running):
            return False  # the timer tries again; an agent's run is one step once it ends
        return self.save_to(self.autosave_path(), done=then, autosave=True)

    def drop_copy(self) -> None:
        """The scene was saved, discarded or replaced: its recovery copy goes (and a copy
        already on its way is not written)."""
        self._generation += 1
        self.soon.stop()
        if self.slot is not None:
            slot = self.slot
            self._in_writer(slot.clear, lambda _v: None)

    def recover(self, copy: Path) -> bool:
        """Open a recovery copy: the scene comes back modified, under its project's name."""
        if self.banner is not None:
            self.banner.hide()
        self.recovering = Path(copy)
        if not self.open(copy):
            self.recovering = None
            return False
        return True

    def discard_copy(self, copy: Path) -> None:
        recovery.forget(copy)
        self.controller.sig_status.emit("The autosaved scene was discarded")

    def on_close(self) -> None:
        """A clean exit (the person saved, discarded, or changed nothing): the recovery slot
        goes, once the writes already taken are on disk."""
        self.timer.stop()
        self.soon.stop()
        self._generation += 1
        self._writer.shutdown(wait=True)  # file writes only: never the worker or a model
        if self.slot is not None:
            self.slot.close()
            self.slot = None


def _write(path: Path, project: Project, taken: tuple[dict, int]) -> None:
    """The project with the worker's files, through the outbox (the one writer into a
    person's folder: a link or FIFO at the name is refused, never followed)."""
    project.state, depth = taken
    project.undo = contents.keep_last(project.undo, depth)
    Outbox(path.parent).write(path.name, project.to_bytes())
