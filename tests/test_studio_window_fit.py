"""The studio on a small screen (issue #50), a real window on a 1280x720 Xvfb: it opens inside
the screen's available area (it used to open 1998 px wide), a remembered size from a bigger
screen is fitted too; the tool palette never cuts a label or a choice ("uv_…ere"); and the
viewport's grid label follows View → Units both ways."""

from __future__ import annotations

import pytest
from studio_support import run_on_display, xvfb_display  # noqa: F401  (the fixture)

CHILD = r"""
import json, sys, time
from PySide6.QtWidgets import QApplication, QComboBox, QLabel
from studio.app import StudioOptions, build
from studio.outliner.units_menu import set_units

app = QApplication(sys.argv[:1])
root = sys.argv[1]

def wait(pred, what, timeout=180):
    end = time.monotonic() + timeout  # waiting on the worker and the X server, not timing them
    while not pred():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        app.processEvents()
        time.sleep(0.01)

def pump(n=20):
    for _ in range(n):
        app.processEvents()
        time.sleep(0.005)

def placed(w):
    room = w.screen().availableGeometry()
    outer = w.frameGeometry()
    return {"room": [room.x(), room.y(), room.width(), room.height()],
            "window": [outer.x(), outer.y(), outer.width(), outer.height()],
            "inside": room.contains(outer)}

def start():
    w, c = build(StudioOptions(data_dir=root + "/data", settings_file=root + "/settings.ini"))
    w.show()
    wait(lambda: w.isVisible() and c.ready, "the window and its session")
    pump(50)
    return w, c

out = {}
w, c = start()
out["first"] = placed(w)

# the palette: every label and every choice whole, at the width the dock gets on this screen
cut = []
for tool, values in (("add_primitive", {"kind": "uv_sphere"}), ("cad_hole", {}), ("mesh_repair", {}),
                     ("modifier", {})):
    form = w.palette.select(tool, **values)
    pump()
    if w.palette.scroll.horizontalScrollBar().isVisible():
        cut.append(f"{tool}: the form scrolls sideways")
    for label in form.findChildren(QLabel):
        need = label.fontMetrics().horizontalAdvance(label.text())
        if label.isVisible() and label.text() and not label.wordWrap() and label.contentsRect().width() < need:
            cut.append(f"{tool}: label {label.text()!r} has {label.contentsRect().width()} of {need} px")
    for combo in form.findChildren(QComboBox):
        if combo.isVisible() and combo.width() < combo.sizeHint().width():
            cut.append(f"{tool}: {combo.currentText()!r} has {combo.width()} of {combo.sizeHint().width()} px")
out["palette_cut"] = cut

# the grid label follows View → Units, both ways, at once
panel = w.viewport_panel
grid = lambda: panel.scale.text().split("·")[0].strip()  # "grid 10 mm  ·  orbit"
out["live"] = panel.live_active
if panel.live_active:
    set_units(c.scene, w.settings, "mm", w.units_menu)
    wait(lambda: grid().endswith(" mm"), "the grid in mm", 60)
    out["grid_mm"] = panel.scale.text()
    set_units(c.scene, w.settings, "m", w.units_menu)
    wait(lambda: grid().endswith(" m"), "the grid in m", 60)
    out["grid_m"] = panel.scale.text()
    set_units(c.scene, w.settings, "auto", w.units_menu)

# a size remembered from a bigger screen is fitted to this one at the next start
w.resize(2400, 1500)
w.move(400, 300)
pump()
w.save_layout()
w.close()
wait(lambda: not c.worker.isRunning(), "the session to end", 60)
w, c = start()
out["remembered"] = placed(w)
w.close()
wait(lambda: not c.worker.isRunning(), "the session to end", 60)
print(json.dumps(out), flush=True)
"""


@pytest.mark.parametrize("xvfb_display", ["1280x720x24"], indirect=True)
def test_a_small_screen_holds_the_whole_window_and_its_palette(xvfb_display, tmp_path):  # noqa: F811
    proc, out = run_on_display(CHILD, xvfb_display, str(tmp_path), timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for start in ("first", "remembered"):
        placed = out[start]
        room, window = placed["room"], placed["window"]
        assert placed["inside"] is True, (start, placed)  # (without a window manager: the screen)
        assert window[2] <= room[2] <= 1280 and window[3] <= room[3] <= 720, (start, placed)
    assert out["first"]["window"][2] == 1280  # as wide as the screen allows (1600 asked)
    assert out["palette_cut"] == [] and out["live"] is True
    assert out["grid_mm"].startswith("grid ") and out["grid_mm"].split("·")[0].strip().endswith(" mm")
    assert out["grid_m"].split("·")[0].strip().endswith(" m"), out["grid_m"]
