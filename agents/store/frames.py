"""PNG frames: a cheap structural check (signature, chunk CRCs, IEND) before a frame is stored
and whenever one is read back, so that a truncated or corrupted file is reported by name."""

from __future__ import annotations

import hashlib
import struct
import zlib
from pathlib import Path

from agents.store.errors import CorruptFrame
from tools.trust import images

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_problem(data: bytes) -> str | None:
    """None for a structurally valid PNG, else what is wrong with it."""
    if not data.startswith(PNG_SIGNATURE):
        return "not a PNG (bad signature)"
    pos, seen_ihdr = len(PNG_SIGNATURE), False
    while pos + 12 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        end = pos + 12 + length
        if end > len(data):
            return f"truncated inside chunk {kind!r}"
        crc = struct.unpack(">I", data[end - 4 : end])[0]
        if zlib.crc32(data[pos + 4 : end - 4]) != crc:
            return f"bad CRC in chunk {kind!r}"
        if not seen_ihdr and kind != b"IHDR":
            return "first chunk is not IHDR"
        seen_ihdr = True
        if kind == b"IEND":
            return None
        pos = end
    return "truncated (no IEND chunk)"


def check_png(data: bytes, what: str) -> None:
    problem = png_problem(data)
    if problem:
        raise CorruptFrame(f"{what} is not a valid PNG: {problem}")
    try:  # a frame is read back for training: one whose header claims too many pixels is refused now
        images.png_size(data)
    except images.ImageError as exc:
        raise CorruptFrame(f"{what}: {exc.message}") from None


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_frame(path: Path, expected_sha256: str | None, what: str) -> bytes:
    """Read a stored frame and prove it is the one that was recorded."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CorruptFrame(f"{what}: frame file {path} is missing") from None
    if expected_sha256 is not None and sha256(data) != expected_sha256:
        raise CorruptFrame(
            f"{what}: frame file {path} does not match the checksum recorded with it "
            f"(corrupted or replaced); delete the episode or restore the file"
        )
    check_png(data, f"{what}: frame file {path}")
    return data
