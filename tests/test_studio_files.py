"""File → Export… and Import… in the real studio window (offscreen Qt, real worker): the file
lands in the folder the person chose, a link planted at that name is left alone, the folder is
remembered, and an imported file becomes one undo step."""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # these tests never need a display

import zipfile  # noqa: E402

import pytest  # noqa: E402
from PIL import Image  # noqa: E402
from studio_support import WAIT_MS, fresh_scene, send_ok, studio_window  # noqa: E402


@pytest.fixture(scope="module")
def studio(qapp, worker_pool, tmp_path_factory, request):
    with studio_window(worker_pool, tmp_path_factory.mktemp("studio"), request) as window:
        yield window


class Chooser:
    """Stands in for the modal QFileDialog: answers `path` and notes where it was opened."""

    def __init__(self) -> None:
        self.answer: tuple[str, str] = ("", "")
        self.opened_at: list[str] = []

    def __call__(self, parent, caption, start, filters):
        self.opened_at.append(start)
        return self.answer


def _through_the_menu(qtbot, window, action, signal, starts: str):
    """Trigger `action`; the first message on `signal` that starts with `starts` (other parts
    of the studio may speak meanwhile)."""
    with qtbot.waitSignal(
        signal, timeout=WAIT_MS, check_params_cb=lambda m: m.startswith(starts)
    ) as blocker:
        action.trigger()
    return blocker.args[0]


def test_export_goes_to_the_chosen_folder_and_never_through_a_planted_link(studio, qtbot, tmp_path):
    window, c = fresh_scene(studio, qtbot), studio.controller
    send_ok(qtbot, window, "add_primitive", kind="cube", name="box", dimensions=[0.02, 0.03, 0.04])
    chooser = window.files.save_chooser = Chooser()
    folder = tmp_path / "my parts"
    chooser.answer = (
        str(folder / "bracket"),
        "3MF, for 3D printing (*.3mf)",
    )  # suffix from the filter
    said = _through_the_menu(qtbot, window, window.files.export_action, c.sig_status, "Exported")
    out = folder / "bracket.3mf"
    assert said == f"Exported 1 object to {out}" and window.statusBar().currentMessage() == said
    with zipfile.ZipFile(out) as z:
        assert b'name="box"' in z.read("3D/3dmodel.model")

    # a link planted at the chosen name: refused in one line, its target untouched
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (folder / "bracket.glb").symlink_to(victim)
    chooser.answer = (str(folder / "bracket.glb"), "")
    said = _through_the_menu(qtbot, window, window.files.export_action, c.sig_error, "Export")
    assert "\n" not in said and "is a symlink" in said and str(folder / "bracket.glb") in said
    assert victim.read_text() == "keep me" and (folder / "bracket.glb").is_symlink()
    assert sorted(p.name for p in folder.iterdir()) == [
        "bracket.3mf",
        "bracket.glb",
    ]  # no temp left
    assert chooser.opened_at[-1] == str(folder)  # the dialog starts in the last export folder
    assert window.files.recent_export_dirs()[0] == str(folder)


def test_import_brings_in_the_file_and_what_it_names_only_as_one_undo_step(studio, qtbot, tmp_path):
    window, c = fresh_scene(studio, qtbot), studio.controller
    send_ok(
        qtbot, window, "add_primitive", kind="cube", name="block", dimensions=[0.01, 0.01, 0.01]
    )
    window.files.save_chooser = Chooser()
    window.files.save_chooser.answer = (str(tmp_path / "block.obj"), "")
    _through_the_menu(qtbot, window, window.files.export_action, c.sig_status, "Exported")
    obj = tmp_path / "block.obj"
    obj.write_text("mtllib block.mtl\n" + obj.read_text())
    (tmp_path / "block.mtl").write_text("newmtl red\nKd 1 0 0\nmap_Kd tex/red.png\n")
    (tmp_path / "tex").mkdir()
    Image.new("RGB", (4, 4), (255, 0, 0)).save(tmp_path / "tex" / "red.png")
    (tmp_path / "holiday.stl").write_bytes(b"solid unrelated\nendsolid\n")  # not named: stays out
    fresh_scene(window, qtbot)
    window.files.open_chooser = Chooser()
    window.files.open_chooser.answer = (str(obj), "")
    said = _through_the_menu(qtbot, window, window.files.import_action, c.sig_status, "Imported")
    assert said == f"Imported 1 object from {obj}"
    workspace = c.worker.session.workspace
    assert {"block.obj", "block.mtl", "tex/red.png"} <= {
        p.relative_to(workspace).as_posix() for p in workspace.rglob("*") if p.is_file()
    }
    assert not (workspace / "holiday.stl").exists()
    qtbot.waitUntil(lambda: len(c.scene.objects) == 1, timeout=WAIT_MS)
    assert c.undo_stack.count() == 1
    c.undo_stack.undo()
    qtbot.waitUntil(lambda: not c.scene.objects, timeout=WAIT_MS)


def test_the_real_save_dialog_opens_in_the_last_folder_and_lists_the_recent_ones(qapp, tmp_path):
    """The default chooser (Qt's own dialog), answered by a timer: no modal wait is left open."""
    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtWidgets import QApplication, QLineEdit

    from studio.files import EXPORT_FORMATS, FileActions, format_for

    older, last = tmp_path / "older", tmp_path / "last"
    older.mkdir()
    last.mkdir()
    files = FileActions(None, None, QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    files._remember_export_dir(str(older))
    files._remember_export_dir(str(last))
    seen = {}

    def answer() -> None:
        dialog = QApplication.activeModalWidget()
        if dialog is None:  # not up yet
            QTimer.singleShot(50, answer)
            return
        seen.update(
            folder=dialog.directory().path(),
            history=dialog.history(),
            places={u.toLocalFile() for u in dialog.sidebarUrls()},
        )
        dialog.selectNameFilter(EXPORT_FORMATS[1][0])
        dialog.findChild(QLineEdit, "fileNameEdit").setText("part")
        dialog.accept()
        QTimer.singleShot(2000, lambda: QApplication.activeModalWidget() and dialog.reject())

    QTimer.singleShot(0, answer)
    path, chosen = files.save_chooser(
        None, "Export the scene", str(last), ";;".join(label for label, _, _ in EXPORT_FORMATS)
    )
    assert seen["folder"] == str(last) and seen["history"] == [str(last), str(older)]
    assert {str(last), str(older)} <= seen["places"]
    assert (path, chosen) == (str(last / "part"), EXPORT_FORMATS[1][0])
    assert format_for(path, chosen) == ("3mf", str(last / "part.3mf"))  # the filter's suffix
