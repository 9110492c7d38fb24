"""File → Export… and Import…: the scene to and from any path the person picks.

The worker never sees that path. An export is made in the sandbox workspace and copied out
by tools.trust.outbox (a fresh name, put in place without following anything planted at the
chosen one); an import is copied in with tools.trust.confined (the file and the side files it
names, regular files only, no link inside the folder followed) and then imported as the
person's own call, so it is one undo step and part of the demonstration. The chooser is
injectable so tests drive the real flow without a modal dialog.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from PySide6.QtCore import QObject, QUrl
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFileDialog

from studio.folders import remember, start_folder
from tools.errors import ToolError
from tools.text import printable_line
from tools.trust import confined
from tools.trust.outbox import MAX_IMPORT_BYTES, Outbox, export_path

# (filter shown in the dialog, export format, suffix); the first is the default
EXPORT_FORMATS = (
    ("glTF binary (*.glb)", "glb", ".glb"),
    ("3MF, for 3D printing (*.3mf)", "3mf", ".3mf"),
    ("STL (*.stl)", "stl", ".stl"),
    ("OBJ (*.obj)", "obj", ".obj"),
    ("STEP, CAD parts only (*.step *.stp)", "step", ".step"),
    ("Blender (*.blend)", "blend", ".blend"),
)
_BY_SUFFIX = {suffix: fmt for _, fmt, suffix in EXPORT_FORMATS} | {".stp": "step"}
IMPORT_FILTER = "3D files (*.glb *.gltf *.stl *.obj *.step *.stp *.blend)"
IMPORT_SUFFIXES = (".glb", ".gltf", ".stl", ".obj", ".step", ".stp", ".blend")
RECENT_KEY, IMPORT_KEY, MAX_RECENT = "files/export_dirs", "files/import_dir", 5
SANDBOX_DIR = "exports"  # in the worker's workspace: made there, then copied out

# chooser(parent, caption, start, filter) -> (path, chosen filter); "" when cancelled
Chooser = Callable[[Any, str, str, str], tuple[str, str]]


def format_for(path: str, chosen_filter: str = "") -> tuple[str, str]:
    """(format, path with its suffix) for a name the person typed: the suffix decides, else
    the filter they chose adds its suffix."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix in _BY_SUFFIX:
        return _BY_SUFFIX[suffix], path
    fmt, add = next(
        ((f, s) for label, f, s in EXPORT_FORMATS if label == chosen_filter), EXPORT_FORMATS[0][1:]
    )
    return fmt, path + add


_MTL_MAPS = ("map_", "bump", "disp", "decal", "refl", "norm")
_MAX_SCAN = 64 << 20  # a glTF's JSON or an OBJ/MTL read for the names it holds


def _text(folder: str, rel: str) -> str:
    return confined.read_file(folder, rel, _MAX_SCAN).decode("utf-8", "replace")


def side_files(folder: str, name: str) -> list[str]:
    """The files a .gltf or .obj in `folder` names (buffers, textures, material libraries),
    so that only they come in with it, not the rest of a Downloads folder. Read without
    following links; names that leave the folder are dropped here, and the worker refuses a
    file that still names them."""
    suffix = os.path.splitext(name)[1].lower()
    refs: set[str] = set()
    try:
        if suffix == ".gltf":
            doc = json.loads(_text(folder, name))
            for key in ("buffers", "images"):
                items = doc.get(key) if isinstance(doc, dict) else None
                for item in items if isinstance(items, list) else []:
                    uri = item.get("uri") if isinstance(item, dict) else None
                    if (
                        isinstance(uri, str)
                        and not uri.startswith("data:")
                        and not urlsplit(uri).scheme
                    ):
                        refs.add(unquote(urlsplit(uri).path))
        elif suffix == ".obj":
            for line in _text(folder, name).splitlines():
                word, _, rest = line.strip().partition(" ")
                if word != "mtllib" or not rest.strip():
                    continue
                for mtl in {rest.strip(), *rest.split()}:  # Blender reads the rest as one name
                    refs.add(mtl)
                    if confined.is_file(folder, mtl):
                        for mline in _text(folder, mtl).splitlines():
                            words = mline.split()
                            if len(words) > 1 and words[0].lower().startswith(_MTL_MAPS):
                                refs.add(words[-1])
    except (ToolError, ValueError):
        return []  # the worker reads the file itself and says what is wrong with it
    inside = (r for r in refs if r and not os.path.isabs(r) and ".." not in r.split("/"))
    return sorted(r for r in inside if r != name)


class FileActions(QObject):
    """The two menu actions and what they do; results land in the status bar (one line) or
    the error bar."""

    def __init__(
        self,
        parent,
        controller,
        settings,
        save_chooser: Chooser | None = None,
        open_chooser: Chooser | None = None,
    ) -> None:
        super().__init__(parent)
        self.parent_widget, self.controller, self.settings = parent, controller, settings
        self.save_chooser = save_chooser or self._save_dialog
        self.open_chooser = open_chooser or QFileDialog.getOpenFileName
        self.export_action = QAction("Export...", parent)
        self.export_action.setShortcut(QKeySequence("Ctrl+E"))
        self.export_action.setToolTip("Export the scene to a file you choose (glb, 3mf, stl, ...)")
        self.export_action.triggered.connect(self.export_dialog)
        self.import_action = QAction("Import...", parent)
        self.import_action.setShortcut(QKeySequence("Ctrl+I"))
        self.import_action.setToolTip("Import objects from a file you choose")
        self.import_action.triggered.connect(self.import_dialog)

    # -- remembered folders ------------------------------------------------------------------
    def recent_export_dirs(self) -> list[str]:
        value = self.settings.value(RECENT_KEY, [], type=list)
        return [str(v) for v in value if v]

    def _remember_export_dir(self, folder: str) -> None:
        dirs = [folder, *(d for d in self.recent_export_dirs() if d != folder)][:MAX_RECENT]
        self.settings.setValue(RECENT_KEY, dirs)

    def _save_dialog(self, parent, caption: str, start: str, filters: str) -> tuple[str, str]:
        """Qt's save dialog, the recent export folders in its sidebar and history."""
        dialog = QFileDialog(parent, caption, start, filters)
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)  # asks before replacing a file
        recent = [d for d in self.recent_export_dirs() if os.path.isdir(d)]
        dialog.setHistory(recent)
        places = dialog.sidebarUrls()
        dialog.setSidebarUrls(
            [*places, *(u for u in map(QUrl.fromLocalFile, recent) if u not in places)]
        )
        if dialog.exec() != QFileDialog.DialogCode.Accepted or not dialog.selectedFiles():
            return "", ""
        return dialog.selectedFiles()[0], dialog.selectedNameFilter()

    # -- export ----------------------------------------------------------------------------
    def export_dialog(self) -> None:
        start = start_folder(self.parent_widget, self.settings, next(iter(self.recent_export_dirs()), None))
        path, chosen = self.save_chooser(
            self.parent_widget,
            "Export the scene",
            start,
            ";;".join(label for label, _, _ in EXPORT_FORMATS),
        )
        if path:
            remember(self.settings, path)
            self.export_to(path, chosen)

    def export_to(self, path: str, chosen_filter: str = "") -> None:
        """Export every object to `path` (any folder the person may write)."""
        fmt, path = format_for(os.path.abspath(os.path.expanduser(path)), chosen_filter)
        folder, name = os.path.split(path)
        suffix = os.path.splitext(name)[1].lower()
        args = {"format": fmt, "path": f"{SANDBOX_DIR}/scene{suffix}"}

        def run(session: Any) -> str:
            result = session.call("export", args)
            if not result.ok:
                raise result.error
            n = len(result.output.get("objects", []))
            delivered = Outbox(folder).take(session.workspace, export_path(args), name)
            return f"Exported {n} object{'s' if n != 1 else ''} to {delivered}"

        def done(message: str) -> None:
            self._remember_export_dir(folder)
            self.controller.sig_status.emit(printable_line(message))

        self.controller.worker.submit(
            run, f"export {fmt}", on_done=done, on_error=lambda e: self._failed("Export", path, e)
        )

    # -- import ----------------------------------------------------------------------------
    def import_dialog(self) -> None:
        start = start_folder(self.parent_widget, self.settings, str(self.settings.value(IMPORT_KEY, "") or ""))
        path, _ = self.open_chooser(
            self.parent_widget, "Import objects from", start, f"{IMPORT_FILTER};;All files (*)"
        )
        if path:
            remember(self.settings, path)
            self.import_from(path)

    def import_from(self, path: str) -> None:
        """Copy `path` (and a glTF's or OBJ's side files) into the sandbox, then import it as
        the person's call."""
        # the file the person picked is theirs, links included; nothing in the folder is followed
        real = os.path.realpath(os.path.expanduser(path))
        folder, name = os.path.split(real)
        if os.path.splitext(name)[1].lower() not in IMPORT_SUFFIXES:
            self.controller.sig_error.emit(
                printable_line(f"Cannot import {path}: use one of {', '.join(IMPORT_SUFFIXES)}")
            )
            return

        def stage(session: Any) -> dict:
            budget = MAX_IMPORT_BYTES
            for rel in [name, *side_files(folder, name)]:
                try:
                    data = confined.read_file(folder, rel, budget)
                except ToolError:
                    if rel == name:
                        raise
                    continue  # a missing texture: the importer says what it lacks
                budget -= len(data)
                confined.write_file(session.workspace, rel, data)
            return {"path": name}

        def imported(result: Any) -> None:
            if result is not None and result.ok:
                n = len(result.output.get("imported", []))
                self.controller.sig_status.emit(
                    printable_line(f"Imported {n} object{'s' if n != 1 else ''} from {real}")
                )

        def staged(args: dict) -> None:
            self.settings.setValue(IMPORT_KEY, folder)
            self.controller.send("import_file", args, origin="human", on_done=imported)

        self.controller.worker.submit(
            stage,
            "stage an import",
            on_done=staged,
            on_error=lambda e: self._failed("Import", real, e),
        )

    def _failed(self, what: str, path: str, error: BaseException) -> None:
        why = error.message if isinstance(error, ToolError) else str(error) or type(error).__name__
        self.controller.sig_error.emit(printable_line(f"{what} of {path} failed: {why}"))
