"""A form generated from a tool's JSON schema (`TOOLS[name].schema()`).

Enums become combo boxes, booleans check boxes, everything else a line edit holding a
number, a comma-separated list or JSON. Reading the form parses the text; the caller then
validates with `tools.validate_call`, so a bad value is refused before anything is sent.
Lengths are typed in the unit the tool takes, which each label names ("dimensions (m)",
"length (mm)"), and sent as typed: View → Units changes what the studio shows, never what a
typed number means, so the call recorded is the call the person wrote.
"""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtWidgets import QCheckBox, QComboBox, QFormLayout, QLabel, QLineEdit, QWidget

from tools.specs import field_unit

UNSET = "(default)"


class FormError(ValueError):
    """A field's text is not a value of its type; the message names the field."""


class ToolForm(QWidget):
    def __init__(self, tool: str, schema: dict, parent=None) -> None:
        super().__init__(parent)
        self.tool, self.schema = tool, schema
        self.required = set(schema.get("required", []))
        self.fields: dict[str, QWidget] = {}
        self.lengths: dict[str, tuple[str, QLabel]] = {}  # length field -> (the tool's unit, label)
        layout = QFormLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for name, prop in schema.get("properties", {}).items():
            widget = self._widget(name, prop)
            self.fields[name] = widget
            unit = field_unit(tool, name)
            label = QLabel(name + (f" ({unit})" if unit else "") + (" *" if name in self.required else ""))
            label.setToolTip(prop.get("description", ""))
            if unit in ("m", "mm") and name != "camera":  # (a camera mixes lengths and a lens)
                self.lengths[name] = (unit, label)
            layout.addRow(label, widget)
            if prop.get("description"):  # hints in sight, not only in a tooltip
                hint = QLabel(prop["description"])
                hint.setObjectName("hint")
                hint.setWordWrap(True)
                layout.addRow("", hint)

    def units(self) -> set[str]:
        """The length units this tool's values are typed in."""
        return {unit for unit, _ in self.lengths.values()}

    def _widget(self, name: str, prop: dict) -> QWidget:
        default = prop.get("default")
        if "enum" in prop:
            box = QComboBox()
            # as wide as its longest choice: "uv_sphere" is never cut to "uv_…ere"
            box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
            if name not in self.required:
                box.addItem(UNSET)
            box.addItems([str(v) for v in prop["enum"]])
            if default is not None:
                box.setCurrentText(str(default))
            return box
        if prop.get("type") == "boolean":
            check = QCheckBox()
            check.setChecked(bool(default))
            return check
        edit = _text_editor(name, prop)
        if default is not None:
            edit.setText(_show(default))
        hint = prop.get("type", "json")
        if hint == "array":
            n = prop.get("minItems")
            hint = f"{n} values, comma-separated" if n and n == prop.get("maxItems") else "list: a, b, c"
        elif hint == "object":
            hint = "JSON object"
        edit.setPlaceholderText(hint if name in self.required else f"{hint} (optional)")
        return edit

    def set_value(self, name: str, value: Any) -> None:
        widget = self.fields[name]
        if isinstance(widget, QComboBox):
            widget.setCurrentText(str(value))
        elif isinstance(widget, QCheckBox):
            widget.setChecked(bool(value))
        else:
            widget.setText(_show(value))

    def values(self) -> dict[str, Any]:
        """The arguments the form holds; raises FormError for text that is not a value."""
        args: dict[str, Any] = {}
        for name, widget in self.fields.items():
            prop = self.schema["properties"][name]
            if isinstance(widget, QComboBox):
                if widget.currentText() != UNSET:
                    args[name] = _typed_enum(widget.currentText(), prop["enum"])
            elif isinstance(widget, QCheckBox):
                args[name] = widget.isChecked()
            else:
                text = widget.text().strip()  # QLineEdit, CodeEditor or ColorField
                if text:
                    args[name] = parse(text, prop, name)
        return args


def _text_editor(name: str, prop: dict) -> QWidget:
    """A code editor for scripts, a colour field with a picker for #RRGGBB, else a line edit."""
    from studio.palette.editors import COLOR_PATTERN, CodeEditor, ColorField

    if prop.get("type") == "string" and (name == "code" or prop.get("maxLength", 0) > 2000):
        return CodeEditor()
    if prop.get("pattern") == COLOR_PATTERN.pattern:  # the specs' #RRGGBB fields
        return ColorField()
    return QLineEdit()


def parse(text: str, prop: dict, name: str) -> Any:
    kind = prop.get("type")
    try:
        if kind == "number":
            return float(text)
        if kind == "integer":
            return int(text)
        if kind == "string":
            return text
        if kind == "array" and not text.startswith("["):
            items = [t.strip() for t in text.split(",") if t.strip()]
            item_type = prop.get("items", {}).get("type")
            if item_type == "number":
                return [float(t) for t in items]
            if item_type == "integer":
                return [int(t) for t in items]
            return items
        return json.loads(text)
    except (ValueError, json.JSONDecodeError):
        raise FormError(f"{name}: {text!r} is not a valid {kind or 'JSON value'}") from None


def _typed_enum(text: str, options: list) -> Any:
    return next((o for o in options if str(o) == text), text)


def _show(value: Any) -> str:
    if isinstance(value, list) and all(isinstance(v, int | float) for v in value):
        return ", ".join(f"{v:.10g}" for v in value)
    if isinstance(value, float):
        return f"{value:.10g}"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)
