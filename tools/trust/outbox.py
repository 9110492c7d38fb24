"""The one writer into a person's folder (`--out`, `--workspace`, `--image`, eval renders).

No worker ever sees such a folder: it works in its private scratch, and what a command
delivers is copied out by the trusted side after the call, through here. tools.trust.confined is
for folders a worker can write (its scratch), where whatever was planted at a name may be
replaced; a person's folder has the opposite rule, so this is a module of its own:
- files are written only to a fresh name made with O_CREAT|O_EXCL|O_NOFOLLOW inside a folder
  reached by descriptor without following any link, then put in place: linkat (which fails
  on anything already at the name, a dangling link included) or, over a regular file only,
  renameat. Nothing is ever opened at the final name, so no link or FIFO there is followed;
- a name held by anything but a regular file (a link, a FIFO, a folder, a device) is refused
  with one line and left as it was; nothing in the folder is deleted (but our own temp
  file) and nothing is chowned;
- what comes from a worker has its size capped and its type checked by the suffix it is
  delivered under (a PNG is decoded under a pixel cap read from its header first, and
  written anew; a .step must look like STEP, and so on).
The user's folder itself is resolved once (links in the path a person typed are theirs).
"""

from __future__ import annotations

import codecs
import dataclasses
import json
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from tools.errors import ErrorKind, ToolError
from tools.results import ToolResult
from tools.trust import confined, images

MAX_OUT_BYTES = 1 << 30  # one delivered file: 1 GiB
_TEMP = ".mw-out-"
# by suffix: leading bytes a file must start with (None: text, UTF-8 without NUL bytes)
_SIGNATURES: dict[str, tuple[bytes, ...] | None] = {
    ".glb": (b"glTF",), ".blend": (b"BLENDER",), ".step": (b"ISO-10303-21",),
    ".stp": (b"ISO-10303-21",), ".mwproj": (b"PK\x03\x04",),  # a studio project: a zip
    ".gltf": None, ".obj": None, ".mtl": None, ".json": None,
    ".jsonl": None, ".txt": None,
    ".3mf": (b"PK\x03\x04",),  # a zip holding the mesh model
    ".gguf": (b"GGUF",),  # an exported agent (agents/models/export.py)
}
_STL_BINARY_HEAD = 84  # 80-byte header and a triangle count; 50 bytes per triangle follow


class OutboxError(ToolError):
    """A file that cannot be delivered: its name is taken by a non-file, or its content is
    not what its suffix says."""

    def __init__(self, message: str):
        super().__init__(ErrorKind.SANDBOX, message)


def _what(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return "a device or socket" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode) \
        else "not a regular file"


class _TypeCheck:
    """The content check for one suffix, fed chunk by chunk (a delivery is streamed)."""

    def __init__(self, shown: str, text: bool = False):
        self.shown = shown
        suffix = ".txt" if text else os.path.splitext(shown)[1].lower()
        if suffix not in _SIGNATURES and suffix != ".stl":
            raise OutboxError(f"{shown!r}: files ending {suffix or 'without a suffix'!r} are not "
                              f"delivered (only {', '.join(sorted({*_SIGNATURES, '.stl'}))})")
        self.suffix = suffix
        self.head = b""
        self.size = 0
        self.text = codecs.getincrementaldecoder("utf-8")() if _SIGNATURES.get(suffix, 0) is None \
            and suffix != ".stl" else None

    def feed(self, chunk: bytes) -> None:
        if len(self.head) < 128:
            self.head += chunk[: 128 - len(self.head)]
        self.size += len(chunk)
        if self.text is not None:
            if b"\0" in chunk:
                raise OutboxError(f"{self.shown!r} should be text but holds NUL bytes; not delivered")
            try:
                self.text.decode(chunk)
            except UnicodeDecodeError:
                raise OutboxError(f"{self.shown!r} should be UTF-8 text but is not; not delivered") from None

    def done(self) -> None:
        if self.text is not None:
            try:
                self.text.decode(b"", final=True)
            except UnicodeDecodeError:
                raise OutboxError(f"{self.shown!r} ends inside a UTF-8 character; not delivered") from None
            return
        if self.suffix == ".stl":
            ascii_stl = self.head.lstrip().startswith(b"solid")
            n = int.from_bytes(self.head[80:84], "little") if self.size >= _STL_BINARY_HEAD else -1
            if not ascii_stl and self.size != _STL_BINARY_HEAD + 50 * n:
                raise OutboxError(f"{self.shown!r} is not an STL file; not delivered")
            return
        if not self.head.startswith(_SIGNATURES[self.suffix]):  # type: ignore[arg-type]
            raise OutboxError(f"{self.shown!r} is not a {self.suffix[1:]} file; not delivered")


class Outbox:
    """Writes into one person's folder, made if missing."""

    def __init__(self, folder: str | os.PathLike, max_bytes: int = MAX_OUT_BYTES):
        # The one place a path the person typed is followed: the folder they named.
        self.root = Path(os.path.realpath(os.fspath(folder)))
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OutboxError(f"cannot use {os.fspath(folder)} as an output folder: "
                              f"{e.strerror or e}") from None
        if not self.root.is_dir():
            raise OutboxError(f"{os.fspath(folder)} is not a folder")
        self.max_bytes = max_bytes

    @contextmanager
    def _new(self, rel: str, early: bool) -> Iterator[BinaryIO]:
        """A fresh regular file of ours, put at `rel` after the block (`early`: before it, so a
        log written as it goes survives a crash). A failed block leaves the folder as it was."""
        with confined.parent_dir(self.root, rel, create=True) as (dfd, name):
            tmp = f"{_TEMP}{secrets.token_hex(8)}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o644, dir_fd=dfd)
            f = os.fdopen(fd, "wb")
            placed = False
            try:
                if early:
                    self._place(dfd, tmp, name, rel)
                    placed = True
                yield f
                f.close()
                if not placed:
                    self._place(dfd, tmp, name, rel)
                    placed = True
            finally:
                f.close()
                if not placed:
                    try:
                        os.unlink(tmp, dir_fd=dfd)
                    except FileNotFoundError:
                        pass

    def _place(self, dfd: int, tmp: str, name: str, rel: str) -> None:
        try:
            os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
        except FileExistsError:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                raise OutboxError(f"{self.root / rel} is {_what(st.st_mode)}; it was left as it is "
                                  "and nothing was written there") from None
            # a regular file of the person's, e.g. the last run's: replaced by name, never opened
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            return
        except OSError:  # a filesystem without hard links: the same check, then rename
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise OutboxError(f"{self.root / rel} is {_what(st.st_mode)}; it was left as it is "
                                  "and nothing was written there") from None
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            return
        os.unlink(tmp, dir_fd=dfd)

    def write(self, rel: str, data: bytes, png: bool = False) -> Path:
        """`data` as the file `rel`, checked against its suffix (a PNG, or any name with
        `png`, decoded under the pixel cap and written anew)."""
        if len(data) > self.max_bytes:
            raise OutboxError(f"{rel!r} is {len(data)} bytes, over the {self.max_bytes}-byte cap")
        if png or rel.lower().endswith(".png"):
            data = images.reencode_png(data)
        else:
            check = _TypeCheck(rel)
            check.feed(data)
            check.done()
        with self._new(rel, early=False) as f:
            f.write(data)
        return self.root / rel

    def save_text(self, rel: str, text: str) -> Path:
        """The trusted side's own text, under any name (a report the person named)."""
        data = text.encode()
        if len(data) > self.max_bytes:
            raise OutboxError(f"{rel!r} is {len(data)} bytes, over the {self.max_bytes}-byte cap")
        _TypeCheck(rel, text=True).feed(data)
        with self._new(rel, early=False) as f:
            f.write(data)
        return self.root / rel

    def write_json(self, rel: str, value, **dump) -> Path:
        return self.save_text(rel, json.dumps(value, **dump))

    @contextmanager
    def log(self, rel: str) -> Iterator[BinaryIO]:
        """A text log written as it goes (the trusted side's own lines, e.g. results.jsonl)."""
        _TypeCheck(rel, text=True)
        with self._new(rel, early=True) as f:
            yield f

    def take(self, src_root: str | os.PathLike, src_rel: str, rel: str | None = None) -> Path:
        """Copy the regular file `src_rel` of a worker's folder (read with tools.trust.confined: no
        link followed, no FIFO opened) to `rel` here, under the size cap and type check."""
        rel = rel or src_rel
        if rel.lower().endswith(".png"):
            return self.write(rel, confined.read_file(src_root, src_rel, images.MAX_PNG_BYTES))
        check = _TypeCheck(rel)
        with confined.open_file(src_root, src_rel, self.max_bytes) as src, \
                self._new(rel, early=False) as dst:
            while chunk := src.read(1 << 20):
                check.feed(chunk)
                if check.size > self.max_bytes:
                    raise OutboxError(f"{src_rel!r} is over the {self.max_bytes}-byte cap")
                dst.write(chunk)
            check.done()
        return self.root / rel


# -- a person's folder beside a session: files in for import_file, exports out ------------------
MAX_IMPORT_BYTES = 512 << 20  # what one import_file brings into the scratch, all files together
_EXPORT_SUFFIX = {"glb": ".glb", "blend": ".blend", "stl": ".stl", "obj": ".obj", "step": ".step",
                  "3mf": ".3mf"}
_WITH_SIDE_FILES = (".gltf", ".obj")  # their buffers, .mtl and textures lie beside them


def export_path(args: dict) -> str:
    """Where the export tool writes for these (validated) args: the worker's own rule, kept
    here so the name delivered is the one asked for, not one a worker's reply claims."""
    path, fmt = str(args["path"]), str(args["format"])
    suffix = _EXPORT_SUFFIX[fmt]
    if path.lower().endswith(suffix) or fmt == "step" and path.lower().endswith(".stp"):
        return path
    return path + suffix


def import_names(root: str | os.PathLike, rel: str) -> list[str]:
    """The files an `import_file` of `rel` reads, relative to `root`: `rel` itself and, for
    `.gltf`/`.obj`, the regular files beside it (its buffers, .mtl and textures). Listed
    without following a link; raises ConfinedPathError/OSError if `rel` cannot be reached."""
    names = [rel]
    if rel.lower().endswith(_WITH_SIDE_FILES):
        folder = os.path.dirname(rel)
        with confined.parent_dir(root, rel) as (dfd, last):
            side = sorted(n for n in os.listdir(dfd) if n != last and not n.startswith(_TEMP)
                          and stat.S_ISREG(os.stat(n, dir_fd=dfd, follow_symlinks=False).st_mode))
        names += [os.path.join(folder, n) for n in side]
    return names


class UserFolder:
    """A person's folder used with a session whose worker never sees it: a file named in an
    `import_file` call is copied into the scratch workspace before the call (regular files
    only, no links, capped), and an `export` is copied out through the Outbox after it."""

    def __init__(self, folder: str | os.PathLike):
        self.outbox = Outbox(folder)
        self.root = self.outbox.root

    def before(self, workspace: str | os.PathLike, tool: str, args):
        """Stage what `tool` will read; returns the args to call it with (a path inside the
        person's folder made relative); raises ToolError (one line) if it cannot."""
        if tool != "import_file" or not isinstance(args, dict) or not isinstance(args.get("path"), str):
            return args
        rel = args["path"]
        if os.path.isabs(rel):  # a path inside the person's folder, as they see it
            inside = os.path.relpath(os.path.realpath(rel), self.root)
            if inside == ".." or inside.startswith("../"):
                raise OutboxError(f"{rel!r} is outside {self.root}; import files from that folder")
            rel = inside
        try:
            names = import_names(self.root, rel)
            budget = MAX_IMPORT_BYTES
            for name in names:
                data = confined.read_file(self.root, name, budget)
                budget -= len(data)
                confined.write_file(workspace, name, data)
        except OSError as e:
            raise OutboxError(f"cannot bring {rel!r} in from {self.root}: {e.strerror or e}") from None
        return {**args, "path": rel}

    def after(self, workspace: str | os.PathLike, tool: str, args) -> str | None:
        """Deliver what `tool` wrote; the one-line reason it could not be, else None."""
        if tool != "export":
            return None
        rel = export_path(args)
        try:
            self.outbox.take(workspace, rel)
        except ToolError as e:
            return f"the export was made but not delivered to {self.root}: {e.message}"
        return None

    def call(self, session, tool, args) -> ToolResult:
        """`session.call` with this folder beside it. A file that cannot cross is the call's
        failure, in one line, like any other (the scene keeps what the call did)."""
        try:
            args = self.before(session.workspace, tool, args)
        except ToolError as e:
            return ToolResult(str(tool)[:64], args if isinstance(args, dict) else {}, False, error=e)
        r = session.call(tool, args)
        if r.ok and (why := self.after(session.workspace, r.tool, r.args)):
            return dataclasses.replace(r, ok=False, error=OutboxError(why))
        return r
