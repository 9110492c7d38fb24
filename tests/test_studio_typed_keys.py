"""Typed transforms in the real window under Xvfb (issue #50): the README's G/R/S sequences
typed as key events into the live viewport move, turn and scale the object by exactly the
typed values, with axes in lower and upper case and digits from the keypad too. While one is
open every digit, sign and point is its own: 0, 1, 3 and 7 (view keys) change nothing, until
Enter or Esc closes it; then they switch views again. The keys go to the live view's own
window (where the X server sends them when it has the focus) and, a second time, to its
container in the main window (where they land when the main window kept the focus): there
the window's shortcuts would otherwise take the view keys."""

from __future__ import annotations

from studio_support import run_on_display, xvfb_display  # noqa: F401  (the fixture)

CHILD = r"""
import json, sys, time
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from studio.app import StudioOptions, build
from studio.outliner.units_menu import set_units

app = QApplication(sys.argv[:1])
options = StudioOptions(data_dir=sys.argv[1], settings_file=sys.argv[1] + "/settings.ini",
                        size=(1500, 1000), exit_when_done=True)
window, c = build(options)
window.show()
panel, live = window.viewport_panel, window.viewport_panel.live
out = {"live": live is not None}

def wait(pred, timeout=120):
    end = time.monotonic() + timeout  # waiting on the worker, not timing the code under test
    while not pred():
        assert time.monotonic() < end, "timed out"
        app.processEvents()
        time.sleep(0.005)

def settle():
    wait(lambda: not live._syncing and live._pending is None and not c.worker._jobs)
    for _ in range(5):
        app.processEvents()

KEYS = {"Enter": Qt.Key.Key_Return, "Esc": Qt.Key.Key_Escape, ".": Qt.Key.Key_Period,
        "-": Qt.Key.Key_Minus, "+": Qt.Key.Key_Plus}

def press(token, to=None):
    # "Z": Shift+Z (an upper-case axis), "z": z, "kp3": 3 on the keypad, "Enter", "Esc"
    mods = Qt.KeyboardModifier.NoModifier
    if token.startswith("kp"):
        token, mods = token[2:], Qt.KeyboardModifier.KeypadModifier
    if token in KEYS:
        key = KEYS[token]
    else:
        key = getattr(Qt.Key, f"Key_{token.upper()}")
        if token.isalpha() and token.isupper() and token not in "GRS":
            mods |= Qt.KeyboardModifier.ShiftModifier
    QTest.keyClick(to or live, key, mods)
    app.processEvents()

def view():
    return [live.view_name, round(live.camera.azimuth_deg, 6), round(live.camera.elevation_deg, 6)]

calls = []
c.sig_call.connect(lambda r, origin: calls.append((r.tool, dict(r.args), origin, r.ok)))
wait(lambda: c.ready)
wait(lambda: live.renderer is not None or live.failed is not None)
c.manual_call("add_primitive", {"kind": "cube", "name": "Box", "dimensions": [1, 1, 1], "location": [0, 0, 0.5]})
wait(lambda: "Box" in live.renderer.meshes)
settle()
c.scene.select("Box")
live.frame_all()
settle()
window.activateWindow()  # as on a desktop: the window is active, so its shortcuts are live
wait(lambda: QApplication.activeWindow() is window)

def typed(name, tokens, to=None):
    before_view, n = view(), len(calls)
    for t in tokens[:-1]:
        press(t, to)
    readout = panel.readout.text()
    mid_view = view()
    press(tokens[-1], to)
    if tokens[-1] == "Enter":
        wait(lambda: len(calls) > n)
        settle()
        wait(lambda: c.scene.get("Box") is not None)
    box = c.scene.get("Box")
    out[name] = {"readout": readout, "view_kept": mid_view == before_view == view(),
                 "calls": [a for t, a, o, ok in calls[n:] if t == "transform" and o == "human" and ok],
                 "location": box["location"], "rotation": box["rotation_deg"], "scale": box["scale"],
                 "open": live.typed is not None}

# the README's sequences, axes in lower and upper case
typed("move_z", ["G", "z", "0", ".", "5", "Enter"])          # G Z 0.5 Enter: up by 0.5
typed("move_x", ["G", "X", "1", "Enter"])                    # G X 1 Enter
typed("move_y", ["G", "y", "-", "1", "0", ".", "3", "7", "Enter"])  # every view digit: 1 0 3 7
typed("move_y_keypad", ["G", "Y", "kp1", "kp0", "kp.", "kp3", "kp7", "Enter"])  # back by +10.37
typed("rotate_z", ["R", "Z", "9", "0", "Enter"])             # R Z 90 Enter
typed("scale_all", ["S", "2", "Enter"])                      # S 2 Enter: every axis
typed("scale_y", ["S", "y", "0", ".", "5", "Enter"])         # one axis
typed("esc", ["G", "Z", "3", "7", "1", "Esc"])               # Esc: nothing is sent
out["after_esc_open"] = live.typed is not None
set_units(c.scene, window.settings, "mm", window.units_menu)  # typed lengths in the shown unit
typed("move_mm", ["G", "Z", "2", "5", "0", "Enter"])
set_units(c.scene, window.settings, "auto", window.units_menu)

# the same keys into the viewport's container in the main window
box = panel.live_widget
typed("box_move_x", ["G", "x", "-", "1", ".", "7", "Enter"], box)   # x 1 -> -0.7
typed("box_rotate", ["R", "Z", "3", "0", "Enter"], box)            # 90 -> 120
typed("box_esc", ["S", "0", ".", "3", "Esc"], box)

# with nothing typed in, the view keys work again
press("7")
out["seven_after"] = view()[0]
press("1")
out["one_after"] = view()[0]
print(json.dumps(out, default=str), flush=True)
window.close()
app.quit()
"""


def test_typed_sequences_move_turn_and_scale_by_exactly_the_typed_values(xvfb_display, tmp_path):  # noqa: F811
    _, out = run_on_display(CHILD, xvfb_display, str(tmp_path))
    assert out["live"] is True

    def close(a, b):
        return all(abs(x - y) < 1e-5 for x, y in zip(a, b, strict=True))

    steps = ("move_z", "move_x", "move_y", "move_y_keypad", "rotate_z", "scale_all", "scale_y",
             "move_mm")
    for name in steps:  # every key went to the typed value: the view never changed meanwhile
        assert out[name]["view_kept"] is True, (name, out[name])
        assert out[name]["open"] is False and len(out[name]["calls"]) == 1, (name, out[name])
    assert out["move_z"]["readout"].startswith("Move Z 0.5 m")
    assert out["move_z"]["calls"][0]["location"] == [0.0, 0.0, 1.0]
    assert out["move_x"]["calls"][0]["location"] == [1.0, 0.0, 1.0]
    assert out["move_y"]["readout"].startswith("Move Y -10.37 m")
    assert out["move_y"]["calls"][0]["location"] == [1.0, -10.37, 1.0]
    assert out["move_y_keypad"]["readout"].startswith("Move Y 10.37 m")
    assert out["move_y_keypad"]["calls"][0]["location"] == [1.0, 0.0, 1.0]
    assert close(out["move_y_keypad"]["location"], [1.0, 0.0, 1.0])
    assert out["rotate_z"]["readout"].startswith("Rotate Z 90°")
    assert close(out["rotate_z"]["calls"][0]["rotation_deg"], [0.0, 0.0, 90.0])
    assert close(out["rotate_z"]["rotation"], [0.0, 0.0, 90.0])
    assert out["scale_all"]["calls"][0]["scale"] == [2.0, 2.0, 2.0]
    assert out["scale_y"]["calls"][0]["scale"] == [2.0, 1.0, 2.0]
    assert close(out["scale_y"]["scale"], [2.0, 1.0, 2.0])
    assert out["esc"]["readout"].startswith("Move Z 371 m") and out["esc"]["calls"] == []
    assert out["esc"]["view_kept"] is True and out["after_esc_open"] is False
    assert close(out["esc"]["location"], [1.0, 0.0, 1.0])
    assert out["move_mm"]["readout"].startswith("Move Z 250 mm")
    assert out["move_mm"]["calls"][0]["location"] == [1.0, 0.0, 1.25]
    assert close(out["move_mm"]["location"], [1.0, 0.0, 1.25])
    assert out["seven_after"] == "top" and out["one_after"] == "front"
    for name in ("box_move_x", "box_rotate", "box_esc"):
        assert out[name]["view_kept"] is True and out[name]["open"] is False, (name, out[name])
    assert out["box_move_x"]["readout"].startswith("Move X -1.7 m")
    assert out["box_move_x"]["calls"][0]["location"] == [-0.7, 0.0, 1.25]
    assert close(out["box_rotate"]["calls"][0]["rotation_deg"], [0.0, 0.0, 120.0])
    assert out["box_esc"]["readout"].startswith("Scale 0.3×") and out["box_esc"]["calls"] == []
    assert close(out["box_esc"]["scale"], [2.0, 1.0, 2.0])
