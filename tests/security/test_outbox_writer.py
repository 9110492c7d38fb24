"""tools.trust.outbox, the one writer into a person's folder: each rule of its docstring, alone.

Things are planted in the person's folder (links, FIFOs, folders, dangling links, a linked
subfolder) and in a worker's scratch; every refusal is one line and leaves both as they were.
"""

from __future__ import annotations

import io
import os
import stat
import struct
import zlib

import pytest

from tools.trust import confined, images
from tools.trust.outbox import Outbox, OutboxError, UserFolder, export_path


@pytest.fixture
def folder(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("my own file")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    return out, victim


def _png(width: int, height: int, extra: bytes = b"") -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (width, height), (200, 10, 10)).save(buf, format="PNG")
    data = buf.getvalue()
    return data[:33] + extra + data[33:]  # after the signature and IHDR


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _listing(root) -> dict:
    return {os.path.relpath(os.path.join(d, n), root): os.lstat(os.path.join(d, n)).st_mode
            for d, dirs, files in os.walk(root) for n in dirs + files}


@pytest.mark.timeout(120)  # a FIFO opened to write blocks until a reader comes: never, here
@pytest.mark.parametrize("kind", ["symlink", "dangling", "fifo", "folder"])
def test_a_name_held_by_a_non_file_is_refused_and_left(folder, kind):
    out, victim = folder
    target = out / "scene.json"
    if kind == "symlink":
        os.symlink(victim, target)
    elif kind == "dangling":
        os.symlink(out.parent / "not-yet", target)
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    before = _listing(out)
    with pytest.raises(OutboxError, match="it was left as it is and nothing was written there") as e:
        Outbox(out).write_json("scene.json", {"a": 1})
    assert "\n" not in e.value.message
    assert _listing(out) == before  # no temp file left, nothing replaced or removed
    assert victim.read_text() == "precious" and not (out.parent / "not-yet").exists()


def test_a_regular_file_is_replaced_by_name_and_others_are_untouched(folder):
    out, _ = folder
    (out / "scene.json").write_text("old")
    os.link(out / "scene.json", out.parent / "hardlink")  # never opened: the other name keeps it
    Outbox(out).write_json("scene.json", {"a": 1})
    assert (out / "scene.json").read_text() == '{"a": 1}'
    assert (out.parent / "hardlink").read_text() == "old"
    assert (out / "mine.txt").read_text() == "my own file"
    assert sorted(os.listdir(out)) == ["mine.txt", "scene.json"]
    assert os.stat(out / "scene.json").st_uid == os.geteuid()


def test_a_linked_subfolder_is_never_entered(folder):
    out, victim = folder
    os.symlink(victim.parent, out / "parts")
    with pytest.raises(confined.ConfinedPathError, match="not a plain folder"):
        Outbox(out).write("parts/victim.txt", b"x")
    assert victim.read_text() == "precious"


def test_a_png_is_checked_against_its_header_before_decoding_and_written_anew(folder):
    out, _ = folder
    box = Outbox(out)
    text = _chunk(b"tEXt", b"Comment\x00\x1b]0;pwned\x07")
    box.write("final.png", _png(8, 6, text))
    written = (out / "final.png").read_bytes()
    assert images.png_size(written) == (8, 6) and b"tEXt" not in written and b"pwned" not in written
    # a bomb: a header claiming 100 000 x 100 000 pixels, refused before any decode
    bomb = bytearray(_png(8, 6))
    bomb[16:24] = struct.pack(">II", 100_000, 100_000)
    with pytest.raises(images.ImageError, match="claims 100000 x 100000 pixels"):
        box.write("bomb.png", bytes(bomb))
    with pytest.raises(images.ImageError, match="not a PNG"):
        box.write("fake.png", b"#!/bin/sh\nrm -rf ~\n")
    box.write("target", _png(4, 3), png=True)  # `tasks show --image NAME`: any name, still a PNG
    assert images.png_size((out / "target").read_bytes()) == (4, 3)
    assert sorted(os.listdir(out)) == ["final.png", "mine.txt", "target"]


@pytest.mark.parametrize("name,data,why", [
    ("model.step", b"#!/bin/sh\necho owned\n", "is not a step file"),
    ("model.glb", b"BLENDER-v400", "is not a glb file"),
    ("model.3mf", b"<model/>", "is not a 3mf file"),  # a 3MF is a zip
    ("model.stl", b"\0" * 84 + b"\x05\0\0\0", "is not an STL file"),
    ("scene.json", b'{"a": "\xff"}', "should be UTF-8 text"),
    ("notes.json", b"{}\0", "holds NUL bytes"),
    ("run.sh", b"echo hi\n", "are not delivered"),
    ("noext", b"x", "are not delivered"),
])
def test_a_worker_file_must_be_what_its_suffix_says(tmp_path, folder, name, data, why):
    out, _ = folder
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / name).write_bytes(data)
    with pytest.raises(OutboxError, match=why):
        Outbox(out).take(scratch, name)
    assert sorted(os.listdir(out)) == ["mine.txt"]


@pytest.mark.timeout(120)
def test_take_reads_a_worker_file_without_links_or_fifos_and_under_its_cap(tmp_path, folder):
    out, victim = folder
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    os.symlink(victim, scratch / "a.json")
    os.mkfifo(scratch / "b.json")
    (scratch / "big.json").write_bytes(b" " * 4096)
    (scratch / "ok.step").write_bytes(b"ISO-10303-21;\nHEADER;\n")
    box = Outbox(out, max_bytes=1024)
    with pytest.raises(confined.ConfinedPathError, match="symlink"):
        box.take(scratch, "a.json")
    with pytest.raises(confined.ConfinedPathError, match="not a regular file"):
        box.take(scratch, "b.json")
    with pytest.raises(confined.ConfinedPathError, match="cap"):
        box.take(scratch, "big.json")
    box.take(scratch, "ok.step", "parts/ok.step")
    assert (out / "parts" / "ok.step").read_bytes().startswith(b"ISO-10303-21")
    assert victim.read_text() == "precious" and sorted(os.listdir(out)) == ["mine.txt", "parts"]


@pytest.mark.timeout(120)
def test_an_import_brings_in_regular_files_only(tmp_path, folder):
    out, victim = folder
    ws = tmp_path / "ws"
    ws.mkdir()
    (out / "m").mkdir()
    (out / "m" / "a.obj").write_text("mtllib a.mtl\nv 0 0 0\n")
    (out / "m" / "a.mtl").write_text("newmtl x\n")
    os.symlink(victim, out / "m" / "tex.png")  # a side file that is a link: not brought in
    os.mkfifo(out / "m" / "pipe.png")
    os.symlink(victim, out / "link.stl")
    user = UserFolder(out)
    args = user.before(ws, "import_file", {"path": str(out / "m" / "a.obj")})
    assert args == {"path": "m/a.obj"}
    assert sorted(os.listdir(ws / "m")) == ["a.mtl", "a.obj"]
    assert all(stat.S_ISREG(os.lstat(ws / "m" / n).st_mode) for n in os.listdir(ws / "m"))
    with pytest.raises(confined.ConfinedPathError, match="symlink"):
        user.before(ws, "import_file", {"path": "link.stl"})
    with pytest.raises(OutboxError, match="outside"):
        user.before(ws, "import_file", {"path": str(victim)})
    assert user.before(ws, "render", {"size": 64}) == {"size": 64}


def test_export_path_is_the_workers_own_rule():
    assert export_path({"format": "glb", "path": "a/b"}) == "a/b.glb"
    assert export_path({"format": "3mf", "path": "a/b"}) == "a/b.3mf"
    assert export_path({"format": "step", "path": "p.STP"}) == "p.STP"
    assert export_path({"format": "stl", "path": "p.stl"}) == "p.stl"
