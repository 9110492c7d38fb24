"""Projects (issue #33): a `.mwproj` holds the scene in the worker's own format, its undo
history, the view and the chat. In a real window on Xvfb: a step dropped before Finish is absent
from the export and the replay matches; export through the dialog (a planted link is not
followed); save, close, open, and the scene,
undo and view are back; a modified scene is not replaced without asking (Cancel keeps it).
Offscreen: a damaged or hostile file is one line and changes nothing; after a crash the
autosave is offered and brings the scene back."""

from __future__ import annotations

import io
import json
import os
import zipfile

os.environ["QT_QPA_PLATFORM"] = "offscreen"

from studio_support import WAIT_MS, run_on_display, send_ok, studio_window, xvfb_display  # noqa: E402, F401

# Runs in a child on the X server: Qt picks its platform once per process.
CHILD = r"""
import json, sys, time
from pathlib import Path
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMessageBox
from studio.app import StudioOptions, build

root = Path(sys.argv[1])
app = QApplication(sys.argv[:1])

def wait(cond, what, timeout=180):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        app.processEvents()
        time.sleep(0.01)

def open_window(project=None):
    options = StudioOptions(data_dir=str(root / "data"), settings_file=str(root / "settings.ini"),
                            project=project)
    window, c = build(options)
    window.show()
    wait(lambda: c.ready, "the session")
    return window, c

def call(c, tool, **args):
    done = []
    c.send(tool, args, origin="human", on_done=done.append)
    wait(lambda: done, tool)
    assert done[0].ok, done[0].to_text()
    wait(lambda: args["name"] in c.scene.names(), "the scene")

out = {}
w, c = open_window()
call(c, "add_primitive", kind="cube", name="Box", dimensions=[0.5, 0.5, 0.5])
call(c, "add_primitive", kind="cylinder", name="Post", dimensions=[0.2, 0.2, 0.4], location=[0, 0.6, 0])

# File > Export... through the dialog (its chooser answered) into a folder with a planted link
said = []
c.sig_status.connect(said.append)
c.sig_error.connect(said.append)
exports = root / "exports"
exports.mkdir()
victim = root / "victim.txt"
victim.write_text("keep me")
(exports / "scene.glb").symlink_to(victim)
for name, what in (("scene.3mf", "Exported"), ("scene.glb", "symlink")):
    w.files.save_chooser = lambda parent, caption, start, filters, name=name: (
        str(exports / name), "")
    w.files.export_action.trigger()
    wait(lambda: any(m.startswith("Export") and what in m for m in said), name)
out["export"] = {"files": sorted(p.name for p in exports.iterdir()), "victim": victim.read_text(),
                 "link": (exports / "scene.glb").is_symlink(),
                 "said": [m for m in said if m.startswith("Export")]}
cam = w.viewport_panel.viewport.camera
cam.azimuth_deg, cam.elevation_deg, cam.distance = 123.0, 21.0, 5.5
w.agent.goal.setPlainText("a box and a post")
# a failing call sent by mistake, dropped in the Task dock's review before Finish
failed = []
c.send("set_material", {"name": "Nope", "color": "#FF0000"}, origin="human", on_done=failed.append)
wait(lambda: failed, "the failing call")
review = w.tasks.review
wait(lambda: review.steps.count() == 3, "the review")
review.prompt.setText("a box and a post")
review.drop(2)
assert review.finish()  # the person's episode: the project links it
out["episode"] = eid = c.session_episodes[-1]
import pyarrow.parquet as pq
from agents.store import EpisodeFilter
from agents.store.export import export_parquet
from agents.store.replay import replay_episode
store = c.store()
export_parquet(store, root / "export", EpisodeFilter(ids=(eid,)))
rows = pq.read_table(root / "export" / "episodes.parquet").to_pylist()[0]["messages"]
report = replay_episode(store, eid)
out["dropped"] = {"stored": [s.tool for s in store.steps(eid)],
                  "exported": [r["tool"] for r in pq.read_table(root / "export" / "steps.parquet").to_pylist()],
                  "called": [t["function"]["name"] for m in rows for t in (m["tool_calls"] or [])],
                  "replay": [report.matched, report.steps_checked]}
out["title_before"], out["modified_before"] = w.windowTitle(), w.isWindowModified()
saved = {"hash": c.scene.scene_hash, "names": sorted(c.scene.names())}
path = root / "work" / "model.mwproj"
from studio.outliner.units_menu import set_units
set_units(c.scene, w.settings, "mm", w.units_menu)  # this project shows millimetres
w.project.save_to(path)
wait(lambda: not w.project.modified, "the save")
out["saved"], out["title_saved"], out["modified_saved"] = saved, w.windowTitle(), w.isWindowModified()
w.close()
wait(lambda: not c.worker.isRunning(), "the session to end", 60)

from PySide6.QtCore import QSettings
settings = QSettings(str(root / "settings.ini"), QSettings.Format.IniFormat)
settings.setValue("units", "m")  # the studio's own choice since: the project's must win
settings.sync()
w, c = open_window(project=str(path))  # as `modelwright studio model.mwproj`
wait(lambda: c.undo_stack.count() == 2 and sorted(c.scene.names()) == saved["names"], "the project")
wait(lambda: w.viewport_panel.viewport.camera.azimuth_deg == 123.0, "the view", 60)
cam = w.viewport_panel.viewport.camera
out["reopened"] = {"hash": c.scene.scene_hash, "names": sorted(c.scene.names()),
                   "undo": [c.undo_stack.text(i) for i in range(c.undo_stack.count())],
                   "view": [cam.azimuth_deg, cam.elevation_deg, cam.distance],
                   "goal": w.agent.goal.toPlainText(), "title": w.windowTitle(),
                   "units": [c.scene.units, w.units_menu.checkedAction().data()],
                   "modified": w.isWindowModified(), "recent": w.project.recent(),
                   "episodes": w.project.episodes, "selected": [e.id for e in w.episodes.selected()]}
c.undo_stack.undo()  # the worker's undo history came back with the file
wait(lambda: sorted(c.scene.names()) == ["Box"], "the undo")
out["after_undo"], out["modified_after_undo"] = sorted(c.scene.names()), w.isWindowModified()

# the scene is modified: Load task asks first, and Cancel keeps the model as it is
before = (c.scene.scene_hash, sorted(c.scene.names()), c.undo_stack.count())
asked = []
def press_cancel():
    box = getattr(w.project, "question_box", None)
    if box is None or not box.isVisible():
        return QTimer.singleShot(50, press_cancel)
    asked.append(box.text())
    box.button(QMessageBox.StandardButton.Cancel).click()
QTimer.singleShot(50, press_cancel)
c.load_task("primitive_placement:1:42")  # the real dialog, answered by the timer
done = c.worker.submit(lambda s: s.scene_hash(), "after")  # anything queued has run after this
wait(done.done, "the session")
app.processEvents()
out["asked"] = asked
out["kept"] = {"same": (c.scene.scene_hash, sorted(c.scene.names()), c.undo_stack.count()) == before,
               "task": c.task is not None}

# Save in the same question: the file is taken first, then the task replaces the model
ready = []
c.sig_task_ready.connect(ready.append)
def press_save():
    box = getattr(w.project, "question_box", None)
    if box is None or not box.isVisible():
        return QTimer.singleShot(50, press_save)
    box.button(QMessageBox.StandardButton.Save).click()
QTimer.singleShot(50, press_save)
c.load_task("primitive_placement:1:42")
wait(lambda: ready, "the task")
from studio.project.archive import read_project
saved = read_project(path)
out["saved_first"] = {"undo": [e["text"] for e in saved.undo], "modified": w.isWindowModified(),
                      "box_gone": "Box" not in c.scene.names()}
w.close()
print(json.dumps(out))
"""


def test_a_project_saves_closes_and_opens_with_scene_undo_and_view_and_cancel_keeps_it(
    xvfb_display,  # noqa: F811
    tmp_path,
):
    proc, out = run_on_display(CHILD, xvfb_display, str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    dropped = out["dropped"]  # the dropped failing call is in neither the store nor the export
    assert dropped["stored"] == dropped["exported"] == ["add_primitive", "add_primitive"]
    assert dropped["called"] == ["add_primitive", "add_primitive"]
    assert dropped["replay"] == [True, 2]  # and the replay still matches
    exported = out["export"]  # the dialog's folder, and a planted link there is not followed
    assert exported["files"] == ["scene.3mf", "scene.glb"] and exported["link"] is True
    assert exported["victim"] == "keep me" and len(exported["said"]) == 2
    assert exported["said"][0] == f"Exported 2 objects to {tmp_path / 'exports' / 'scene.3mf'}"
    assert "symlink" in exported["said"][1] and "\n" not in exported["said"][1]
    assert out["title_before"].startswith("Untitled") and out["modified_before"] is True
    assert out["title_saved"].startswith("model") and out["modified_saved"] is False
    assert (tmp_path / "work" / "model.mwproj").is_file()
    back = out["reopened"]
    assert back["names"] == ["Box", "Post"] and back["hash"] == out["saved"]["hash"]
    assert back["undo"] == ["add_primitive Box", "add_primitive Post"]
    assert back["view"] == [123.0, 21.0, 5.5] and back["goal"] == "a box and a post"
    assert back["units"] == ["mm", "mm"]  # the project's display unit, not the studio's last
    assert back["title"].startswith("model") and back["modified"] is False
    assert back["recent"] == [str(tmp_path / "work" / "model.mwproj")]
    assert back["episodes"] == [out["episode"]] == back["selected"]
    assert out["after_undo"] == ["Box"] and out["modified_after_undo"] is True
    assert out["asked"] == ["Load task replaces the model. Save your changes first?"]
    assert out["kept"] == {"same": True, "task": False}
    assert out["saved_first"] == {
        "undo": ["add_primitive Box"],
        "modified": False,
        "box_gone": True,
    }


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def test_a_damaged_or_hostile_project_is_one_line_and_changes_nothing(
    qapp, qtbot, worker_pool, tmp_path, request
):
    manifest = json.dumps({"format": "modelwright-project", "version": 1}).encode()
    files = {
        "noise.mwproj": b"not a zip at all",
        "escape.mwproj": _zip({"manifest.json": manifest, "../../outside.blend": b"BLENDER"}),
        "gap.mwproj": _zip(
            {
                "manifest.json": manifest,
                "state/commits/000001/scene.blend": b"B" * 10,
                "state/commits/000001/parts.json": b"{}",
                "state/commits/000003/call.json": b"{}",
            }
        ),
        "damaged.mwproj": _zip(
            {
                "manifest.json": manifest,
                "state/commits/000001/parts.json": b"{}",
                "state/commits/000001/scene.blend": b"BLENDER-v300" + b"\0junk" * 200,
            }
        ),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    with studio_window(worker_pool, tmp_path, request) as w:
        c = w.controller
        send_ok(qtbot, w, "add_primitive", kind="cube", name="Keep", dimensions="1, 1, 1")
        qtbot.waitUntil(lambda: c.scene.names() == ["Keep"], timeout=WAIT_MS)
        before = (c.scene.scene_hash, c.undo_stack.count(), w.windowTitle())
        w.project.answer = lambda what: "discard"  # the scene is modified: opening would ask
        for name in files:
            errors = len(w.errors.errors)
            w.project.open(tmp_path / name)
            qtbot.waitUntil(lambda e=errors: len(w.errors.errors) > e, timeout=WAIT_MS)
            message = w.errors.errors[-1]
            assert name in message and "\n" not in message and "Traceback" not in message, message
            done = c.worker.submit(lambda s: s.scene_hash(), "after")
            qtbot.waitUntil(done.done, timeout=WAIT_MS)
            assert done.result() == before[0], name  # the worker's scene is as it was
            assert (c.scene.scene_hash, c.undo_stack.count(), w.windowTitle()) == before, name
        assert "does not load" in w.errors.errors[-1]  # only the damaged scene reached the worker
        # a save onto a planted link is refused, not followed, and the scene is kept in the autosave
        link = tmp_path / "linked.mwproj"
        link.symlink_to(tmp_path / "elsewhere")
        errors = len(w.errors.errors)
        assert w.project.save_to(link)
        qtbot.waitUntil(lambda: len(w.errors.errors) > errors, timeout=WAIT_MS)
        assert "symlink" in w.errors.errors[-1] and "kept in" in w.errors.errors[-1]
        assert not (tmp_path / "elsewhere").exists() and w.project.autosave_path().is_file()
        c.undo_stack.undo()  # and its undo history is intact
        qtbot.waitUntil(lambda: c.scene.names() == [], timeout=WAIT_MS)
    assert not (tmp_path.parent / "outside.blend").exists()


def test_a_copy_left_by_a_studio_that_is_gone_is_recovered_or_discarded_as_asked(
    qapp, qtbot, worker_pool, tmp_path, request
):
    """`--recover yes` brings the copy of a studio that did not close cleanly back at start
    (modified, under its project's name), `--recover no` deletes it; a running studio's own
    copy is never offered (tests/test_studio_recovery.py: the banner after a real kill -9)."""
    import shutil

    from studio.project import recovery

    with studio_window(worker_pool, tmp_path, request) as w:
        c = w.controller
        assert w.project.banner is None  # a first start: nothing to offer
        send_ok(qtbot, w, "add_primitive", kind="cube", name="Unsaved", dimensions="1, 1, 1")
        with qtbot.waitSignal(w.project.sig_autosaved, timeout=WAIT_MS):  # after the edit
            pass
        slot = w.project.slot.folder
        assert recovery.orphans(slot.parent) == []  # this studio's own: held, not offered
        # what a studio killed now would leave: the same files, its lock no longer held
        shutil.copytree(slot, slot.parent / "gone-1")
        shutil.copytree(slot, slot.parent / "gone-2")
        (slot.parent / "gone-2" / "origin.json").write_text(json.dumps({"project": str(tmp_path / "mine.mwproj")}))
        os.utime(slot.parent / "gone-2" / "autosave.mwproj", (1, 1))  # the older of the two
        w.project.answer = lambda what: "discard"
    assert not slot.exists()  # a clean exit takes its own copy away

    with studio_window(worker_pool, tmp_path, request, recover="yes") as w:
        c = w.controller
        qtbot.waitUntil(lambda: c.scene.names() == ["Unsaved"], timeout=WAIT_MS)
        assert [c.undo_stack.text(i) for i in range(c.undo_stack.count())] == ["add_primitive Unsaved"]
        assert w.isWindowModified() and w.windowTitle().startswith("Untitled")  # not saved yet
        assert w.project.banner is None  # recovered unasked
        qtbot.waitUntil(lambda: not (slot.parent / "gone-1").exists(), timeout=WAIT_MS)
        assert w.project.slot.path.is_file()  # in this studio's own copy first
        w.project.answer = lambda what: "discard"

    assert [p.parent.name for p in recovery.orphans(slot.parent)] == ["gone-2"]
    assert recovery.origin_of(recovery.orphans(slot.parent)[0]) == tmp_path / "mine.mwproj"
    with studio_window(worker_pool, tmp_path, request, recover="no") as w:
        assert w.project.banner is None and recovery.orphans(slot.parent) == []
        assert not (slot.parent / "gone-2").exists()
