"""The studio's session controller: one tool session, the models that mirror it, and the
rules that tie them together (what a call does to the scene, the undo stack, the recording).

Widgets never talk to the runtime directly: they call the controller, which validates,
queues the work on the session thread and updates the pure models, which widgets observe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoCommand, QUndoStack

from studio.models.demonstration import Demonstration, SceneJournal
from studio.models.scene import SceneModel
from studio.runtime.worker import SessionWorker
from tools import TOOLS, Session, ToolError, validate_call

log = logging.getLogger(__name__)


def as_written(tool: str, args: dict) -> dict:
    """A call as a person or model writes it, from the runtime's validated form (which spells
    every optional argument out as null): what redo sends, so it records what it did."""
    from tools.specs import without_defaults

    return without_defaults(tool, {k: v for k, v in args.items() if v is not None})


def created_name(tool: str, args: dict) -> str | None:
    """The object a call made (a person's new or duplicated object becomes the selection)."""
    if tool == "duplicate":
        return args.get("new_name")
    return args.get("name") if tool.startswith(("add_", "cad_")) else None


class ToolCallCommand(QUndoCommand):
    """One successful mutating call on the undo stack: undo = the runtime's `undo`, redo = the call again."""

    def __init__(self, controller: StudioController, tool: str, args: dict, origin: str) -> None:
        label = f"{tool} {args.get('name', '')}".strip()
        super().__init__(label if origin == "human" else f"{origin}: {label}")
        self.controller, self.tool, self.args = controller, tool, as_written(tool, args)
        self._pushed = False

    def redo(self) -> None:
        if not self._pushed:  # QUndoStack.push calls redo(); the call has already run
            self._pushed = True
            return
        self.controller.send(self.tool, self.args, origin="history")

    def undo(self) -> None:
        self.controller.send("undo", {"steps": 1}, origin="history")


class AgentRunCommand(QUndoCommand):
    """A whole agent run as one undo step: undo = the runtime's `undo` of all its changes,
    redo = its calls again, in order."""

    def __init__(self, controller: StudioController, calls: list[dict], label: str) -> None:
        super().__init__(f"agent: {label} ({len(calls)} change{'s' if len(calls) != 1 else ''})")
        self.controller = controller
        self.calls = [{"tool": c["tool"], "args": as_written(c["tool"], c["args"])} for c in calls]
        self._pushed = False

    def redo(self) -> None:
        if not self._pushed:
            self._pushed = True
            return
        for c in self.calls:
            self.controller.send(c["tool"], c["args"], origin="history")

    def undo(self) -> None:
        self.controller.send("undo", {"steps": len(self.calls)}, origin="history")


class StudioController(QObject):
    sig_error = Signal(str)  # something the person must see
    sig_status = Signal(str)  # a passing note for the status bar
    sig_ready = Signal()
    sig_busy = Signal(bool)
    sig_call = Signal(object, str)  # (ToolResult, origin), on the GUI thread
    sig_scene_changed = Signal()  # the scene changed (viewport: render again)
    sig_reward = Signal(object)  # RewardBreakdown of the chosen task on the current scene
    sig_task = Signal(object)  # the chosen training.tasks.Task, or None
    sig_target = Signal(object, object)  # (task, PNG of the solved task or None)
    sig_task_ready = Signal(object)  # the task's start state is built
    sig_agent_policy = Signal(str, object)  # (policy, {model, adapter}): drive the Agent dock
    sig_episode_saved = Signal(str)  # a demonstration was closed (Finish, new scene, new task)

    def __init__(self, session_factory: Callable[[], Any] | None = None, data_dir: str | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        if session_factory is None:
            from tools import ToolSession

            session_factory = ToolSession
        self.data_dir = data_dir
        self._store: Any = None
        self.scene = SceneModel()
        self.undo_stack = QUndoStack(self)
        self.journal = SceneJournal()
        self.demo = Demonstration(self.store)
        self.task: Any = None
        self.agent_running = False  # manual calls wait until the agent stops
        self.session_episodes: list[str] = []  # finished in this studio session (demonstrations)
        self._agent_calls: list[dict] = []  # the running agent's changes: one undo step
        self._agent_label = "run"
        self._agent_first_step = 0  # the episode's step count when the run began
        self.ready = False
        self.crashes = 0
        # asked before anything replaces the model (studio/project: Save / Discard / Cancel)
        self.confirm_replace: Callable[[str], bool] = lambda _what: True
        self.worker = SessionWorker(session_factory)
        self.worker.sig_ready.connect(self._on_ready)
        self.worker.sig_failed.connect(self.sig_error)
        self.worker.sig_busy.connect(self.sig_busy)
        self.worker.sig_call.connect(self._on_call)
        self.worker.sig_reset.connect(self._on_reset)

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        self.worker.start()

    def shutdown(self) -> None:
        try:
            self.drop_demonstration()
        except Exception:
            log.exception("closing the demonstration failed")
        self.worker.stop()
        if self._store is not None:
            self._store.close()

    def store(self) -> Any:
        if self._store is None:
            from agents.store import Store

            self._store = Store(self.data_dir)
        return self._store

    def _on_ready(self) -> None:
        self.ready = True
        self.sig_ready.emit()
        self.refresh()

    # -- manual work ---------------------------------------------------------------------
    def manual_call(self, tool: str, args: dict) -> None:
        """Validate and send one call from the palette/outliner; raises ToolError when invalid
        (nothing is sent then)."""
        validate_call(tool, args)
        self.send(tool, args, origin="human")

    def manual_calls(self, calls: list[tuple[str, dict]], label: str) -> None:
        """Several calls of the person's as ONE undo step (the gizmo on a multi-selection):
        the undo macro stays open until the last of them has come back."""
        for tool, args in calls:
            validate_call(tool, args)
        if len(calls) == 1:
            return self.send(*calls[0], origin="human")
        if self.agent_running or not calls:
            return self.send(*calls[0], origin="human") if calls else None
        self.undo_stack.beginMacro(label)
        left = [len(calls)]

        def one(_value: object = None) -> None:
            left[0] -= 1
            if left[0]:
                return
            self.undo_stack.endMacro()
            macro = self.undo_stack.command(self.undo_stack.count() - 1)
            if macro is not None and macro.childCount() == 0:  # every call failed: no entry
                macro.setObsolete(True)
                self.undo_stack.undo()

        for tool, args in calls:
            self.send(tool, args, origin="human", on_done=one, on_error=one)

    def send(self, tool: str, args: dict, origin: str = "human", on_done=None, on_error=None) -> None:
        """A call of the person's (palette, outliner, undo/redo in the history) is recorded as
        a human turn of the session's episode; other origins go straight to the runtime."""
        if origin not in ("human", "history"):
            self.worker.call(tool, args, origin=origin, on_done=on_done)
            return
        if self.agent_running:
            self.sig_error.emit("The agent is working on the scene: press Stop first, then edit.")
            return
        start = list(self.journal.calls)  # the scene the episode begins on, if it begins now

        def run(session: Session) -> Any:
            result = self.demo.human_call(session, tool, args, start)
            self.worker.sig_call.emit(result, origin)
            return result

        def failed(exc: BaseException) -> None:
            self.sig_error.emit(f"{tool} failed: {exc}")
            if on_error is not None:
                on_error(exc)

        self.worker.submit(run, f"{origin}:{tool}", on_done=on_done, on_error=failed)

    # -- the agent's runs ------------------------------------------------------------------
    def agent_started(self, label: str = "run") -> None:
        """The run's changes will be one undo step. Undo/redo wait meanwhile: an open macro
        makes the stack refuse them (Qt's canUndo is false while a macro is composed)."""
        self.agent_running, self._agent_calls, self._agent_label = True, [], label
        self._agent_first_step = self.demo.n_steps
        self.undo_stack.beginMacro(f"agent: {label}")

    def agent_finished(self, summary: dict) -> None:
        """The run ended: its changes become one undo step; its last words stay with the
        episode until the person acts again."""
        self.agent_running = False
        calls, self._agent_calls = self._agent_calls, []
        command = AgentRunCommand(self, calls, self._agent_label) if calls else None
        if command is not None:
            self.undo_stack.push(command)
        self.undo_stack.endMacro()
        macro = self.undo_stack.command(self.undo_stack.count() - 1)
        if command is None:  # nothing changed: no entry (an obsolete command is dropped on undo)
            macro.setObsolete(True)
            self.undo_stack.undo()
        else:
            macro.setText(command.text())
        if self.demo.active and summary.get("episode_id") == self.demo.episode_id:
            self.demo.after_agent(summary, self._agent_first_step)
        self.worker.submit(lambda s: s.scene_hash(), "hash", on_done=self.demo.after_agent_hash)
        self.refresh()

    def new_scene(self) -> None:
        """Empty scene; a demonstration in progress is closed first."""
        if not self.confirm_replace("New scene"):
            return
        self.drop_demonstration()
        self.worker.fresh_episode()
        self.worker.submit(lambda s: (s.reset(), self.worker.sig_reset.emit("human")), "reset")

    def load_task(self, task_id: str | None) -> None:
        """Choose a task: build its start state; later manual calls are checked against it."""
        if task_id and not self.confirm_replace("Load task"):
            return
        self.drop_demonstration()
        if not task_id:
            self.task = None
            self.demo.set_task(None, None)
            self.sig_task.emit(None)
            return
        from training import get_task

        try:
            task = get_task(task_id)
        except Exception as exc:
            self.sig_error.emit(f"Unknown task {task_id!r}: {exc}")
            return
        self.task = task
        self.demo.set_task(task.id, task.prompt, task.parameters)
        self.sig_task.emit(task)
        self.worker.fresh_episode()

        def build(s: Any) -> tuple[list[dict], bytes | None]:
            try:  # the solved scene, for the picker (our session: no second worker)
                target = task.render_target(s)
            except Exception:
                log.exception("rendering the target of %s failed", task.id)
                target = None
            s.reset()
            self.worker.sig_reset.emit("task")
            calls: list[dict] = []

            class Capture:  # the task's setup as replayable calls
                def call(self, name, args=None, *a, **kw):
                    r = s.call(name, args or {}, *a, **kw)
                    calls.append({"tool": name, "args": dict(args or {})})
                    return r

                def __getattr__(self, name):
                    return getattr(s, name)

            task.setup(Capture())
            return calls, target

        def built(value: tuple[list[dict], bytes | None]) -> None:
            calls, target = value
            self.sig_target.emit(task, target)
            self.journal.reset(calls)
            self.refresh()
            self.check_task()
            self.sig_task_ready.emit(task)

        self.worker.submit(build, f"setup {task.id}", on_done=built,
                           on_error=lambda e: self.sig_error.emit(f"Task setup failed: {e}"))

    def check_task(self) -> None:
        """Score the current scene against the chosen task (the live reward)."""
        task = self.task
        if task is None:
            return
        calls = list(self.demo.calls)
        self.worker.submit(lambda s: task.evaluate(s, calls), "check", on_done=self.sig_reward.emit,
                           on_error=lambda e: self.sig_error.emit(f"Checking the task failed: {e}"))

    def drop_demonstration(self) -> None:
        """The open episode ends without Finish (a replacement, or closing): never saved as a
        demonstration (`Demonstration.discard` says what is kept)."""
        try:
            ended = self.demo.discard()
        except Exception as exc:  # the store refused: said in one line, the studio goes on
            log.exception("ending the episode failed")
            self.demo.turns = None
            self.sig_error.emit(f"Ending the unfinished episode failed: {exc}")
            return
        if ended is None:
            return
        episode_id, outcome = ended
        if outcome == "finished":  # the agent's run, as it ended
            self.session_episodes.append(episode_id)
            self.sig_episode_saved.emit(episode_id)
        elif outcome == "removed":
            self.sig_status.emit("The unfinished episode was not kept (Finish saves a demonstration)")

    def finish_demonstration(self, check: bool = True, drop: set[int] | None = None,
                             prompt: str | None = None) -> bool:
        """Close the episode: checked against the task when one is chosen. `drop`: recorded
        step indices the person left out; `prompt`: the episode's prompt when it has none.
        Returns False (nothing closed, the reason shown) when the drop would break the replay."""
        if not self.demo.active:
            return True
        from agents.store import StoreError

        try:
            self.demo.drop(set(drop or ()))
        except StoreError as exc:
            self.sig_error.emit(str(exc))
            return False
        task = self.task if check else None
        if task is None:
            episode_id = self.demo.finish(prompt=prompt)
            self.session_episodes.append(episode_id)
            self.sig_status.emit(f"Saved demonstration {episode_id}")
            self.sig_episode_saved.emit(episode_id)
            return True
        calls = list(self.demo.calls)

        def done(verdict: Any) -> None:
            episode_id = self.demo.finish(verdict, prompt=prompt)
            self.session_episodes.append(episode_id)
            self.sig_reward.emit(verdict)
            self.sig_status.emit(f"Saved demonstration {episode_id} (reward {verdict.total:.3f})")
            self.sig_episode_saved.emit(episode_id)

        if self.demo.loop_verdict is not None:  # the loop's verdict on this very episode
            done(self.demo.loop_verdict)
            return True

        self.worker.submit(lambda s: task.evaluate(s, calls), "finish", on_done=done,
                           on_error=lambda e: self.sig_error.emit(f"Checking the task failed: {e}"))
        return True

    def refresh(self) -> None:
        """Read the scene back into the model."""
        self.worker.submit(lambda s: (s.scene(), s.scene_hash()), "scene",
                           on_done=lambda sh: self.scene.set_scene(sh[0], sh[1]),
                           on_error=lambda e: self.sig_error.emit(f"Reading the scene failed: {e}"))

    # -- following every call ----------------------------------------------------------------
    def _on_call(self, result: Any, origin: str) -> None:
        self.sig_call.emit(result, origin)
        crashed = result.error is not None and result.error.kind.value == "crash"
        if crashed:
            self.crashes += 1
            self.sig_error.emit(f"The tool worker crashed and was restarted: {result.error.message}")
        spec = TOOLS.get(result.tool)
        mutating = spec is not None and spec.mutating
        if origin in ("human", "history") and self.demo.record_error:
            self.sig_error.emit(self.demo.record_error)
        if not (result.ok and mutating):
            if not result.ok and not crashed and origin in ("human", "history"):
                self.sig_error.emit(f"{result.tool}: {result.error.message}")
            return
        self.journal.add(result.tool, result.args)
        if origin == "agent" and result.tool not in ("undo", "restore"):
            self._agent_calls.append({"tool": result.tool, "args": dict(result.args)})
        elif origin == "human" and result.tool not in ("undo", "restore"):
            self.undo_stack.push(ToolCallCommand(self, result.tool, result.args, origin))
            self.scene.select_next = created_name(result.tool, result.args)
        self.scene.scene_hash = result.scene_hash
        self.refresh()
        self.sig_scene_changed.emit()
        if origin != "agent":
            self.check_task()

    def _on_reset(self, origin: str) -> None:
        self._agent_calls = []
        self.undo_stack.clear()  # also ends an open macro: a run on a new scene opens it again
        if self.agent_running:
            self.undo_stack.beginMacro(f"agent: {self._agent_label}")
        self.journal.reset()
        self.scene.set_scene({"objects": []}, None)
        self.refresh()
        self.sig_scene_changed.emit()

    def validate(self, tool: str, args: dict) -> str | None:
        """The validation error a call would get, in words, or None."""
        try:
            validate_call(tool, args)
        except ToolError as e:
            return e.message
        return None
