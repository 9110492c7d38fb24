"""Length-prefixed messages between the supervisor and a worker.

A frame is an 8-byte header (magic, JSON length) + JSON + binary blobs whose lengths the JSON
lists. JSON, not pickle: the supervisor never unpickles what a sandboxed worker sends.

Every request carries an `id` and its reply echoes it; the supervisor reads exactly one reply
per request and kills a worker whose reply has another id (a forged or extra frame would
otherwise shift every later reply by one). A frame's size is capped before any of it is
read: JSON at MAX_JSON, each blob at MAX_BLOB, all blobs together at MAX_BLOBS_TOTAL.
"""

from __future__ import annotations

import json
import struct
from typing import BinaryIO

MAGIC = b"MW"
HEADER = struct.Struct(">2sxxI")  # magic, 2 pad bytes, JSON length
MAX_JSON = 64 * 1024 * 1024
MAX_BLOB = 256 * 1024 * 1024
MAX_BLOBS_TOTAL = 256 * 1024 * 1024  # a render montage is ~100 KB: this is far above need


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
    if not isinstance(sizes, list) or any(
            type(s) is not int or s < 0 or s > MAX_BLOB for s in sizes):
        raise ProtocolError("bad blob list")
    if sum(sizes) > MAX_BLOBS_TOTAL:
        raise ProtocolError(f"frame of {sum(sizes)} blob bytes is over the {MAX_BLOBS_TOTAL}-byte cap")
    return payload, sizes


def check_reply_id(request: dict, reply: dict) -> None:
    """ProtocolError unless `reply` answers `request` (same id)."""
    if "id" in request and reply.get("id") != request["id"]:
        raise ProtocolError(f"reply id {reply.get('id')!r} does not answer request {request['id']!r}")


def read_message(stream: BinaryIO) -> tuple[dict, list[bytes]]:
    payload, sizes = decode_payload(_read_exact(stream, json_length(_read_exact(stream, HEADER.size))))
    return payload, [_read_exact(stream, s) for s in sizes]
