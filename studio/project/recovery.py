"""Crash recovery: where a running studio keeps its recovery copy, how the next start finds the
copies of studios that are gone, and the bar that offers one.

Each running studio owns a slot, `DATA/autosave/<id>/`, holding `autosave.mwproj` (the open
scene as a project), `origin.json` (the project it came from, if any) and `lock`, a file it
holds an exclusive `flock` on for as long as it runs. The kernel drops that lock however the
process ends, kill -9 included, so at the next start a slot whose lock can be taken and that
holds a copy is work nobody saved or discarded: it is offered. A clean close (after Save or
Discard, or with nothing changed) removes the slot, so nothing is offered after it. Two
studios on one data folder each have their own slot and never offer each other's.

The offer is a bar above the viewport, never a dialog: a scripted or unattended start must
not wait on it (`modelwright studio --recover yes|no` answers it from the command line).
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton

from studio.project.archive import SUFFIX

COPY_NAME = "autosave" + SUFFIX
ORIGIN_NAME = "origin.json"
LOCK_NAME = "lock"


class AutosaveSlot:
    """This studio's recovery copy: `path` is where the autosave writes it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.folder = self.root / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{secrets.token_hex(3)}"
        self.folder.mkdir(parents=True, exist_ok=True)
        # held until this process ends, however it ends (O_CLOEXEC: no worker inherits it)
        self._lock = os.open(self.folder / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)

    @property
    def path(self) -> Path:
        return self.folder / COPY_NAME

    def note_origin(self, project: Path | None) -> None:
        """Which project the copy is of (recovered into that path again), or none."""
        origin = self.folder / ORIGIN_NAME
        if project is None:
            origin.unlink(missing_ok=True)
        else:
            tmp = origin.with_suffix(".tmp")
            tmp.write_text(json.dumps({"project": str(project)}))
            os.replace(tmp, origin)

    def clear(self) -> None:
        """The scene was saved or discarded: no copy to offer any more."""
        for name in (COPY_NAME, ORIGIN_NAME):
            (self.folder / name).unlink(missing_ok=True)

    def close(self) -> None:
        """A clean exit: the slot goes, the lock with it."""
        shutil.rmtree(self.folder, ignore_errors=True)
        try:
            os.close(self._lock)
        except OSError:
            pass


def orphans(root: Path) -> list[Path]:
    """The recovery copies of studios that are gone (newest first): slots whose lock nobody
    holds, and the single `autosave.mwproj` earlier versions wrote directly under `root`."""
    root = Path(root)
    found: list[Path] = []
    legacy = root / COPY_NAME
    if legacy.is_file():
        found.append(legacy)
    for folder in root.iterdir() if root.is_dir() else ():
        copy = folder / COPY_NAME
        if folder.is_dir() and not folder.is_symlink() and copy.is_file() and _unheld(folder / LOCK_NAME):
            found.append(copy)
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def _unheld(lock: Path) -> bool:
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return True  # never locked: a studio that died before it made its lock file
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # a running studio's
    finally:
        os.close(fd)  # (closing drops the lock just taken)
    return True


def origin_of(copy: Path) -> Path | None:
    """The project a recovery copy was made from, when it had one."""
    try:
        project = json.loads((copy.parent / ORIGIN_NAME).read_text()).get("project")
    except (OSError, ValueError, AttributeError):
        return None
    return Path(project) if isinstance(project, str) and project else None


def forget(copy: Path) -> None:
    """A recovery copy dealt with (recovered into this studio, or discarded)."""
    if copy.parent.name and (copy.parent / LOCK_NAME).exists():
        shutil.rmtree(copy.parent, ignore_errors=True)
    else:
        copy.unlink(missing_ok=True)


class RecoveryBanner(QFrame):
    """The offer: Recover opens the copy (as a modified scene, under its project's name when
    it had one); Discard deletes it."""

    def __init__(self, window, copy: Path, recover: Callable[[Path], object],
                 discard: Callable[[Path], object]) -> None:
        super().__init__()
        self.setObjectName("recoverybar")
        self.path, self._recover, self._discard = copy, recover, discard
        origin = origin_of(copy)
        when = time.strftime("%H:%M on %d %b", time.localtime(copy.stat().st_mtime))
        what = f"your changes to {origin.name}" if origin else "an unsaved scene"
        self.text = QLabel(f"The studio stopped without saving last time. Recover {what} "
                           f"(autosaved at {when})?")
        self.text.setWordWrap(True)
        self.recover_button = QPushButton("Recover")
        self.recover_button.setObjectName("accent")
        self.recover_button.clicked.connect(self.recover)
        self.discard_button = QPushButton("Discard")
        self.discard_button.setToolTip("Delete the autosaved copy")
        self.discard_button.clicked.connect(self.discard)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 8, 4)
        row.addWidget(self.text, 1)
        row.addWidget(self.recover_button)
        row.addWidget(self.discard_button)
        window.centralWidget().layout().insertWidget(0, self)

    def recover(self) -> None:
        self.hide()
        self._recover(self.path)

    def discard(self) -> None:
        self.hide()
        self._discard(self.path)
