"""Tool palette: pick a tool, fill its generated form, Send. Invalid values never leave the studio.

Tools are listed by plain names ("Add primitive"); the tool's own name is the tooltip and the
search box finds either."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from studio.foreign import plain_label
from studio.palette.forms import FormError, ToolForm
from tools import TOOLS, ToolError, validate_call
from tools.text import printable

WORDS = {"cad": "CAD", "cadquery": "CadQuery", "bpy": "bpy", "3mf": "3MF"}
UNIT_WORDS = {"m": "metres (m)", "mm": "millimetres (mm)"}


def plain_name(tool: str) -> str:
    """`add_primitive` -> "Add primitive", `cad_box` -> "CAD box"."""
    words = [WORDS.get(w, w) for w in tool.split("_")]
    return " ".join(words)[:1].upper() + " ".join(words)[1:]


class PaletteDock(QWidget):
    def __init__(self, controller, parent=None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.tool = QComboBox()
        for n in TOOLS:
            if n != "get_scene":
                self.tool.addItem(plain_name(n), n)
                self.tool.setItemData(self.tool.count() - 1, n, Qt.ItemDataRole.ToolTipRole)
        self.tool.currentIndexChanged.connect(lambda _i: self.show_tool(self.tool.currentData()))
        self.search = QLineEdit()
        self.search.setPlaceholderText("Find a tool (plain or tool name)")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.find_tool)
        self.description = QLabel()
        self.description.setWordWrap(True)
        self.description.setObjectName("hint")
        self.units_note = QLabel()  # the unit this tool's lengths are typed in, said once more
        self.units_note.setWordWrap(True)
        self.units_note.setObjectName("hint")
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("accent")
        self.send_button.clicked.connect(self.send)
        # never keeps focus: a Space typed afterwards re-sent a failing call (issue #33)
        self.send_button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.send_button.setAutoDefault(False)
        self.error = plain_label()
        self.error.setObjectName("error")
        self.error.setWordWrap(True)
        # a fixed slot: "Not sent" appearing never moves the form or the Send button
        self.error.setFixedHeight(self.error.fontMetrics().lineSpacing() * 2 + 6)
        layout = QVBoxLayout(self)
        layout.addWidget(self.search)
        layout.addWidget(self.tool)
        layout.addWidget(self.description)
        layout.addWidget(self.units_note)
        layout.addWidget(self.scroll, 1)
        layout.addWidget(self.error)
        layout.addWidget(self.send_button)
        self.form: ToolForm | None = None
        self.forms: dict[str, ToolForm] = {}  # one per tool: switching tools keeps what was typed
        self.sent = 0
        self.show_tool(self.tool.currentData())
        controller.scene.selection_changed.connect(self._selected)
        if hasattr(controller, "sig_call"):  # the next call that works clears "Not sent"
            controller.sig_call.connect(lambda result, _o: result.ok and self._clear_error())

    def _clear_error(self) -> None:
        self.error.setText("")
        self.error.setToolTip("")

    def find_tool(self, text: str) -> None:
        """Show the first tool whose plain name or tool name holds `text`."""
        needle = text.strip().lower().replace(" ", "_")
        if not needle:
            return
        for i in range(self.tool.count()):
            if needle in self.tool.itemData(i) or needle in self.tool.itemText(i).lower().replace(" ", "_"):
                self.tool.setCurrentIndex(i)
                return

    def _selected(self, name: str | None) -> None:
        """The outliner's selection fills the `name` of tools that act on an object."""
        if name and self.form is not None and "name" in self.form.fields and not self.form.tool.startswith(
                ("add_", "cad_box", "cad_cylinder", "cad_sketch", "cad_revolve", "cadquery")):
            self.form.set_value("name", name)

    def show_tool(self, name: str) -> None:
        spec = TOOLS[name]
        self.description.setText(spec.description + ("  ⚠ risky" if spec.risky else ""))
        self.scroll.takeWidget()  # keep the previous form alive (setWidget would delete it)
        if name not in self.forms:
            self.forms[name] = ToolForm(name, spec.schema())
        self.form = self.forms[name]
        units = sorted(self.form.units())
        self.units_note.setText(
            f"Lengths in {' and '.join(UNIT_WORDS.get(u, u) for u in units)}, as labelled: "
            "View → Units changes only what is shown." if units else "")
        self.units_note.setVisible(bool(units))
        self.scroll.setWidget(self.form)
        # wide enough for the form's labels and choices: nothing is cut or scrolled sideways
        bar = self.scroll.verticalScrollBar().sizeHint().width()
        self.scroll.setMinimumWidth(self.form.minimumSizeHint().width() + bar + 2 * self.scroll.frameWidth())
        self._clear_error()

    def select(self, tool: str, /, **values) -> ToolForm:
        self.tool.setCurrentIndex(self.tool.findData(tool))
        for key, value in values.items():
            self.form.set_value(key, value)
        return self.form

    def send(self) -> bool:
        """Validate the form and send the call; False (and an error shown) when it is refused."""
        assert self.form is not None
        try:
            args = self.form.values()
            validate_call(self.form.tool, args)
        except (FormError, ToolError) as exc:
            self.error.setText(printable(f"Not sent — {getattr(exc, 'message', str(exc))}"))
            self.error.setToolTip(self.error.text())
            return False
        self._clear_error()
        self.controller.manual_call(self.form.tool, args)
        self.sent += 1
        return True
