"""The schema every worker frame is held to before any caller reads it.

A worker runs the policy's code, so its replies are a hostile party's data: each one is
checked here, in the supervisor, against the envelope its op may send (field names, types,
bounds, the number of blobs). A frame that fails is a `ProtocolError`: the supervisor kills
the worker and the caller gets a typed `crash` and a restored worker, never a KeyError or a
value of the wrong type deep in its own code.
"""

from __future__ import annotations

import math
import re

from tools.errors import ErrorKind
from tools.protocol import ProtocolError

MAX_ERROR_CHARS = 16_000  # the worker's own messages are < 1 KB (it cuts tracebacks to 500)
MAX_HASH_CHARS = 128
MAX_COMMIT = 1 << 40
# Blobs an op may send: a tool call at most its render's images (one montage, or one per
# view, 7 at most), the meshes op one geometry per mesh object, every other op none.
BLOB_CAPS = {"call": 8, "meshes": 65_536}
_COLOR = re.compile(r"#[0-9A-Fa-f]{6}")
_ERROR_KINDS = frozenset(k.value for k in ErrorKind)
_REPLY_FIELDS = frozenset({"id", "ok", "output", "error", "scene_hash", "rss_mb", "commit"})
_READY_FIELDS = frozenset({"ready", "pid", "startup_s", "versions", "commit", "error"})


def _bad(why: str) -> ProtocolError:
    return ProtocolError(f"malformed reply: {why}")


def _number(value: object) -> bool:
    return type(value) in (int, float) and math.isfinite(value) and value >= 0


def _commit(value: object) -> bool:
    if type(value) is int:
        return -1 <= value < MAX_COMMIT
    return isinstance(value, str) and 0 < len(value) <= 20 and value.isascii() and value.isdigit()


def _fields(frame: dict, allowed: frozenset[str]) -> None:
    extra = sorted(str(k)[:40] for k in frame if k not in allowed)
    if extra:
        raise _bad(f"unexpected field {extra[0]!r}")


def check_reply(op: object, reply: dict, sizes: list[int]) -> None:
    """ProtocolError unless `reply`, with blobs of `sizes`, is a well-formed answer to a
    request for `op`."""
    blob_count = len(sizes)
    _fields(reply, _REPLY_FIELDS)
    ok = reply.get("ok")
    if type(ok) is not bool:
        raise _bad("`ok` is not true or false")
    if ok:
        if "error" in reply or not isinstance(reply.get("output"), dict):
            raise _bad("a success without an `output` object")
        check_output(op, reply["output"], sizes)
    else:
        error = reply.get("error")
        if "output" in reply or not isinstance(error, dict) or set(error) != {"kind", "message"}:
            raise _bad("a failure without an `error` of a kind and a message")
        if error["kind"] not in _ERROR_KINDS:
            raise _bad(f"unknown error kind {str(error['kind'])[:40]!r}")
        if not isinstance(error["message"], str) or len(error["message"]) > MAX_ERROR_CHARS:
            raise _bad(f"the error message is not a string of at most {MAX_ERROR_CHARS} characters")
        if blob_count:
            raise _bad("a failure with blobs")
    cap = BLOB_CAPS.get(op, 0) if isinstance(op, str) else 0
    if blob_count > cap:
        raise _bad(f"{blob_count} blobs for a {str(op)[:40]} reply (at most {cap})")
    scene_hash = reply.get("scene_hash")
    if scene_hash is not None and not (isinstance(scene_hash, str) and len(scene_hash) <= MAX_HASH_CHARS):
        raise _bad("`scene_hash` is not a short string")
    if "rss_mb" in reply and not _number(reply["rss_mb"]):
        raise _bad("`rss_mb` is not a number")
    if reply.get("commit") is not None and not _commit(reply["commit"]):
        raise _bad("`commit` is not a commit number")


def check_images(request: dict, reply: dict, blobs: list[bytes]) -> None:
    """ProtocolError unless a tool call's success carries exactly the images that call makes,
    each a PNG of the size it draws that decodes whole (`tools.trust.images.check_call_images`).
    Checked here, where the reply is received, so no caller (the loop's montage, the store,
    a policy, the outbox) ever meets a render that is not what it claims."""
    if request.get("op") != "call" or reply.get("ok") is not True:
        return
    from tools.trust import images

    args = request.get("args")
    try:
        images.check_call_images(str(request.get("tool")), args if isinstance(args, dict) else {},
                                 blobs)
    except images.ImageError as e:
        raise _bad(e.message) from None


def check_output(op: object, output: dict, sizes: list[int]) -> None:
    """The parts of an op's output its caller indexes into: the meshes op's objects (the
    studio's viewport reads their transforms and slices their blobs by these counts)."""
    if op != "meshes":
        return
    objects = output.get("objects")
    if set(output) != {"objects"} or not isinstance(objects, list):
        raise _bad("meshes without a list of objects")
    for o in objects:
        if not (isinstance(o, dict) and isinstance(o.get("name"), str) and isinstance(o.get("key"), str)
                and _numbers(o.get("matrix"), 16) and _numbers(o.get("location"), 3)
                and _COLOR.fullmatch(str(o.get("color"))) is not None):
            raise _bad("a mesh without a name, a key, a matrix, a location and a colour")
        blob = o.get("blob")
        if blob is None:
            continue
        counts = [o.get(k) for k in ("nv", "nt", "ne")]
        if not (type(blob) is int and 0 <= blob < len(sizes)
                and all(type(c) is int and c >= 0 for c in counts)
                and counts[0] * 24 + counts[1] * 12 + counts[2] * 8 <= sizes[blob]):
            raise _bad("a mesh whose blob or counts do not match the blobs sent")


def _numbers(value: object, n: int) -> bool:
    return isinstance(value, list) and len(value) == n and all(
        type(v) in (int, float) and math.isfinite(v) for v in value)


def check_ready(frame: dict) -> None:
    """ProtocolError unless `frame` is a worker's well-formed start-up report."""
    _fields(frame, _READY_FIELDS)
    if type(frame.get("ready")) is not bool:
        raise _bad("`ready` is not true or false")
    if not frame["ready"]:
        if not isinstance(frame.get("error", ""), str):
            raise _bad("the start-up error is not a string")
        return
    versions = frame.get("versions", {})
    if not isinstance(versions, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and len(k) + len(v) < 200 for k, v in versions.items()):
        raise _bad("`versions` is not a map of short strings")
    if "startup_s" in frame and not _number(frame["startup_s"]):
        raise _bad("`startup_s` is not a number")
    if frame.get("commit") is not None and not _commit(frame["commit"]):
        raise _bad("`commit` is not a commit number")
