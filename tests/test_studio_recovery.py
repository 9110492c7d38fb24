"""No work lost on quit or crash (issue #50), in real windows under Xvfb.

Quit: a part added by hand, then Ctrl+Q asks Save / Discard / Cancel as New does; Cancel keeps
the studio open with the part; Discard quits and leaves nothing to recover; Save writes the
project through the file dialog, then quits. Crash: a studio killed with SIGKILL after a part
was added (and autosaved), started again, offers the autosaved scene; pressing Recover brings
the part back, modified and unsaved, and the offer is not made again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from studio_support import run_on_display, xvfb_display  # noqa: F401  (the fixture)

COMMON = r"""
import json, sys, time
from pathlib import Path
from PySide6.QtCore import Qt, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMessageBox
from studio.app import StudioOptions, build

root = Path(sys.argv[1])
app = QApplication(sys.argv[:1])

def wait(cond, what, timeout=180):
    end = time.monotonic() + timeout  # waiting on the worker and the X server, not timing them
    while not cond():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        app.processEvents()
        time.sleep(0.01)

def open_window():
    w, c = build(StudioOptions(data_dir=str(root / "data"), settings_file=str(root / "settings.ini")))
    w.show()
    wait(lambda: c.ready, "the session")
    w.activateWindow()  # as on a desktop: the window has the keyboard, Ctrl+Q is its shortcut
    wait(lambda: QApplication.activeWindow() is w, "the window to be active")
    return w, c

def add_part(w, c, name, **values):
    # as a person does it: the palette's form, then Send; then the autosave that follows the edit
    saved = []
    w.project.sig_autosaved.connect(saved.append)
    w.palette.select("add_primitive", kind="cube", name=name, **values)
    assert w.palette.send(), w.palette.error.text()
    wait(lambda: name in c.scene.names() and w.isWindowModified(), name)
    wait(lambda: saved, "the autosave")
    return saved[-1]

def slots():
    folder = root / "data" / "autosave"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

def answer_next(button, asked):
    def press():
        box = getattr(w.project, "question_box", None)
        if box is None or not box.isVisible():
            return QTimer.singleShot(50, press)
        asked.append(box.text())
        box.button(button).click()
    QTimer.singleShot(50, press)

def ctrl_q(w):
    w.activateWindow()  # (a closed dialog leaves no window active without a window manager)
    wait(lambda: QApplication.activeWindow() is w, "the window to be active")
    QTest.keyClick(w, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
    app.processEvents()
"""

QUIT_CHILD = COMMON + r"""
out = {}
w, c = open_window()
copy = add_part(w, c, "Part", dimensions="1, 1, 1")
out["autosaved"] = Path(copy).is_file()
out["title"] = w.windowTitle()

asked = []
answer_next(QMessageBox.StandardButton.Cancel, asked)
ctrl_q(w)  # the prompt appears; Cancel keeps the studio as it was
out["cancel"] = {"asked": list(asked), "visible": w.isVisible(), "names": c.scene.names(),
                 "modified": w.isWindowModified(), "worker": c.worker.isRunning()}

answer_next(QMessageBox.StandardButton.Discard, asked)
ctrl_q(w)
wait(lambda: not w.isVisible(), "the window to close")
wait(lambda: not c.worker.isRunning(), "the session to end", 60)
from agents.store import Store
def episodes():
    with Store(root / "data", create=False) as store:
        return [(e.source, e.status) for e in store.list_episodes()]
out["discard"] = {"asked": len(asked), "slots": slots(), "episodes": episodes()}

w, c = open_window()  # the next start: nothing to offer after a Discard
out["next_start_banner"] = w.project.banner is not None
add_part(w, c, "Other", dimensions="0.5, 0.5, 0.5")
target = root / "work" / "quit.mwproj"
target.parent.mkdir()
offered = []
w.project.save_chooser = lambda parent, caption, start, filters: (offered.append(start), (str(target), ""))[1]
answer_next(QMessageBox.StandardButton.Save, asked)
ctrl_q(w)  # Save: the dialog, the file, then the studio quits
wait(lambda: not w.isVisible(), "the window to close after the save")
wait(lambda: not c.worker.isRunning(), "the session to end", 60)
from studio.project.archive import read_project
out["save"] = {"asked": len(asked), "file": target.is_file(), "slots": slots(),
               "undo": [e["text"] for e in read_project(target).undo] if target.is_file() else None,
               "offered": offered, "episodes": episodes()}
print(json.dumps(out), flush=True)
"""


def test_quit_asks_save_discard_cancel_like_new(xvfb_display, tmp_path):  # noqa: F811
    proc, out = run_on_display(QUIT_CHILD, xvfb_display, str(tmp_path), timeout=420)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out["autosaved"] is True and out["title"].startswith("Untitled")
    cancel = out["cancel"]
    assert cancel["asked"] == ["The model has unsaved changes. Save them before you quit?"]
    assert cancel["visible"] is True and cancel["names"] == ["Part"] and cancel["modified"] is True
    assert cancel["worker"] is True  # nothing was shut down
    # quit; no recovery copy is left, and the unfinished session is no demonstration
    assert out["discard"] == {"asked": 2, "slots": [], "episodes": []}
    assert out["next_start_banner"] is False
    save = out["save"]
    assert save["asked"] == 3 and save["file"] is True and save["slots"] == []
    assert save["undo"] == ["add_primitive Other"] and save["episodes"] == []
    # an Untitled scene's Save As starts in the last folder a dialog used (none yet: home)
    assert save["offered"] == [str(Path.home() / "Untitled.mwproj")]


KILLED_CHILD = COMMON + r"""
w, c = open_window()
copy = add_part(w, c, "Kept", dimensions="0.5, 0.5, 0.5", location="1, 2, 0.25")
print(json.dumps({"autosaved": copy, "names": c.scene.names()}), flush=True)
while True:  # until the test kills this process
    app.processEvents()
    time.sleep(0.02)
"""

RESTARTED_CHILD = COMMON + r"""
out = {}
before = slots()
w, c = open_window()
banner = w.project.banner
out["offered"] = banner is not None and banner.isVisible()
out["text"] = banner.text.text() if banner else None
QTest.mouseClick(banner.recover_button, Qt.MouseButton.LeftButton)  # the person presses Recover
wait(lambda: "Kept" in c.scene.names(), "the recovered scene")
kept = c.scene.get("Kept")
out["recovered"] = {"names": c.scene.names(), "location": kept["location"],
                    "dimensions": kept["dimensions"], "title": w.windowTitle(),
                    "modified": w.isWindowModified(), "banner": banner.isVisible(),
                    "undo": [c.undo_stack.text(i) for i in range(c.undo_stack.count())]}
wait(lambda: len(slots()) == 1 and slots() != before, "the old copy to go once this studio has its own")
out["slots"] = {"before": len(before), "after": len(slots())}
c.undo_stack.undo()  # the undo history came back with it
wait(lambda: "Kept" not in c.scene.names(), "the undo")
w.project.answer = lambda what: "discard"
w.close()
wait(lambda: not c.worker.isRunning(), "the session to end", 60)
out["slots_at_exit"] = slots()
print(json.dumps(out), flush=True)
"""


def test_a_studio_killed_with_sigkill_offers_its_scene_at_the_next_start(xvfb_display, tmp_path):  # noqa: F811
    env = {**os.environ, "DISPLAY": xvfb_display, "QT_QPA_PLATFORM": "xcb"}
    child = subprocess.Popen([sys.executable, "-c", KILLED_CHILD, str(tmp_path)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=Path(__file__).parent.parent, start_new_session=True)
    try:
        line = ""
        for line in child.stdout:  # the part is in and autosaved
            if line.startswith("{"):
                break
        assert line.startswith("{"), child.stderr.read()[-3000:] if child.poll() is not None else "no output"
        first = json.loads(line)
        assert first["names"] == ["Kept"] and Path(first["autosaved"]).is_file()
        os.kill(child.pid, signal.SIGKILL)  # no close, no cleanup: as a crash or a kill -9
        assert child.wait(60) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(60)
        try:  # its workers die with it (PR_SET_PDEATHSIG); anything else it started, here
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert Path(first["autosaved"]).is_file()  # what the killed studio left

    proc, out = run_on_display(RESTARTED_CHILD, xvfb_display, str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out["offered"] is True and "Recover an unsaved scene" in out["text"]
    rec = out["recovered"]
    assert rec["names"] == ["Kept"] and rec["location"] == [1.0, 2.0, 0.25]
    assert rec["dimensions"] == [0.5, 0.5, 0.5]
    assert rec["title"].startswith("Untitled") and rec["modified"] is True  # not saved anywhere yet
    assert rec["banner"] is False and rec["undo"] == ["add_primitive Kept"]
    assert out["slots"] == {"before": 1, "after": 1}  # the old copy gave way to this studio's own
    assert out["slots_at_exit"] == []  # a clean exit leaves nothing to offer
