"""Palette forms (offscreen): the script field is a multi-line Python editor with line numbers,
colour fields have a picker, hints are visible, and switching tools keeps typed values."""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # these tests never need a display

import pytest  # noqa: E402
from PySide6.QtGui import QColor  # noqa: E402
from PySide6.QtWidgets import QLabel  # noqa: E402

from studio.palette.editors import CodeEditor, ColorField  # noqa: E402
from studio.palette.forms import ToolForm  # noqa: E402
from tools import TOOLS  # noqa: E402


def test_script_field_is_a_code_editor_with_highlighting(qtbot):
    form = ToolForm("cadquery_script", TOOLS["cadquery_script"].schema())
    qtbot.addWidget(form)
    editor = form.fields["code"]
    assert isinstance(editor, CodeEditor)
    code = "import cadquery as cq\n# a plate\nresult = cq.Workplane().box(1, 2, 0.5)\n"
    form.set_value("code", code)
    form.set_value("name", "Plate")
    assert form.values() == {"code": code.strip(), "name": "Plate"}
    assert editor.blockCount() == 4 and editor.gutter_width() > 0
    layouts = [b.layout().formats() for b in _blocks(editor)]
    assert any(f.format.foreground().color() == QColor("#c678dd") for f in layouts[0])  # `import` keyword
    assert any(f.format.fontItalic() for f in layouts[1])  # the comment


def _blocks(editor):
    block = editor.document().firstBlock()
    while block.isValid():
        yield block
        block = block.next()


def test_colour_field_has_a_picker_and_validates(qtbot):
    form = ToolForm("set_material", TOOLS["set_material"].schema())
    qtbot.addWidget(form)
    field = form.fields["color"]
    assert isinstance(field, ColorField)
    field.pick()
    field.dialog.setCurrentColor(QColor("#12ab34"))
    field.dialog.accept()
    assert field.text() == "#12AB34"
    assert "background: #12AB34" in field.swatch.styleSheet()
    form.set_value("name", "Box")
    assert form.values()["color"] == "#12AB34"


def test_hints_are_visible_labels(qtbot):
    form = ToolForm("set_material", TOOLS["set_material"].schema())
    qtbot.addWidget(form)
    hints = [w.text() for w in form.findChildren(QLabel) if w.objectName() == "hint"]
    assert "#RRGGBB" in hints


@pytest.mark.parametrize("first,second", [("set_material", "transform")])
def test_switching_tools_keeps_values(qtbot, first, second):
    from studio.models.scene import SceneModel
    from studio.palette.dock import PaletteDock

    class Controller:  # the dock reads only the scene model (a real one) until Send
        scene = SceneModel()

    dock = PaletteDock(Controller())
    qtbot.addWidget(dock)
    dock.select(first, name="Box", color="#102030")
    dock.select(second)
    dock.select(first)
    assert dock.form.fields["name"].text() == "Box" and dock.form.fields["color"].text() == "#102030"
