"""Agent chat: a goal or the chosen task, the policy, Run/Stop, and the steps as they stream.

The agent continues the scene as it is (the person's model, a task's start state) unless
"New scene" is ticked; its whole run is one undo step, and its turns join the session's
episode, so the person can stop it, edit by hand and let it go on in the same episode.
A run that cannot start (the oracle without a task) says so before anything changes.

Each event of the episode loop becomes a line: the model's message, the tool call, the
result or error, and a thumbnail of the render. Risky calls wait in a banner for
Approve/Reject when approval is on. Every run keeps its transcript: runs are appended, each
under a "Run N" header, and the Run selector jumps to one.

Above the steps, a line says what the selected agent can do (`describe`): for the Local
agent, the shipped adapter's measured table (`agents/models/shipped.py`); for the bare base,
that it makes no tool calls and what to use instead. A run that made no tool call says so
and what to try (`no_call_hint`).
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from agents.models.registry import BASE_NAME
from agents.models.shipped import ShippedAdapter, default_shipped, shipped_at
from studio.agent.runner import PROSE_STOP_TOKENS, AgentRequest, AgentRunner, refusal
from studio.foreign import plain_label, png_image
from tools.cli.exits import UserError
from tools.text import printable

POLICIES = ("oracle", "openai", "hf", "none")


def default_policy(settings) -> str:
    """With nothing saved: a configured model server's (openai), else the Local agent (hf:
    the shipped adapter on the packaged base, else the bare base), which acts on a free-form
    goal; the oracle only plays tasks."""
    if settings.contains("agent/policy"):
        return str(settings.value("agent/policy"))
    configured = (settings.contains("agent/base_url") or settings.contains("server/endpoint")
                  or os.environ.get("OPENAI_BASE_URL"))
    return "openai" if configured else "hf"

REPLY_CHARS = 300  # of a model's reply in the steps list (a small model may ramble for 256 tokens)
RUN_HEADER = re.compile(r"^━━ Run (\d+)")
LARGER = ("a larger model through Ollama or `modelwright serve` (policy openai, its "
          "endpoint and model)")


def local_choice(model: str, adapter: str) -> tuple[str, str, ShippedAdapter | None]:
    """(model, adapter, shipped) the hf policy runs with the Model and Adapter fields as they
    are: both empty is the default local agent, the shipped adapter on its base when one is
    shipped (else the bare packaged base)."""
    if not model and not adapter:
        shipped = default_shipped()
        if shipped is not None:
            return shipped.base, shipped.path, shipped
        return BASE_NAME, "", None
    return model or BASE_NAME, adapter, shipped_at(adapter) if adapter else None


def variants_line(name: str, data_dir: str | None) -> str:
    """An agent's variants as the Local list's tooltip says them: the fast ones made so far,
    with their size and the speed measured here (`modelwright models show NAME`)."""
    from agents.models.variants import describe as made

    try:
        rows = made(name, data_dir)
    except (OSError, UserError):
        rows = []
    if not rows:
        return "variants: standard; fast (tick Fast): made on first use"
    parts = []
    for r in rows:
        speed = f", {r['new_tok_s']:g} new tokens/s here" if r.get("new_tok_s") else ""
        parts.append(f"fast ({r['engine']} {r['quant']}, {r['size_bytes'] / 1e6:.0f} MB{speed})")
    return "variants: standard; " + "; ".join(parts)


def describe(policy: str, model: str = "", adapter: str = "", base_url: str = "") -> str:
    """What the selected agent can do, in a line or two (shown before a run)."""
    name, _, arg = policy.strip().partition(":")
    if name == "hf":
        model, adapter, shipped = local_choice(arg or model.strip(), adapter.strip())
        if shipped is not None:
            return (f"Local agent {shipped.name} (shipped, on {shipped.base}) can do "
                    f"{shipped.can_do()}. For more, use {LARGER}.")
        if not adapter and model == BASE_NAME:
            return bare_base_words()
        if adapter:
            return (f"A LoRA adapter on {model}: it does what its training showed it (a studio "
                    "fine-tune: the steps of your demonstrations).")
        return (f"The local model {model}: what it can do depends on the model; a small one "
                "may make no tool calls.")
    if name == "openai":
        return (f"A served model at {base_url or 'the endpoint'}: as capable as that model, "
                "shown every tool.")
    return {"oracle": "Plays the chosen task's own solution: pick a task in the Task dock.",
            "reference": "Plays a benchmark case's reference script.",
            "none": "Makes no call and stops at once (the floor of an evaluation).",
            "script": f"Replays the calls in {arg or 'a JSONL file'}."}.get(name, "")


def bare_base_words() -> str:
    shipped = default_shipped()
    untrained = _untrained_rate(shipped)
    instead = (f"the shipped agent {shipped.name} (clear Model and Adapter), " if shipped else "")
    return (f"The bare {BASE_NAME} makes no tool calls{untrained}: it answers in prose and "
            f"the scene stays as it is. Use {instead}an adapter you trained (Training dock → "
            f"Use in agent), or {LARGER}.")


def _untrained_rate(shipped: ShippedAdapter | None) -> str:
    for row in (shipped.measured.get("table") or []) if shipped else []:
        if row.get("stage") == "untrained" and isinstance(row.get("valid_call_rate"), int | float):
            return f" ({100 * row['valid_call_rate']:.0f} % valid calls on its test tasks)"
    return ""


def no_call_hint(policy: str, failed: int = 0, adapter: str | None = None) -> str:
    """What to say after a run that changed nothing: it made no tool call (`failed` 0), or
    every one of its `failed` calls failed; and what to try. `adapter`: the one it ran with."""
    name = policy.partition(":")[0]
    if name == "none":
        return "No tool call was made: the none policy never makes one."
    shipped = default_shipped()
    tries = ["pick a task in the Task dock (the oracle plays its solution)"]
    if name == "hf" and shipped is not None:
        what = shipped.can_do().split(";")[0].partition(": ")[2]
        if adapter and Path(adapter).resolve() == Path(shipped.path).resolve():
            tries.append(f"a goal it can do ({what}), worded like a task's prompt")
        else:
            tries.append(f"the shipped agent {shipped.name} (clear Model and Adapter) on a goal "
                         f"it can do ({what})")
    tries.append(LARGER)
    if failed:
        why = ("Nothing was changed: its tool call failed" if failed == 1 else
               f"Nothing was changed: all {failed} of its tool calls failed")
        why += " (the errors are above), and the scene is as it was."
    else:
        why = "No tool call was made: the model answered in prose, and the scene is unchanged."
    return f"{why} Try: " + "; or ".join(tries) + "."


class AgentDock(QWidget):
    sig_started = Signal()
    sig_finished = Signal(object)  # summary dict
    sig_event = Signal(str, object)  # every event of the running episode (kind, data)

    def __init__(self, controller, settings, parent=None) -> None:
        super().__init__(parent)
        self.controller, self.settings = controller, settings
        self.runner: AgentRunner | None = None
        self.attachment: bytes | None = None
        self.steps_seen = 0
        self.last_summary: dict | None = None
        self.goal = QPlainTextEdit()
        self.goal.setPlaceholderText("Describe what to build, or pick a task in the Task dock")
        self.goal.setMaximumHeight(52)
        # typed for this run: edited since the last run and since a task was chosen (a stale
        # goal never stands in for the task's prompt)
        self.goal_fresh = False
        self.goal.textChanged.connect(self._goal_edited)
        controller.sig_task.connect(self._task_chosen)
        self.use_task = QCheckBox("Chosen task")
        self.use_task.setChecked(True)
        self.policy = QComboBox()
        self.policy.setEditable(True)  # e.g. hf:/path/to/model or script:run.jsonl
        self.policy.addItems(POLICIES)
        self.policy.setCurrentText(default_policy(settings))
        self.base_url = QLineEdit(str(settings.value("agent/base_url", "http://127.0.0.1:8000/v1")))
        self.model = QLineEdit(str(settings.value("agent/model", "")))
        self.model.setPlaceholderText("served model name (openai); name or folder (hf; empty: "
                                      "the default local agent)")
        self.local = QComboBox()  # the registry's models and adapters (`modelwright models list`)
        self.local.setToolTip("Drive the agent with a local model or adapter (hf policy)")
        # long names are elided in the field (the dock keeps its width), shown whole when open
        self.local.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.local.setMinimumContentsLength(16)
        self.local.activated.connect(self._use_local)
        self.fill_local()
        # --variant fast: the agent's q8_0 GGUF in llama.cpp where it is installed, else int8
        self.fast = QCheckBox("Fast")
        self.fast.setChecked(settings.value("agent/variant", "standard") == "fast")
        self.fast.setToolTip("Run the fast variant of the local agent: merged and quantised "
                             "(llama.cpp q8_0 where llama-cpp-python is installed, else int8), "
                             "made on first use; the agents' list says each one's size and speed")
        self.adapter = QLineEdit(str(settings.value("agent/adapter", "")))
        self.adapter.setPlaceholderText("LoRA adapter folder or name (hf); empty with no Model: "
                                        "the shipped one")
        self.max_steps = QSpinBox()
        self.max_steps.setRange(0, 200)
        self.max_steps.setSpecialValueText("task budget")
        self.approval = QCheckBox("Approve risky tools")
        self.approval.setChecked(settings.value("agent/approval", "true") in (True, "true"))
        self.record = QCheckBox("Record")
        self.record.setChecked(True)
        self.new_scene = QCheckBox("New scene")
        self.new_scene.setToolTip("Start from an empty scene (or the task's start) instead of "
                                  "continuing the model as it is")
        form = QFormLayout()
        form.setVerticalSpacing(3)
        policy_row = QHBoxLayout()
        policy_row.addWidget(self.policy, 2)
        policy_row.addWidget(QLabel("max steps"))
        policy_row.addWidget(self.max_steps, 1)
        form.addRow("Policy", policy_row)
        form.addRow("Endpoint", self.base_url)
        local_row = QHBoxLayout()
        local_row.addWidget(self.local, 1)
        local_row.addWidget(self.fast)
        form.addRow("Local", local_row)
        form.addRow("Model", self.model)
        form.addRow("Adapter", self.adapter)
        controller.sig_agent_policy.connect(self.use_policy)
        self.run_button = QPushButton("Run")
        self.run_button.setObjectName("accent")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.run_button.clicked.connect(self.run)
        self.stop_button.clicked.connect(self.stop)
        for button in (self.run_button, self.stop_button):  # a Space typed later never re-runs
            button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
            button.setAutoDefault(False)
        self.attach_label = QLabel("")
        self.attach_label.setObjectName("hint")
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.attach_label, 1)
        self.banner = QFrame()
        self.banner.setObjectName("approval")
        self.banner_text = QLabel()
        self.banner_text.setTextFormat(Qt.TextFormat.RichText)  # its args are escaped below
        self.banner_text.setWordWrap(True)
        approve, reject = QPushButton("Approve"), QPushButton("Reject")
        approve.clicked.connect(lambda: self.answer(True))
        reject.clicked.connect(lambda: self.answer(False))
        row = QHBoxLayout(self.banner)
        row.addWidget(self.banner_text, 1)
        row.addWidget(approve)
        row.addWidget(reject)
        self.banner.hide()
        self._pending = None
        self.steps = QListWidget()
        self.steps.setIconSize(QSize(112, 112))
        self.steps.setWordWrap(True)
        # by pixel: by item, a reply taller than the list left only the last line in view
        self.steps.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.steps.setMinimumHeight(200)
        self.steps.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.status = plain_label("Idle")  # it quotes the policy's errors
        self.about = plain_label("")  # what the selected agent can do
        self.about.setObjectName("hint")
        self.about.setWordWrap(True)  # wraps in the dock's width, never widens it
        self.about.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.runs = QComboBox()  # every run's transcript stays in the list: jump to one
        self.runs.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.runs.setMinimumContentsLength(12)  # a long goal is elided, the dock keeps its width
        self.runs.setToolTip("Each run's steps stay in the list below; jump to one")
        self.runs.activated.connect(self.show_run)
        for field in (self.policy.currentTextChanged, self.model.textChanged,
                      self.adapter.textChanged, self.base_url.textChanged):
            field.connect(self.update_about)
        self.steps.model().rowsRemoved.connect(self.refresh_runs)
        self.steps.model().modelReset.connect(self.refresh_runs)
        self.steps.model().rowsInserted.connect(self._rows_added)  # a restored project's chat
        self.update_about()
        self.refresh_runs()
        layout = QVBoxLayout(self)
        layout.addWidget(self.goal)
        layout.addLayout(form)
        layout.addWidget(self.about)
        checks = QHBoxLayout()
        checks.addWidget(self.use_task)
        checks.addWidget(self.approval)
        checks.addWidget(self.record)
        checks.addWidget(self.new_scene)
        layout.addLayout(checks)
        layout.addLayout(buttons)
        layout.addWidget(self.banner)
        runs_row = QHBoxLayout()
        runs_row.addWidget(QLabel("Run"))
        runs_row.addWidget(self.runs, 1)
        layout.addLayout(runs_row)
        layout.addWidget(self.steps, 1)
        layout.addWidget(self.status)

    # -- running -------------------------------------------------------------------------
    def request(self) -> AgentRequest:
        policy = self.policy.currentText().strip() or "oracle"
        options = {}
        if policy.startswith("openai"):
            options = {"base_url": self.base_url.text().strip() or None, "model": self.model.text().strip() or None}
        elif policy == "hf":  # nothing named: the shipped adapter on its base (else the bare base)
            model, adapter, shipped = local_choice(self.model.text().strip(),
                                                   self.adapter.text().strip())
            policy = f"hf:{model}"
            if adapter:
                options = {"adapter": adapter}
            if shipped is not None and shipped.tools:  # the tools its prompts showed
                options["goal_tools"] = list(shipped.tools)
                if shipped.toolboxes:  # and the ones a goal's words choose (a CAD part's)
                    options["goal_toolboxes"] = list(shipped.toolboxes)
            if self.fast.isChecked():
                options["variant"] = "fast"
        task = self.controller.task if self.use_task.isChecked() else None
        goal = self.goal.toPlainText().strip()
        if task is not None and not self.goal_fresh:  # the task's prompt, not a stale goal
            goal = ""
        # the Local agent: a goal it cannot act on ends after a few tokens (0: off)
        stop = int(self.settings.value("agent/prose_stop_tokens", PROSE_STOP_TOKENS) or 0)
        return AgentRequest(policy=policy, task_id=task.id if task else None,
                            goal=goal, options=options, prose_stop_tokens=stop,
                            max_steps=self.max_steps.value() or None, record=self.record.isChecked(),
                            attachment=self.attachment, new_scene=self.new_scene.isChecked())

    def run(self, request: AgentRequest | None = None) -> None:
        if self.runner is not None and self.runner.isRunning():
            return
        request = request if isinstance(request, AgentRequest) else self.request()
        why = refusal(request)
        if why:  # in the studio's words, before anything changes
            self.status.setText(printable(why))
            self.controller.sig_error.emit(why)
            return
        if request.new_scene and not self.controller.confirm_replace("A run on a new scene"):
            return
        if not request.start and not request.new_scene:  # continue from the scene as it is
            request.start = list(self.controller.journal.calls)
        self.settings.setValue("agent/policy", self.policy.currentText())
        self.settings.setValue("agent/base_url", self.base_url.text())
        self.settings.setValue("agent/model", self.model.text())
        self.settings.setValue("agent/adapter", self.adapter.text())
        self.settings.setValue("agent/variant", "fast" if self.fast.isChecked() else "standard")
        self.settings.setValue("agent/approval", self.approval.isChecked())
        if request.new_scene:  # another start state: the open episode ends here
            self.controller.drop_demonstration()  # kept only if an agent run ended it (Finish saves a person's)
        elif request.record and not request.task_id:  # the goal names a person's episode
            self.controller.demo.use_goal(request.goal)
        self.goal_fresh = False  # sent: the next run needs a goal typed for it
        self.steps_seen = 0
        self.run_started(request)
        self.runner = AgentRunner(self.controller.worker, request,
                                  approval=self.approval.isChecked(), parent=self,
                                  episode=self.controller.demo if request.record else None,
                                  data_dir=self.controller.data_dir)
        self.controller.agent_started((request.goal or request.task_id or "run")[:40])
        self.runner.sig_event.connect(self._on_event)
        self.runner.sig_approval.connect(self._on_approval)
        self.runner.sig_error.connect(self.controller.sig_error)
        self.runner.sig_finished.connect(self._on_finished)
        self.run_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        what = f"task {request.task_id}" + ("" if request.goal else " (its prompt)") \
            if request.task_id else "the goal"
        self.status.setText(f"Running {request.policy} on {what}...")
        self.attachment = None
        self.attach_label.setText("")
        self.runner.start()
        self.sig_started.emit()

    # -- transcripts -------------------------------------------------------------------------
    def run_started(self, request: AgentRequest) -> None:
        """A header for the new run's transcript, below the earlier runs' (kept)."""
        n = 1 + max((int(m.group(1)) for m in map(RUN_HEADER.match, self.run_headers()) if m),
                    default=0)
        what = request.goal or (f"task {request.task_id}" if request.task_id else "")
        self._add(f"━━ Run {n}: {what[:80]} ({request.policy}) ━━", "#9aa0a6")
        self.refresh_runs()
        self.runs.setCurrentIndex(self.runs.count() - 1)

    def run_headers(self) -> list[str]:
        return [self.steps.item(i).text() for i in range(self.steps.count())
                if RUN_HEADER.match(self.steps.item(i).text())]

    def refresh_runs(self, *_args) -> None:
        """The Run selector from the headers in the list (a restored project's too)."""
        self.runs.clear()
        for header in self.run_headers():
            self.runs.addItem(header.strip("━ "))
        self.runs.setEnabled(self.runs.count() > 0)

    def _rows_added(self, _parent, first: int, last: int) -> None:
        if any(RUN_HEADER.match(self.steps.item(i).text()) for i in range(first, last + 1)
               if self.steps.item(i) is not None):
            self.refresh_runs()

    def show_run(self, index: int) -> None:
        """Scroll the list to run `index`'s header."""
        headers = [i for i in range(self.steps.count())
                   if RUN_HEADER.match(self.steps.item(i).text())]
        if 0 <= index < len(headers):
            item = self.steps.item(headers[index])
            self.steps.scrollToItem(item, QAbstractItemView.ScrollHint.PositionAtTop)

    def update_about(self, *_args) -> None:
        """Say what the selected agent can do."""
        try:
            text = describe(self.policy.currentText(), self.model.text(), self.adapter.text(),
                            self.base_url.text().strip())
        except (UserError, OSError) as exc:  # an unreadable shipped folder: say it
            text = str(exc)
        self.about.setText(printable(text))
        self.about.setVisible(bool(text))

    def _goal_edited(self) -> None:
        self.goal_fresh = bool(self.goal.toPlainText().strip())

    def _task_chosen(self, task) -> None:
        self.goal_fresh = False
        self.goal.setPlaceholderText(
            "The task's prompt is the goal; type here to give another" if task is not None
            else "Describe what to build, or pick a task in the Task dock")

    def use_policy(self, policy: str, options: dict) -> None:
        """Another dock chose the policy (the Training dock's "Use in agent")."""
        self.policy.setCurrentText(policy)
        self.model.setText(options.get("model", ""))
        self.adapter.setText(options.get("adapter", ""))
        self.fill_local()  # a new adapter may have been registered

    def fill_local(self) -> None:
        """The default local agent, then the registered models, each followed by its adapters
        (the shipped ones marked)."""
        from agents.models.registry import list_adapters, list_models

        self.local.clear()
        self.local.addItem("registered models and adapters...", None)
        shipped = default_shipped()
        default = (f"Local agent (default): {shipped.name}" if shipped  # its base: tooltip
                   else f"Local agent (default): {BASE_NAME}, bare")
        self.local.addItem(default, {"model": "", "adapter": ""})
        if shipped:
            self.local.setItemData(self.local.count() - 1, f"{shipped.name} on {shipped.base}"
                                   f"\n{variants_line(shipped.name, self.controller.data_dir)}",
                                   Qt.ItemDataRole.ToolTipRole)
        try:
            models, adapters = (list_models(self.controller.data_dir),
                                list_adapters(self.controller.data_dir))
        except (UserError, OSError):  # an unreadable data dir: the fields still work
            return
        for m in models:
            bare = ", bare" if m.name == BASE_NAME else ""
            self.local.addItem(f"{m.name} ({m.kind}{bare})", {"model": m.name, "adapter": ""})
            tip = [] if m.path else ["built on first use"]
            if bare:
                tip.append("the bare base makes no tool calls")
            if tip:
                self.local.setItemData(self.local.count() - 1, "; ".join(tip),
                                       Qt.ItemDataRole.ToolTipRole)
            for a in adapters:
                if a.base_name == m.name:
                    mark = ", shipped" if a.shipped else ""  # under its base: named once
                    self.local.addItem(f"    {a.name} (adapter{mark})",
                                       {"model": m.name, "adapter": a.path})
                    self.local.setItemData(self.local.count() - 1, f"adapter on {m.name}\n"
                                           f"{variants_line(a.name, self.controller.data_dir)}",
                                           Qt.ItemDataRole.ToolTipRole)
        for a in adapters:  # trained on an unregistered folder (a run's own base-model)
            if a.base_name is None and a.base:
                self.local.addItem(f"{a.name}: adapter on {a.base}",
                                   {"model": a.base, "adapter": a.path})
        self.local.view().setMinimumWidth(self.local.view().sizeHintForColumn(0) + 24)

    def _use_local(self, index: int) -> None:
        choice = self.local.itemData(index)
        if choice:
            self.policy.setCurrentText("hf")
            self.model.setText(choice["model"])
            self.adapter.setText(choice["adapter"])

    def stop(self) -> None:
        if self.runner is not None:
            self.runner.stop()
            self.status.setText("Stopping...")
            if self._pending is not None:
                self.answer(False)

    def attach(self, png: bytes) -> None:
        self.attachment = png
        self.attach_label.setText(f"viewport attached ({len(png) // 1024} KB) — goes with the next Run")

    def answer(self, approved: bool) -> None:
        if self._pending is not None:
            self._pending.answer(approved)
            self._add("✔ approved" if approved else "✘ rejected", "#6fbf73" if approved else "#e07a5f")
        self._pending = None
        self.banner.hide()

    @property
    def running(self) -> bool:
        return self.runner is not None and self.runner.isRunning()

    # -- events ----------------------------------------------------------------------------
    def _on_approval(self, request) -> None:
        self._pending = request
        args = json.dumps(request.args)[:300]
        self.banner_text.setText(f"The agent wants to run the risky tool <b>{html.escape(printable(request.tool))}</b> "
                                 f"{html.escape(printable(args))}")
        self.banner.show()

    def _on_event(self, kind: str, data: dict) -> None:
        self.sig_event.emit(kind, data)
        if kind == "step_started":
            self.steps_seen = data["step"] + 1
            self.status.setText(f"Step {data['step'] + 1}...")
        elif kind == "message":
            if data.get("error"):
                self._add(f"policy error: {data['error']}", "#e07a5f")
            elif data.get("text"):  # shortened like calls and results: the record keeps it all
                text = data["text"].strip()
                self._add(f"model: {text[:REPLY_CHARS]}" + ("…" if len(text) > REPLY_CHARS else ""), None)
        elif kind == "call":
            self._add(f"call {data['tool']} {json.dumps(data['args'])[:160]}", "#8ab4f8")
        elif kind == "result":
            if data["ok"]:
                self._add(f"   ok {data['text'][:110]}", "#6fbf73")
            else:
                self._add(f"   {data['text'][:300]}", "#e07a5f")
        elif kind == "render":
            image = png_image(data["png"])
            item = QListWidgetItem(QIcon(QPixmap.fromImage(image)), "render" if data["step"] >= 0 else "start")
            self.steps.addItem(item)
            self.steps.scrollToBottom()
            self.controller.sig_scene_changed.emit()

    def _add(self, text: str, color: str | None) -> None:
        item = QListWidgetItem(printable(text))
        if color:
            item.setForeground(QColor(color))
        item.setTextAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        self.steps.addItem(item)
        self.steps.scrollToBottom()

    def _on_finished(self, summary: dict) -> None:
        self.last_summary = summary
        self.run_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        self.banner.hide()
        reward = summary.get("reward")
        # steps as recorded: one per tool call (the loop's turns also count its last reply)
        words = f"{summary.get('status')}: {summary.get('calls', summary.get('steps', 0))} steps"
        if reward is not None:
            words += f", reward {reward:.3f}" + (" ✔" if summary.get("success") else "")
        demo = self.controller.demo
        if demo.active and summary.get("episode_id") == demo.episode_id \
                and demo.n_steps != summary.get("calls"):  # the person's steps too
            words += f" (episode: {demo.n_steps} steps)"
        if summary.get("error"):
            words += f" — {summary['error']}"
        calls, failed = summary.get("calls") or 0, summary.get("tool_errors") or 0
        if summary.get("status") in ("done", "budget", "stuck", "success") \
                and (not calls or failed >= calls):  # it did nothing: say so, and what to try
            hint = no_call_hint(str(summary.get("policy") or self.policy.currentText()),
                                failed if calls else 0, summary.get("adapter"))
            words = (f"{summary.get('status')}: no tool call made" if not calls else
                     f"{summary.get('status')}: every tool call failed")
            self._add(hint, "#e0b050")
            self.status.setText(printable(f"{words}; the scene is unchanged (what to try: above)"
                                          if summary.get("policy") != "none" else words))
        else:
            self.status.setText(printable(words))
        self._add(f"end: {words}", None)
        self.refresh_runs()
        self.runs.setCurrentIndex(self.runs.count() - 1)
        self.controller.agent_finished(summary)
        self.sig_finished.emit(summary)
