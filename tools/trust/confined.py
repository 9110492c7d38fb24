"""Files the trusted side reads from, or writes into, a folder a worker can write.

A worker's workspace and scratch are hostile ground: the code that ran there may have planted
a symlink (`final.png -> ~/.bashrc`), a symlinked folder, a FIFO that blocks a reader forever
or a device node. Every path is therefore walked one component at a time from a folder
descriptor with O_NOFOLLOW (openat-style), so no link is ever followed, and only regular files
are read (opened by O_PATH first and checked with fstat, so a FIFO or a device is never even
opened for reading). Writes go to a fresh name made with O_EXCL and are renamed over the final
name inside the same folder descriptor: a link planted there is replaced, never followed.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

from tools.errors import ErrorKind, ToolError

MAX_FILE_BYTES = 1 << 30  # one file taken out of a workspace: 1 GiB
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class ConfinedPathError(ToolError):
    """A path that leaves its folder, goes through a link, or is not a regular file."""

    def __init__(self, message: str):
        super().__init__(ErrorKind.SANDBOX, message)


def _parts(rel: str | os.PathLike) -> list[str]:
    rel = os.fspath(rel)
    if "\0" in rel:
        raise ConfinedPathError("path contains a NUL byte")
    if os.path.isabs(rel):
        raise ConfinedPathError(f"{rel!r} is absolute; give a path inside the folder")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ConfinedPathError(f"{rel!r} does not name a file inside the folder")
    return parts


def _open_root(root: str | os.PathLike) -> int:
    try:
        return os.open(os.fspath(root), _DIR_FLAGS)
    except OSError as e:
        raise ConfinedPathError(f"{os.fspath(root)} is not a plain folder ({e.strerror})") from None


@contextmanager
def parent_dir(root: str | os.PathLike, rel: str | os.PathLike,
               create: bool = False) -> Iterator[tuple[int, str]]:
    """(descriptor of the folder holding `rel`, its last name), reached without following a
    link; `create` makes missing folders on the way."""
    parts = _parts(rel)
    fd = _open_root(root)
    try:
        for name in parts[:-1]:
            try:
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise ConfinedPathError(f"no folder {name!r} on the way to {os.fspath(rel)!r}") from None
                os.mkdir(name, 0o755, dir_fd=fd)
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as e:  # ELOOP: a symlink; ENOTDIR: a file where a folder should be
                raise ConfinedPathError(f"{os.fspath(rel)!r}: {name!r} is not a plain folder "
                                        f"({e.strerror}); links are never followed") from None
            os.close(fd)
            fd = nfd
        yield fd, parts[-1]
    finally:
        os.close(fd)


def _open_regular(dfd: int, name: str, shown: str) -> int:
    """A read descriptor of a regular file `name` in `dfd`; links, FIFOs, devices refused."""
    try:
        pfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except FileNotFoundError:
        raise ConfinedPathError(f"no file {shown!r}") from None
    except OSError as e:
        raise ConfinedPathError(f"cannot open {shown!r}: {e.strerror}") from None
    try:
        st = os.fstat(pfd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a regular file"
            raise ConfinedPathError(f"{shown!r} is {kind}; only regular files are taken out")
        # Reopen the very inode checked above (the name may have changed since).
        fd = os.open(f"/proc/self/fd/{pfd}", os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY)
    finally:
        os.close(pfd)
    st2 = os.fstat(fd)
    if (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(st2.st_mode):
        os.close(fd)
        raise ConfinedPathError(f"{shown!r} changed while it was opened")
    return fd


@contextmanager
def open_file(root: str | os.PathLike, rel: str | os.PathLike,
              max_bytes: int = MAX_FILE_BYTES) -> Iterator[BinaryIO]:
    """A regular file inside `root`, opened for reading without following any link."""
    with parent_dir(root, rel) as (dfd, name):
        fd = _open_regular(dfd, name, os.fspath(rel))
    f = os.fdopen(fd, "rb")
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise ConfinedPathError(f"{os.fspath(rel)!r} is {size} bytes, over the {max_bytes}-byte cap")
        yield f
    finally:
        f.close()


def read_file(root: str | os.PathLike, rel: str | os.PathLike,
              max_bytes: int = MAX_FILE_BYTES) -> bytes:
    with open_file(root, rel, max_bytes) as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:  # grew after the size check
        raise ConfinedPathError(f"{os.fspath(rel)!r} is over the {max_bytes}-byte cap")
    return data


def is_file(root: str | os.PathLike, rel: str | os.PathLike) -> bool:
    """True if `rel` is a regular file reached without links (a cheap existence check)."""
    try:
        with parent_dir(root, rel) as (dfd, name):
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except (ConfinedPathError, OSError):
        return False
    return stat.S_ISREG(st.st_mode)


def copy_file(root: str | os.PathLike, rel: str | os.PathLike, dest: str | os.PathLike,
              max_bytes: int = MAX_FILE_BYTES) -> int:
    """Copy a regular file from inside `root` to `dest` (a trusted path); returns its size."""
    n = 0
    with open_file(root, rel, max_bytes) as src, open(dest, "wb") as dst:
        while chunk := src.read(1 << 20):
            n += len(chunk)
            if n > max_bytes:
                raise ConfinedPathError(f"{os.fspath(rel)!r} is over the {max_bytes}-byte cap")
            dst.write(chunk)
    return n


@contextmanager
def create_file(root: str | os.PathLike, rel: str | os.PathLike) -> Iterator[BinaryIO]:
    """A new regular file at `rel` inside `root` (folders made on the way), already under its
    name when the block starts; whatever was at that name (a link included) is replaced."""
    with parent_dir(root, rel, create=True) as (dfd, name):
        tmp = f".mw-{secrets.token_hex(6)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o644, dir_fd=dfd)
        try:
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except OSError as e:
            os.close(fd)
            os.unlink(tmp, dir_fd=dfd)
            raise ConfinedPathError(f"cannot write {os.fspath(rel)!r}: {e.strerror}") from None
    with os.fdopen(fd, "wb") as f:
        yield f


def write_file(root: str | os.PathLike, rel: str | os.PathLike, data: bytes) -> None:
    with create_file(root, rel) as f:
        f.write(data)


def remove_file(root: str | os.PathLike, rel: str | os.PathLike) -> None:
    """Remove the name `rel` (a link is removed, not what it points to); missing is fine."""
    try:
        with parent_dir(root, rel) as (dfd, name):
            os.unlink(name, dir_fd=dfd)
    except (FileNotFoundError, ConfinedPathError):
        pass
    except IsADirectoryError:
        raise ConfinedPathError(f"{os.fspath(rel)!r} is a folder") from None


def open_append(root: str | os.PathLike, rel: str | os.PathLike) -> BinaryIO:
    """The regular file `rel` inside `root` opened to append (a log), created if missing.
    Whatever else was planted at that name (a link, a FIFO, a folder) is replaced by a new
    empty file, never followed and never waited on (O_NONBLOCK: opening a FIFO to write
    would block until a reader comes, which may be never)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    with parent_dir(root, rel) as (dfd, name):
        try:
            fd: int | None = os.open(name, flags, 0o600, dir_fd=dfd)
        except OSError:  # ELOOP: a link; ENXIO: a FIFO nobody reads; EISDIR: a folder
            fd = None
        if fd is not None and not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            fd = None
        if fd is None:
            try:
                if stat.S_ISDIR(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode):
                    shutil.rmtree(name, dir_fd=dfd)
                else:
                    os.unlink(name, dir_fd=dfd)
                fd = os.open(name, flags | os.O_EXCL, 0o600, dir_fd=dfd)
            except OSError as e:
                raise ConfinedPathError(f"cannot open {os.fspath(rel)!r} to append: "
                                        f"{e.strerror}") from None
    os.set_blocking(fd, True)  # a regular file: the flag only mattered for the open
    return os.fdopen(fd, "ab")
