"""The studio's real window on an X server (Xvfb): run a task, then capture the live GPU
viewport from the screen with `mss` and check it is what the viewport draws (not blank, same
size as its own framebuffer)."""

from __future__ import annotations

from studio_support import run_on_display, xvfb_display  # noqa: F401  (the fixture)

# Runs in a child process: Qt picks its platform once per process and the other studio
# tests run offscreen.
CHILD = r"""
import json, sys
import numpy as np
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication
from studio.app import ScriptedRun, StudioOptions, build
from studio.viewport.capture import on_real_display, screen_capture

def pixels(image):
    image = image.convertToFormat(QImage.Format.Format_RGB32)
    return np.frombuffer(bytes(image.constBits()), np.uint8).reshape(image.height(), image.bytesPerLine() // 4, 4)[:, :image.width(), :3]

def compare(run):
    panel = run.window.viewport_panel
    screen = screen_capture(panel.live_widget)
    shown = panel.live.grabFramebuffer()
    screen.save(sys.argv[3])
    a, b = pixels(screen).astype(int), pixels(shown).astype(int)
    same_size = a.shape == b.shape
    return {"real_display": on_real_display(), "screen_size": [screen.width(), screen.height()],
            "widget_size": [shown.width(), shown.height()],
            "screen_colours": int(len(np.unique(a.reshape(-1, 3), axis=0))),
            "mean_abs_diff": float(np.abs(a - b).mean()) if same_size else None,
            "frames": panel.live.frames, "live": panel.live_active,
            "triangles": panel.live.renderer.triangles}

app = QApplication(sys.argv[:1])
options = StudioOptions(task=sys.argv[1], autorun=True, exit_when_done=True, data_dir=sys.argv[2],
                        settings_file=sys.argv[2] + "/settings.ini", size=(1500, 1000))
window, _ = build(options)
run = ScriptedRun(window, options)
run.after_last_frame.append(compare)
window.show()
sys.exit(app.exec())
"""


def test_real_window_viewport_capture_matches_what_it_shows(xvfb_display, tmp_path):  # noqa: F811
    shot = tmp_path / "viewport-screen.png"
    proc, out = run_on_display(CHILD, xvfb_display, "primitive_placement:1:42", str(tmp_path), str(shot),
                               timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out["status"] == "done" and out["success"] is True
    assert out["real_display"] is True
    assert out["screen_size"] == out["widget_size"]
    assert out["screen_colours"] > 50  # a rendered scene, not a blank or single-colour capture
    assert out["mean_abs_diff"] < 8.0, out  # the screen shows what the viewport paints
    assert shot.is_file() and out["frames"] >= 1
    assert out["live"] is True and out["triangles"] > 0


OFF_SCREEN_CHILD = r"""
import json, sys
from PySide6.QtGui import QColor, QPalette
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QWidget
from studio.viewport.capture import capture, screen_capture

app = QApplication(sys.argv[:1])
w = QWidget()
pal = w.palette()
pal.setColor(QPalette.ColorRole.Window, QColor(200, 30, 40))
w.setPalette(pal)
w.setAutoFillBackground(True)
screen = app.primaryScreen().geometry()
w.setGeometry(screen.width() - 300, screen.height() - 200, 600, 400)  # half off the right and bottom
w.show()
# On a loaded machine the X server maps and paints the window later than a fixed number of
# event-loop turns (a capture of it was black): wait until it is exposed, then paint it now.
assert QTest.qWaitForWindowExposed(w, 60000), "the window was never exposed"
w.repaint()
app.sync()
for _ in range(50):
    app.processEvents()
top_left = w.mapToGlobal(w.rect().topLeft())
shot = screen_capture(w)
px = shot.pixelColor(10, 10)
out = {"size": [shot.width(), shot.height()], "on_screen": [screen.width() - top_left.x(), screen.height() - top_left.y()],
       "pixel": [px.red(), px.green(), px.blue()]}
w.move(screen.width() + 100, screen.height() + 100)  # wholly off the screen: the widget's own paint
for _ in range(50):
    app.processEvents()
whole = capture(w)
out["fallback"] = [whole.width(), whole.height()]
print(json.dumps(out), flush=True)
"""


def test_a_window_partly_off_the_screen_is_captured_as_far_as_it_shows(xvfb_display):  # noqa: F811
    """X refuses (BadMatch) a grab past the screen's edge; the capture takes the visible part,
    and a window wholly off the screen comes from its own paint instead of an error."""
    _, out = run_on_display(OFF_SCREEN_CHILD, xvfb_display)
    assert out["size"] == out["on_screen"] and 0 < out["size"][0] < 600 and 0 < out["size"][1] < 400
    assert out["pixel"] == [200, 30, 40]
    assert out["fallback"] == [600, 400]
