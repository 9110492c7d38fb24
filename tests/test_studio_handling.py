"""Handling in the studio window (offscreen Qt, the real tool runtime; issue #33): new and
duplicated objects become the selection, F zooms to fit the selection and a restore reframes,
errors clear on the next success without moving the layout, the palette lists plain names
(the tool name stays the tooltip and is searchable), and every outliner row uses one unit
while the palette keeps each tool's own."""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # these tests never need a display

import pytest  # noqa: E402
from studio_support import WAIT_MS, fresh_scene, send, send_ok, studio_window  # noqa: E402


@pytest.fixture(scope="module")
def studio(qapp, worker_pool, tmp_path_factory, request):
    with studio_window(worker_pool, tmp_path_factory.mktemp("handling"), request) as window:
        yield window


@pytest.fixture
def fresh(studio, qtbot):
    return fresh_scene(studio, qtbot)


def test_new_and_duplicated_objects_become_the_selection_and_f_frames_them(fresh, qtbot):
    w, c = fresh, fresh.controller
    send_ok(
        qtbot, w, "add_primitive", kind="cube", name="Big", dimensions="4, 4, 4", location="0, 0, 2"
    )
    qtbot.waitUntil(lambda: c.scene.selection == ["Big"], timeout=WAIT_MS)
    send_ok(
        qtbot,
        w,
        "add_primitive",
        kind="cube",
        name="Small",
        dimensions="0.1, 0.1, 0.1",
        location="5, 0, 0.05",
    )
    qtbot.waitUntil(lambda: c.scene.selection == ["Small"], timeout=WAIT_MS)
    assert w.outliner.tree.currentItem().text(0) == "Small"
    w.viewport_panel.do("duplicate")
    qtbot.waitUntil(lambda: c.scene.selection == ["Small.001"], timeout=WAIT_MS)

    cam, panel = w.viewport_panel.viewport.camera, w.viewport_panel
    panel.do("frame_all")
    whole = cam.distance
    c.scene.select("Small")
    panel.do("view:top")
    panel.do("frame_selected")
    assert cam.target == pytest.approx([5, 0, 0.05], abs=1e-6)
    assert cam.distance < whole / 10  # zoomed to fit the small cube, not the old zoom
    assert panel.mode.currentText() == "top" and panel.viewport.mode == "top"  # the view stays

    # a restore (or load, replay) frames the scene it brings
    cam.target, cam.distance = [40.0, 40.0, 40.0], 300.0
    c.worker.sig_reset.emit("restore")
    c.refresh()
    qtbot.waitUntil(lambda: cam.distance < 300.0, timeout=WAIT_MS)
    lo, hi = c.scene.bounds()
    assert cam.target == pytest.approx([(a + b) / 2 for a, b in zip(lo, hi, strict=True)])


def test_errors_clear_on_the_next_success_and_never_move_the_layout(fresh, qtbot):
    w = fresh
    view_y = w.viewport_panel.mapTo(w, w.viewport_panel.rect().topLeft()).y()
    send_y = w.palette.send_button.mapTo(w, w.palette.send_button.rect().topLeft()).y()
    result = send(qtbot, w, "transform", name="Nobody", location="1, 0, 0")
    assert not result.ok
    qtbot.waitUntil(lambda: w.errors.isVisible(), timeout=WAIT_MS)
    w.palette.select("add_primitive", kind="cube", name="A", dimensions="1, x, 1")
    assert not w.palette.send() and w.palette.error.text().startswith("Not sent")
    qtbot.wait(20)  # let the layout run
    assert w.viewport_panel.mapTo(w, w.viewport_panel.rect().topLeft()).y() == view_y
    assert w.palette.send_button.mapTo(w, w.palette.send_button.rect().topLeft()).y() == send_y
    send_ok(qtbot, w, "add_primitive", kind="cube", name="A", dimensions="1, 1, 1")
    qtbot.waitUntil(lambda: not w.errors.isVisible(), timeout=WAIT_MS)
    assert w.palette.error.text() == ""
    assert "Nobody" in w.errors.errors[-1]  # cleared from view, still kept


def test_palette_shows_plain_names_with_the_tool_name_as_tooltip_and_finds_either(studio):
    from PySide6.QtCore import Qt

    p = studio.palette
    labels = {p.tool.itemData(i): p.tool.itemText(i) for i in range(p.tool.count())}
    assert labels["add_primitive"] == "Add primitive" and labels["cad_box"] == "CAD box"
    assert all("_" not in text for text in labels.values())
    i = p.tool.findData("set_material")
    assert p.tool.itemData(i, Qt.ItemDataRole.ToolTipRole) == "set_material"
    p.search.setText("boolean")
    assert p.tool.currentData() == "boolean" and p.form.tool == "boolean"
    p.search.setText("Set mat")
    assert p.tool.currentData() == "set_material"
    p.search.clear()


def test_every_outliner_row_uses_the_projects_one_unit(fresh, qtbot):
    from studio.outliner.units_menu import set_units

    w, c = fresh, fresh.controller
    send_ok(
        qtbot,
        w,
        "add_primitive",
        kind="cube",
        name="Cube",
        dimensions="1, 1, 1",
        location="0, 0.09, 0.5",
    )
    send_ok(qtbot, w, "cad_box", name="Plate", length="100", width="70", height="6")

    def rows():
        t = w.outliner.tree
        return {
            t.topLevelItem(i).text(0): (t.topLevelItem(i).text(2), t.topLevelItem(i).text(3))
            for i in range(t.topLevelItemCount())
        }

    qtbot.waitUntil(lambda: set(rows()) == {"Cube", "Plate"}, timeout=WAIT_MS)
    try:
        assert rows()["Plate"][0] == "100 × 70 × 6 mm"  # auto: a part authored in mm, so mm
        assert rows()["Cube"] == ("1000 × 1000 × 1000 mm", "(0, 90, 500) mm")
        assert all(text.endswith(" mm") for row in rows().values() for text in row)
        # the palette is not display: its lengths stay in the tool's own unit, as labelled
        # (issue #50), and are sent as typed
        form = w.palette.select("transform", name="Cube", location="0, 0.09, 0.6")
        assert form.lengths["location"][1].text().startswith("location (m)")
        assert "metres (m)" in w.palette.units_note.text()
        result = send_ok(qtbot, w, "transform", name="Cube", location="0, 0.09, 0.6")
        assert result.args["location"] == pytest.approx([0.0, 0.09, 0.6])
        qtbot.waitUntil(lambda: rows()["Cube"][1] == "(0, 90, 600) mm", timeout=WAIT_MS)
        set_units(c.scene, w.settings, "m")
        assert form.fields["location"].text() == "0, 0.09, 0.6"  # as typed, whatever is shown
        assert form.lengths["location"][1].text().startswith("location (m)")
        assert (
            rows()["Cube"] == ("1 × 1 × 1 m", "(0, 0.09, 0.6) m")
            and rows()["Plate"][0] == "0.1 × 0.07 × 0.006 m"
        )
        assert w.settings.value("units") == "m"
    finally:
        set_units(c.scene, w.settings, "auto")


def test_typed_values_make_one_transform_per_object_in_the_projects_unit():
    from studio.viewport.typed import TypedTransform

    objects = [
        {"name": "A", "location": [0.0, 0.0, 0.5], "scale": [1.0, 2.0, 1.0]},
        {"name": "B", "location": [1.0, 0.0, 0.0]},
    ]
    move = TypedTransform("move")
    for ch in "25":
        move.key(ch)
    with pytest.raises(ValueError, match="X, Y or Z"):
        move.calls(objects, "mm")
    for ch in "z-.5\b":  # Z, a sign, then "25." after the backspace
        move.key(ch)
    assert move.readout("mm").startswith("Move Z -25. mm")
    assert move.calls(objects, "mm") == [
        ("transform", {"name": "A", "location": [0.0, 0.0, 0.475]}),
        ("transform", {"name": "B", "location": [1.0, 0.0, -0.025]}),
    ]
    scale = TypedTransform("scale")
    scale.key("2")
    assert [a["scale"] for _, a in scale.calls(objects, "m")] == [[2.0, 4.0, 2.0], [2.0, 2.0, 2.0]]
    turn = TypedTransform("rotate")
    for ch in "90":
        turn.key(ch)
    assert turn.calls(objects[:1], "m")[0][1]["rotation_deg"] == pytest.approx([0.0, 0.0, 90.0])


def test_a_numpad_view_is_orthographic_and_frames_like_the_perspective_one():
    import numpy as np

    from studio.models.orbit import OrbitCamera
    from studio.viewport.camera import VIEWS, ViewMath

    cam = OrbitCamera(*VIEWS["top"], distance=0.5, target=[0.01, 0.02, 0.0])
    persp, ortho = ViewMath(cam, 800, 600), ViewMath(cam, 800, 600, ortho=True)
    assert persp.pixels_per_unit(cam.target) == pytest.approx(ortho.pixels_per_unit(cam.target))
    assert ortho.to_screen(cam.target) == pytest.approx([400, 300])
    edge = np.array(cam.target) + [0.0, 0.05, 0.0]
    assert ortho.to_screen(edge) == pytest.approx(
        persp.to_screen(edge), abs=1.0
    )  # same at the target
    towards = np.array(cam.location()) - cam.target
    raised = (
        edge + towards / np.linalg.norm(towards) * 0.2
    )  # nearer the camera: larger in perspective only
    assert ortho.to_screen(raised) == pytest.approx(ortho.to_screen(edge))
    assert not np.allclose(persp.to_screen(raised), persp.to_screen(edge), atol=1.0)
