"""The live GPU viewport in the real window under Xvfb (Mesa llvmpipe): click-to-select picks
the object under the cursor (the outliner, the palette and the History follow), a gizmo drag
sends ONE `transform` with the dragged distance (a ring: the angle; a box: the scale factor) and
adds one undo step, Esc cancels a drag, and every listed shortcut does what the list says."""

from __future__ import annotations

from studio_support import run_on_display, xvfb_display  # noqa: F401  (the fixture)

CHILD = r"""
import json, math, sys, time
import numpy as np
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from studio.app import StudioOptions, build
from studio.viewport.camera import VIEWS
from studio.viewport.panel import SHORTCUTS

app = QApplication(sys.argv[:1])
options = StudioOptions(data_dir=sys.argv[1], settings_file=sys.argv[1] + "/settings.ini",
                        size=(1500, 1000), exit_when_done=True)
window, c = build(options)
window.show()
panel, live = window.viewport_panel, window.viewport_panel.live
out = {"live": live is not None}
_hook = sys.excepthook
sys.excepthook = lambda *e: (print("PARTIAL " + json.dumps(out, default=str), file=sys.stderr), _hook(*e))

def wait(pred, timeout=90):
    end = time.monotonic() + timeout  # waiting on the worker, not timing the code under test
    while not pred():
        assert time.monotonic() < end, "timed out"
        app.processEvents()
        time.sleep(0.005)

def settle():
    wait(lambda: not live._syncing and live._pending is None and not c.worker._jobs)
    for _ in range(5):
        app.processEvents()

def at(point):
    p = live.view_math().to_screen(point) / live.devicePixelRatio()
    return QPoint(int(round(p[0])), int(round(p[1])))

def key(seq):
    from PySide6.QtGui import QKeySequence
    combo = QKeySequence(seq)[0]
    QTest.keyClick(live, combo.key(), combo.keyboardModifiers())
    app.processEvents()

calls = []
c.sig_call.connect(lambda r, origin: calls.append((r.tool, dict(r.args), origin, r.ok)))
wait(lambda: c.ready)
wait(lambda: live.renderer is not None or live.failed is not None)
c.manual_call("add_primitive", {"kind": "cube", "name": "Box", "dimensions": [1, 1, 1], "location": [2, 0, 0.5]})
c.manual_call("add_primitive", {"kind": "cylinder", "name": "Cyl", "dimensions": [1, 1, 2], "location": [-1, 0, 1]})
wait(lambda: len(live.renderer.meshes) == 2)
settle()
live.frame_all()
window.palette.select("set_material")

# click-to-select: the box, then empty space, then the cylinder
QTest.mouseClick(live, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at([2, 0, 0.5]))
out["click_box"] = c.scene.selected
items = window.outliner.tree.selectedItems()
out["outliner"] = items[0].data(0, Qt.ItemDataRole.UserRole) if items else None
out["palette_name"] = window.palette.form.fields["name"].text()
history = lambda: sorted(c.undo_stack.text(i - 1) for i in window.history.marked)
out["history_box"] = history()
QTest.mouseClick(live, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, QPoint(3, 3))
out["click_empty"] = c.scene.selected
QTest.mouseClick(live, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at([-1, 0, 1.2]))
out["click_cyl"] = c.scene.selected
out["history_cyl"] = history()
QTest.mouseMove(live, at([1.0, 0, 0.0]))
QTest.mouseMove(live, at([2, 0, 0.5]))
end_hover = time.monotonic() + 20
while live.hovered != "Box" and time.monotonic() < end_hover:
    app.processEvents()
out["hover"] = live.hovered
out["hover_pick"] = live.pick(at([2, 0, 0.5]).toPointF())

# gizmo drag along X on the box: one transform, one undo step, recorded as a human step
QTest.mouseClick(live, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at([2, 0, 0.5]))
settle()
vm = live.view_math()
origin, length, _, _ = live.gizmo(vm)
grab = origin + np.array([length * 0.4, 0, 0])  # clear of the rings (radius 0.62)
a, b = vm.to_screen(origin), vm.to_screen(origin + [1.0, 0, 0])
axis_px = (b - a) / np.linalg.norm(b - a)
start = at(grab)
end = QPoint(int(round(start.x() + 80 * axis_px[0])), int(round(start.y() + 80 * axis_px[1])))
moved = end - start
expected = (moved.x() * (b - a)[0] + moved.y() * (b - a)[1]) / float((b - a) @ (b - a))
undo_before = c.undo_stack.count()
n_calls = len(calls)
QTest.mousePress(live, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, start)
out["grabbed_axis"] = live.drag_axis
for i in range(1, 9):
    p = start + (end - start) * (i / 8)
    QTest.mouseMove(live, p)
QTest.mouseRelease(live, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, end)
wait(lambda: len(calls) > n_calls)
settle()
out["drag_calls"] = calls[n_calls:]
out["expected_x"] = 2 + expected
out["undo_steps_added"] = c.undo_stack.count() - undo_before
out["undo_text"] = c.undo_stack.text(c.undo_stack.count() - 1)
out["box_x_after_drag"] = c.scene.get("Box")["location"][0]
c.undo_stack.undo()
wait(lambda: abs(c.scene.get("Box")["location"][0] - 2.0) < 1e-6)
settle()
out["box_x_after_undo"] = c.scene.get("Box")["location"][0]

# Esc during a drag cancels it: nothing is sent
n_calls = len(calls)
QTest.mousePress(live, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at(grab))
QTest.mouseMove(live, end)
key("Esc")
QTest.mouseRelease(live, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, end)
settle()
out["esc_drag_calls"] = len(calls) - n_calls
out["esc_keeps_selection"] = c.scene.selected

# rotate ring about Z, Ctrl held: one transform with a rotation snapped to 15°, one undo step
from studio.viewport.gizmo import RING_RADIUS
vm = live.view_math()
origin, length, _, _ = live.gizmo(vm)
def ring(deg):
    u = math.radians(deg)
    return at(origin + RING_RADIUS * length * np.array([-math.sin(u), math.cos(u), 0.0]))
n_calls, undo_before = len(calls), c.undo_stack.index()  # (the undone move is dropped on push)
ctrl = Qt.KeyboardModifier.ControlModifier
QTest.mousePress(live, Qt.MouseButton.LeftButton, ctrl, ring(30))
out["ring_grabbed"] = live.drag_axis
for deg in range(35, 95, 5):
    QTest.mouseMove(live, ring(deg))
QTest.mouseRelease(live, Qt.MouseButton.LeftButton, ctrl, ring(90))
wait(lambda: len(calls) > n_calls)
settle()
out["rotate_calls"] = calls[n_calls:]
out["rotate_undo_steps"] = c.undo_stack.index() - undo_before
out["box_rotation"] = c.scene.get("Box")["rotation_deg"]
c.undo_stack.undo()
wait(lambda: abs(c.scene.get("Box")["rotation_deg"][2]) < 1e-6)
settle()

# scale box on the box's own X, Ctrl held: one transform with the factor snapped to tenths
from studio.viewport.gizmo import SCALE_AT
vm = live.view_math()
origin, length, _, _ = live.gizmo(vm)
a, b = vm.to_screen(origin), vm.to_screen(origin + [1.0, 0, 0])
unit = (b - a) / np.linalg.norm(b - a)
start = at(origin + [SCALE_AT * length, 0, 0])
end = QPoint(int(round(start.x() + 70 * unit[0])), int(round(start.y() + 70 * unit[1])))
along = ((end - start).x() * (b - a)[0] + (end - start).y() * (b - a)[1]) / float((b - a) @ (b - a))
out["expected_scale"] = round(((SCALE_AT * length + along) / (SCALE_AT * length)) / 0.1) * 0.1
n_calls, undo_before = len(calls), c.undo_stack.index()
QTest.mousePress(live, Qt.MouseButton.LeftButton, ctrl, start)
out["scale_grabbed"] = live.drag_axis
for i in range(1, 9):
    QTest.mouseMove(live, start + (end - start) * (i / 8))
QTest.mouseRelease(live, Qt.MouseButton.LeftButton, ctrl, end)
wait(lambda: len(calls) > n_calls)
settle()
out["scale_calls"] = calls[n_calls:]
out["scale_undo_steps"] = c.undo_stack.index() - undo_before
out["box_scale"] = c.scene.get("Box")["scale"]
out["history_after_scale"] = history()[-1:] if c.scene.selected == "Box" else None
c.undo_stack.undo()
wait(lambda: abs(c.scene.get("Box")["scale"][0] - 1.0) < 1e-6)
settle()

# multi-select: shift-click adds the cylinder; the gizmo moves both as ONE undo step
done = {}
c.scene.select("Box")
settle()
QTest.mouseClick(live, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ShiftModifier, at([-1, 0, 1.2]))
out["multi"] = list(c.scene.selection)
out["outliner_multi"] = sorted(i.data(0, Qt.ItemDataRole.UserRole) for i in window.outliner.tree.selectedItems())
settle()
vm = live.view_math()
origin, length, _, _ = live.gizmo(vm)
a, b = vm.to_screen(origin), vm.to_screen(origin + [1.0, 0, 0])
axis_px = (b - a) / np.linalg.norm(b - a)
start = at(origin + np.array([length * 0.4, 0, 0]))
end = QPoint(int(round(start.x() + 60 * axis_px[0])), int(round(start.y() + 60 * axis_px[1])))
n_calls, undo_before = len(calls), c.undo_stack.index()
QTest.mousePress(live, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, start)
for i in range(1, 7):
    QTest.mouseMove(live, start + (end - start) * (i / 6))
out["readout"] = panel.readout.text()
QTest.mouseRelease(live, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, end)
wait(lambda: len(calls) >= n_calls + 2)
wait(lambda: c.undo_stack.canUndo() and c.undo_stack.index() > undo_before)
settle()
out["multi_calls"] = calls[n_calls:]
out["multi_undo_steps"] = c.undo_stack.index() - undo_before
newest = c.undo_stack.text(c.undo_stack.index() - 1)
out["multi_history"] = [newest, newest in history()]  # one entry, marked for the selection
out["multi_x"] = [c.scene.get("Box")["location"][0], c.scene.get("Cyl")["location"][0]]
c.undo_stack.undo()
wait(lambda: abs(c.scene.get("Box")["location"][0] - 2) < 1e-6 and abs(c.scene.get("Cyl")["location"][0] + 1) < 1e-6)
settle()
out["multi_after_undo"] = [c.scene.get("Box")["location"][0], c.scene.get("Cyl")["location"][0]]

# G, Z, 0.5, Enter on both: one undo step, both 0.5 m up; Esc cancels a typed R
n_calls, undo_before = len(calls), c.undo_stack.index()
for k in ("G", "Z", "0", ".", "5"):
    key(k)
out["typed_readout"] = panel.readout.text()
key("Return")
wait(lambda: len(calls) >= n_calls + 2)
settle()
out["typed_z"] = [c.scene.get("Box")["location"][2], c.scene.get("Cyl")["location"][2]]
out["typed_undo_steps"] = c.undo_stack.index() - undo_before
done["G"] = out["typed_z"] == [1.0, 1.5]
n_calls = len(calls)
for k in ("R", "9", "0", "Esc"):
    key(k)
settle()
done["R"] = len(calls) == n_calls and live.typed is None
for k in ("S", "2", "Return"):
    key(k)
wait(lambda: len(calls) >= n_calls + 2)
settle()
done["S"] = c.scene.get("Box")["scale"] == [2.0, 2.0, 2.0] and c.scene.get("Cyl")["scale"] == [2.0, 2.0, 2.0]
c.undo_stack.undo()
wait(lambda: c.scene.get("Box")["scale"] == [1.0, 1.0, 1.0])
c.undo_stack.undo()
wait(lambda: abs(c.scene.get("Box")["location"][2] - 0.5) < 1e-6)
settle()

# B, then a drag around the box alone: the box is the selection
key("B")
p0, p1 = at([2, 0, 0.5]) - QPoint(25, 25), at([2, 0, 0.5]) + QPoint(25, 25)
QTest.mousePress(live, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, p0)
QTest.mouseMove(live, (p0 + p1) / 2)
frames = live.frames
QTest.mouseMove(live, p1)
wait(lambda: live.frames > frames)
img = live.grabFramebuffer()
r = live.devicePixelRatio()
edge = [img.pixelColor(int((p0.x() + p1.x()) / 2 * r), int(p0.y() * r) + d) for d in (-1, 0, 1)]
out["box_drawn"] = any(q.red() > 200 and 100 < q.green() < 180 and q.blue() < 80 for q in edge)
QTest.mouseRelease(live, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, p1)
done["B"] = c.scene.selection == ["Box"] and out["box_drawn"]

# every listed shortcut

for label, seq, what in SHORTCUTS:
    if what.startswith("view:"):
        key(seq)
        az, el = VIEWS[what[5:]]
        done[seq] = (abs(live.camera.azimuth_deg - az % 360) < 1e-6 or abs(live.camera.azimuth_deg - az) < 1e-6) \
            and live.camera.elevation_deg == el
c.scene.select("Box")
key("F")
done["F"] = np.allclose(live.camera.target, [2, 0, 0.5], atol=1e-6)
f_distance = live.camera.distance
# a numpad view is orthographic and F keeps it so; what is drawn is where the maths says
c.scene.select(None)  # (the gizmo would be what lies at the box's middle)
done["F"] = done["F"] and live.view_math().ortho and live.pick(at([2, 0, 0.5]).toPointF()) == "Box"
c.scene.select("Box")
key("Home")
done["F"] = done["F"] and f_distance < live.camera.distance  # zoomed to fit the box alone
lo, hi = live.renderer.bounds()
done["Home"] = np.allclose(live.camera.target, (np.array(lo) + np.array(hi)) / 2, atol=1e-6)
key("Ctrl+D")
wait(lambda: "Box.001" in c.scene.names())
done["Ctrl+D"] = True
settle()
c.scene.select("Box.001")
key("Delete")
wait(lambda: "Box.001" not in c.scene.names())
done["Delete"] = True
settle()
c.scene.select("Box")
key("Esc")
done["Esc"] = c.scene.selected is None
out["shortcuts"] = done
out["listed"] = [seq for _, seq, _ in SHORTCUTS]
key("F1")
out["help_lists_all"] = all(seq in window.shortcuts_text() for _, seq, _ in SHORTCUTS) \
    and getattr(window, "shortcuts_box", None) is not None and window.shortcuts_box.isVisible()
print(json.dumps(out, default=str), flush=True)
window.close()
app.quit()
"""


def test_live_viewport_select_gizmo_shortcuts(xvfb_display, tmp_path):  # noqa: F811
    _, out = run_on_display(CHILD, xvfb_display, str(tmp_path))
    assert out["live"] is True
    assert out["click_box"] == "Box" and out["outliner"] == "Box" and out["palette_name"] == "Box"
    assert out["click_empty"] is None
    assert out["click_cyl"] == "Cyl"
    assert out["history_box"] == ["add_primitive Box"] and out["history_cyl"] == ["add_primitive Cyl"]
    assert out["hover"] == "Box"
    assert out["grabbed_axis"] == 0
    [(tool, args, origin, ok)] = out["drag_calls"]
    assert (tool, origin, ok) == ("transform", "human", True)
    assert args["name"] == "Box" and set(args) >= {"name", "location"}
    assert abs(args["location"][0] - out["expected_x"]) < 1e-3 and args["location"][1:] == [0.0, 0.5]
    assert out["box_x_after_drag"] == args["location"][0] and out["box_x_after_drag"] > 2.1
    assert out["undo_steps_added"] == 1 and out["undo_text"].startswith("transform Box")
    assert out["box_x_after_undo"] == 2.0
    assert out["esc_drag_calls"] == 0 and out["esc_keeps_selection"] == "Box"
    assert set(out["shortcuts"]) == set(out["listed"]) and all(out["shortcuts"].values()), out["shortcuts"]
    assert out["help_lists_all"] is True
    assert out["ring_grabbed"] == 5  # handles 3-5: the rotate rings about x, y, z
    [(tool, args, origin, ok)] = out["rotate_calls"]
    assert (tool, origin, ok) == ("transform", "human", True)
    assert {k for k, v in args.items() if v is not None} == {"name", "rotation_deg"}
    x, y, z = args["rotation_deg"]
    assert abs(x) < 1e-6 and abs(y) < 1e-6 and 15 <= z <= 120 and z % 15 == 0, args
    assert out["rotate_undo_steps"] == 1 and abs(out["box_rotation"][2] - z) < 1e-3
    assert out["scale_grabbed"] == 6  # handles 6-8: the scale boxes on the object's x, y, z
    [(tool, args, origin, ok)] = out["scale_calls"]
    assert (tool, origin, ok) == ("transform", "human", True)
    assert {k for k, v in args.items() if v is not None} == {"name", "scale"}
    sx, sy, sz = args["scale"]
    assert abs(sx - out["expected_scale"]) < 1e-6 and sx > 1.05 and (sy, sz) == (1.0, 1.0), args
    assert abs(round(sx * 10) - sx * 10) < 1e-6  # Ctrl: tenths
    assert out["scale_undo_steps"] == 1 and abs(out["box_scale"][0] - sx) < 1e-6
    assert out["history_after_scale"] == ["transform Box"]
    # multi-select + gizmo: one transform per object, ONE undo step, undone together
    assert out["multi"] == ["Box", "Cyl"] and out["outliner_multi"] == ["Box", "Cyl"]
    assert out["readout"].startswith("Δx +") and out["readout"].endswith(" m"), out["readout"]
    assert [(t, a["name"], o, ok) for t, a, o, ok in out["multi_calls"]] == [
        ("transform", "Box", "human", True), ("transform", "Cyl", "human", True)]
    bx, cx = out["multi_x"]
    assert bx > 2.05 and abs((bx - 2) - (cx + 1)) < 1e-6
    assert out["multi_undo_steps"] == 1 and out["multi_after_undo"] == [2.0, -1.0]
    assert out["multi_history"] == ["transform 2 objects", True]
    assert out["typed_readout"].startswith("Move Z 0.5 m"), out["typed_readout"]
    assert out["typed_z"] == [1.0, 1.5] and out["typed_undo_steps"] == 1


FALLBACK_CHILD = r"""
import json, sys, time
sys.modules["moderngl"] = None  # no usable OpenGL binding: the live view cannot start
from PySide6.QtWidgets import QApplication
from studio.app import StudioOptions, build
app = QApplication(sys.argv[:1])
w, c = build(StudioOptions(data_dir=sys.argv[1], settings_file=sys.argv[1] + "/s.ini", exit_when_done=True))
w.show()
panel = w.viewport_panel
end = time.monotonic() + 120  # waiting on the worker, not timing the code under test
while time.monotonic() < end and not (c.ready and panel.viewport.frames > 0):
    app.processEvents()
    time.sleep(0.01)
print(json.dumps({"worker_view": panel.stack.currentWidget() is panel.viewport, "failed": panel.live.failed,
                  "frames": panel.viewport.frames, "png": len(panel.capture_png())}), flush=True)
w.close()
"""


def test_without_opengl_the_worker_rendered_view_takes_over(xvfb_display, tmp_path):  # noqa: F811
    _, out = run_on_display(FALLBACK_CHILD, xvfb_display, str(tmp_path))
    assert out["worker_view"] is True and "moderngl" in out["failed"]
    assert out["frames"] >= 1 and out["png"] > 1000
