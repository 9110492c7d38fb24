"""Atomic file writes: a file either exists complete under its final name or not at all.

Write to a hidden temp file in the same folder, fsync it, rename it over the final name and
fsync the folder, so that after a crash (kill -9, power loss) no half-written file is
visible under a real name. Leftover temp files carry TEMP_MARK and are swept by the store.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import BinaryIO

TEMP_MARK = ".mwtmp-"


def is_temp_name(name: str) -> bool:
    return name.startswith(TEMP_MARK)


def fsync_dir(path: Path) -> None:
    """Persist a rename/creation inside `path` (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _temp_path(final: Path) -> Path:
    return final.with_name(f"{TEMP_MARK}{final.name}.{os.getpid()}.{secrets.token_hex(4)}")


def atomic_write_bytes(final: Path, data: bytes, *, durable: bool = True) -> None:
    """Write `data` to `final` atomically; `durable` also survives power loss (two fsyncs).
    Without it the write still survives the writer being killed: the kernel keeps the pages."""
    tmp = _temp_path(final)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(final.parent)


def atomic_copy_file(source: Path, final: Path) -> None:
    """Copy `source` to `final` atomically (streamed, so large artifacts do not sit in memory)."""
    # Never through a link, never a FIFO or device: sources may come from another store.
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{source} is not a regular file")
    with os.fdopen(fd, "rb") as src:
        atomic_write_stream(final, src)


def atomic_write_stream(final: Path, src: BinaryIO) -> None:
    """Write what `src` reads to `final` atomically and durably, 1 MiB at a time."""
    tmp = _temp_path(final)
    try:
        with open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(final.parent)


def sweep_temp_files(folder: Path) -> int:
    """Remove temp files a dead writer left under `folder`; returns how many."""
    removed = 0
    if not folder.is_dir():
        return 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            if is_temp_name(name):
                Path(root, name).unlink(missing_ok=True)
                removed += 1
    return removed
