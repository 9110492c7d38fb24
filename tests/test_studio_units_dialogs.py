"""Units and file dialogs (issue #50), offscreen on the real tool runtime. View → Units
changes only what is shown: the palette's lengths stay in the unit each label names, so
"1, 1, 1" in a palette labelled metres makes a 1 m cube while the studio shows mm. Every
file dialog (Export, Import, Save, Open) starts in the open project's folder, else in the
folder last used."""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # these tests never need a display

import pytest  # noqa: E402
from studio_support import WAIT_MS, fresh_scene, send_ok, studio_window  # noqa: E402

from studio.outliner.units_menu import set_units  # noqa: E402


@pytest.fixture(scope="module")
def studio(qapp, worker_pool, tmp_path_factory, request):
    with studio_window(worker_pool, tmp_path_factory.mktemp("units"), request) as window:
        yield window


@pytest.fixture
def fresh(studio, qtbot):
    return fresh_scene(studio, qtbot)


def rows(w) -> dict[str, str]:
    t = w.outliner.tree
    return {t.topLevelItem(i).text(0): t.topLevelItem(i).text(2) for i in range(t.topLevelItemCount())}


def test_units_change_what_is_shown_never_what_is_typed(fresh, qtbot):
    w, c = fresh, fresh.controller
    set_units(c.scene, w.settings, "mm", w.units_menu)
    try:
        form = w.palette.select("add_primitive")
        assert form.lengths["dimensions"][1].text().startswith("dimensions (m)")
        assert "metres (m)" in w.palette.units_note.text()
        result = send_ok(qtbot, w, "add_primitive", kind="cube", name="Metre", dimensions="1, 1, 1")
        assert result.args["dimensions"] == [1.0, 1.0, 1.0]  # sent as typed: a 1 m cube
        qtbot.waitUntil(lambda: "Metre" in rows(w), timeout=WAIT_MS)
        assert c.scene.get("Metre")["dimensions"] == pytest.approx([1.0, 1.0, 1.0])
        assert rows(w)["Metre"] == "1000 × 1000 × 1000 mm"  # shown in the chosen unit
        assert form.fields["dimensions"].text() == "1, 1, 1"  # the form keeps what was typed

        set_units(c.scene, w.settings, "m", w.units_menu)  # and a mm tool stays in mm
        cad = w.palette.select("cad_box")
        assert cad.lengths["length"][1].text().startswith("length (mm)")
        assert "millimetres (mm)" in w.palette.units_note.text()
        result = send_ok(qtbot, w, "cad_box", name="Plate", length="100", width="70", height="10")
        assert (result.args["length"], result.args["width"], result.args["height"]) == (100, 70, 10)
        qtbot.waitUntil(lambda: "Plate" in rows(w), timeout=WAIT_MS)
        assert rows(w) == {"Metre": "1 × 1 × 1 m", "Plate": "0.1 × 0.07 × 0.01 m"}
        assert w.palette.select("add_primitive").fields["dimensions"].text() == "1, 1, 1"
    finally:
        set_units(c.scene, w.settings, "auto", w.units_menu)


def test_file_dialogs_start_in_the_projects_folder_else_the_last_used(fresh, qtbot, tmp_path):
    from studio.files import IMPORT_KEY, RECENT_KEY
    from studio.folders import remember
    from studio.project.manager import RECENT_KEY as PROJECTS_KEY

    w = fresh
    for key in (RECENT_KEY, IMPORT_KEY, PROJECTS_KEY):
        w.settings.remove(key)
    last = tmp_path / "last"
    last.mkdir()
    remember(w.settings, str(last / "chosen.glb"))  # a dialog's choice, earlier
    seen: dict[str, str] = {}

    def chooser(kind, answer=""):
        def choose(parent, caption, start, filters):
            seen[kind] = start
            return answer, ""
        return choose

    w.files.save_chooser, w.files.open_chooser = chooser("export"), chooser("import")
    w.project.save_chooser, w.project.open_chooser = chooser("save"), chooser("open")

    def ask_all() -> dict[str, str]:
        seen.clear()
        w.files.export_dialog()
        w.files.import_dialog()
        assert not w.project.save_as()  # (cancelled: the chooser answers "")
        w.project.open_dialog()
        return dict(seen)

    # an Untitled scene: the folder last used, not the home folder
    assert ask_all() == {"export": str(last), "import": str(last),
                         "save": str(last / "Untitled.mwproj"), "open": str(last)}

    # a project is open: its folder, for every dialog
    work = tmp_path / "work"
    work.mkdir()
    send_ok(qtbot, w, "add_primitive", kind="cube", name="Box", dimensions="1, 1, 1")
    w.project.save_chooser = chooser("save", str(work / "model.mwproj"))
    assert w.project.save_as()
    qtbot.waitUntil(lambda: w.project.path == work / "model.mwproj" and not w.project.modified,
                    timeout=WAIT_MS)
    assert seen["save"] == str(last / "Untitled.mwproj")
    w.project.save_chooser = chooser("save")
    assert ask_all() == {"export": str(work), "import": str(work),
                         "save": str(work / "model.mwproj"), "open": str(work)}
