"""Where the studio's file dialogs open: the open project's folder, else the folder this
dialog last used, else the last folder any of them used, else the home folder. Every dialog
(Save, Open, Export, Import, a viewport screenshot, an episode export) asks here and tells
here what the person chose."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

LAST_DIR_KEY = "files/last_dir"


def project_folder(window: Any) -> str | None:
    """The open project's folder (None for an Untitled scene)."""
    path = getattr(getattr(window, "project", None), "path", None)
    return str(Path(path).parent) if path else None


def start_folder(window: Any, settings: Any, own: str | None = None) -> str:
    """The folder a dialog opens in; `own`: the folder this kind of dialog used last."""
    last = str(settings.value(LAST_DIR_KEY, "") or "") if settings is not None else ""
    for folder in (project_folder(window), own, last):
        if folder and os.path.isdir(folder):
            return folder
    return str(Path.home())


def remember(settings: Any, chosen: str) -> None:
    """A path the person chose (a file or a folder): its folder is the next dialog's fallback."""
    if settings is None or not chosen:
        return
    folder = chosen if os.path.isdir(chosen) else os.path.dirname(os.path.abspath(chosen))
    settings.setValue(LAST_DIR_KEY, folder)
