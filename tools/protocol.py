"""Length-prefixed messages between the supervisor and a worker.

A frame is an 8-byte header (magic, JSON length) + JSON + binary blobs whose lengths the JSON
lists. JSON, not pickle: the supervisor never unpickles what a sandboxed worker sends.

Every request carries an `id` and its reply echoes it; the supervisor reads exactly one reply
per request and kills a worker whose reply has another id (a forged or extra frame would
otherwise shift every later reply by one). A frame's size is capped before any of it is
read: JSON at MAX_JSON, each blob at MAX_BLOB, all blobs together at MAX_BLOBS_TOTAL.

A reply is data, never a code path: before `json.loads` sees it, a linear scan (strings cut
out, brackets counted) bounds its nesting depth (no RecursionError), its containers and its
items (the decoded size: a JSON of tiny containers takes ~30 times its size as Python
objects). After it, `check_reply` holds the envelope to a schema per op (tools/trust/replies.py).
"""

from __future__ import annotations

import array
import json
import socket
import struct
from typing import BinaryIO

MAGIC = b"MW"
HEADER = struct.Struct(">2sxxI")  # magic, 2 pad bytes, JSON length
# The largest real replies (measured, 10,000 objects): get_scene's largest page (10,000, the
# spec's cap) is 3.2 MB of JSON with 70,000 containers and 260,000 items; the studio's
# meshes op is 2.6 MB with 280,000 items. Each cap is over twice that; a worst-case frame
# under all of them decodes to under ~100 MB (tests/security/test_trust_replies.py).
MAX_JSON = 8 << 20
MAX_DEPTH = 32  # real replies nest 4 deep
MAX_CONTAINERS = 250_000
MAX_ITEMS = 1_000_000  # commas outside strings: the values in all arrays and objects
MAX_BLOB = 256 * 1024 * 1024
MAX_BLOBS_TOTAL = 256 * 1024 * 1024  # a render montage is ~100 KB: this is far above need
MAX_BLOB_COUNT = 65_536  # the meshes op sends one per mesh object; see replies.BLOB_CAPS


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


def check_shape(data: bytes) -> None:
    """ProtocolError if the JSON text nests deeper than MAX_DEPTH or holds more containers or
    items than the caps. Vectorised and linear (no recursion, no regex backtracking stack):
    escaped backslashes and quotes are dropped, so every quote left opens or closes a string,
    and a byte is outside every string where the running count of quotes is even."""
    import numpy as np  # lazily: the CLI's start-up pays for it only once a reply arrives

    plain = np.frombuffer(data.replace(b"\\\\", b"").replace(b'\\"', b""), np.uint8)
    outside = plain[(np.cumsum(plain == ord('"'), dtype=np.uint8) & 1) == 0]
    if np.count_nonzero(outside == ord(",")) > MAX_ITEMS:
        raise ProtocolError(f"frame JSON has over {MAX_ITEMS} items")
    opens = (outside == ord("[")) | (outside == ord("{"))
    closes = (outside == ord("]")) | (outside == ord("}"))
    opened = int(np.count_nonzero(opens))
    if opened > MAX_CONTAINERS:
        raise ProtocolError(f"frame JSON has over {MAX_CONTAINERS} arrays and objects")
    if opened != np.count_nonzero(closes):
        raise ProtocolError("frame JSON has unbalanced brackets")
    if opened <= MAX_DEPTH:
        return
    steps = np.where(opens[opens | closes], 1, -1).astype(np.int32)
    if int(np.cumsum(steps).max()) > MAX_DEPTH:
        raise ProtocolError(f"frame JSON nests deeper than {MAX_DEPTH}")


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def decode_payload(data: bytes) -> tuple[dict, list[int]]:
    """The frame's JSON and the sizes of the blobs that follow it, or ProtocolError."""
    check_shape(data)
    try:
        payload = json.loads(data, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        raise ProtocolError(f"bad frame JSON: {str(e)[:200]}") from None
    sizes = payload.pop("_blobs", []) if isinstance(payload, dict) else None
    if not isinstance(sizes, list) or len(sizes) > MAX_BLOB_COUNT or any(
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


# The worker template's socket (tools/sandbox/template.py, tools/worker/template.py): one JSON
# message per SOCK_SEQPACKET datagram, with file descriptors beside it (SCM_RIGHTS).
MAX_PASSED_FDS = 8


def send_with_fds(sock: socket.socket, payload: dict, fds: list[int] | tuple[int, ...] = ()) -> None:
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([json.dumps(payload).encode()], anc)


def recv_with_fds(sock: socket.socket, size: int = 1 << 20) -> tuple[dict | None, list[int]]:
    """One message and the descriptors that came with it; (None, fds) when the peer closed."""
    fds = array.array("i")
    msg, anc, _, _ = sock.recvmsg(size, socket.CMSG_SPACE(MAX_PASSED_FDS * fds.itemsize))
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    if not msg:
        return None, list(fds)
    return json.loads(msg), list(fds)
