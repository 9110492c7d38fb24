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


def json_length(header: bytes) -> int:
    """The JSON length a frame header announces, or ProtocolError."""
    magic, n = HEADER.unpack(header)
    if magic != MAGIC or n > MAX_JSON:
        raise ProtocolError("bad frame header")
    return n


def decode_payload(data: bytes) -> tuple[dict, list[int]]:
    """The frame's JSON and the sizes of the blobs that follow it, or ProtocolError."""
    try:
        payload = json.loads(data)
    except ValueError as e:
        raise ProtocolError(f"bad frame JSON: {e}") from None
    sizes = payload.pop("_blobs", []) if isinstance(payload, dict) else None
    if not isinstance(sizes, list) or any(not isinstance(s, int) or s < 0 or s > MAX_BLOB for s in sizes):
        raise ProtocolError("bad blob list")
    return payload, sizes


def read_message(stream: BinaryIO) -> tuple[dict, list[bytes]]:
    payload, sizes = decode_payload(_read_exact(stream, json_length(_read_exact(stream, HEADER.size))))
    return payload, [_read_exact(stream, s) for s in sizes]
