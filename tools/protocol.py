"""Length-prefixed messages between the supervisor and a worker.

A frame is an 8-byte header (magic, JSON length) + JSON + binary blobs whose lengths the JSON
lists. JSON, not pickle: the supervisor never unpickles what a sandboxed worker sends.
"""

from __future__ import annotations

import json
import struct
from typing import BinaryIO

MAGIC = b"MW"
HEADER = struct.Struct(">2sxxI")  # magic, 2 pad bytes, JSON length
MAX_JSON = 64 * 1024 * 1024
MAX_BLOB = 256 * 1024 * 1024


class ProtocolError(Exception):
    """The other side sent something that is not a valid frame, or closed the stream."""


def write_message(stream: BinaryIO, payload: dict, blobs: list[bytes] | None = None) -> None:
    blobs = blobs or []
    payload = dict(payload, _blobs=[len(b) for b in blobs])
    data = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()
    stream.write(HEADER.pack(MAGIC, len(data)))
    stream.write(data)
    for b in blobs:
        stream.write(b)
    stream.flush()


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise ProtocolError("stream closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_message(stream: BinaryIO) -> tuple[dict, list[bytes]]:
    magic, n = HEADER.unpack(_read_exact(stream, HEADER.size))
    if magic != MAGIC or n > MAX_JSON:
        raise ProtocolError("bad frame header")
    try:
        payload = json.loads(_read_exact(stream, n))
    except ValueError as e:
        raise ProtocolError(f"bad frame JSON: {e}") from None
    sizes = payload.pop("_blobs", [])
    if not isinstance(sizes, list) or any(not isinstance(s, int) or s < 0 or s > MAX_BLOB for s in sizes):
        raise ProtocolError("bad blob list")
    return payload, [_read_exact(stream, s) for s in sizes]
