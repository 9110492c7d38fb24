"""Model files someone else made, checked on their structure before anything parses them.

A GGUF, a safetensors file or an adapter's `adapter_config.json` comes from whoever made it.
transformers' and gguf's readers trust every count and length they read (a 178-byte GGUF
with a valid magic ended `models add` in a `struct.error`; an absurd count asks numpy for
exabytes), so each file is walked here first with every length and count held to the bytes
that are actually there, and refused in one line (`ModelError`, exit 2) before anything is
converted, copied or registered. Pure Python: no torch, transformers or numpy.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import struct
from pathlib import Path
from typing import Any

from agents.models.convert import ModelError

GGUF_MAGIC = b"GGUF"
MAX_JSON_BYTES = 1 << 20  # adapter_config.json, config.json: a few KB in practice
MAX_SAFETENSORS_HEADER = 100 << 20  # the safetensors library's own cap
MAX_GGUF_DEPTH = 3  # arrays of arrays: real files nest 1
MAX_DIMS = 4  # GGML_MAX_DIMS
# value types of a GGUF metadata entry: fixed sizes (8 string, 9 array are variable)
_GGUF_SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_STRING, _GGUF_ARRAY = 8, 9
_SAFETENSORS_DTYPES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2,
                       "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8,
                       "U64": 8, "F64": 8}


def _bad(path: Path, why: str) -> ModelError:
    return ModelError(f"{path} is not a usable model file: {why}")


# -- GGUF --------------------------------------------------------------------------------------
class _Reader:
    """Little-endian reads from a buffer, each refused if it would run past the end."""

    def __init__(self, buf: Any, path: Path):
        self.buf, self.pos, self.end, self.path = buf, 0, len(buf), path

    def take(self, n: int, what: str) -> int:
        if n < 0 or n > self.end - self.pos:
            raise _bad(self.path, f"truncated: {what} runs past the end of the file "
                                  f"(at byte {self.pos} of {self.end})")
        at = self.pos
        self.pos += n
        return at

    def unpack(self, fmt: str, what: str) -> Any:
        size = struct.calcsize(fmt)
        return struct.unpack_from(fmt, self.buf, self.take(size, what))[0]

    def string(self, what: str) -> bytes:
        n = self.unpack("<Q", f"the length of {what}")
        return bytes(self.buf[self.take(n, what) : self.pos])


def _gguf_value(r: _Reader, kind: int, key: str, depth: int = 0) -> Any:
    if kind in _GGUF_SCALARS:
        at = r.take(_GGUF_SCALARS[kind], f"the value of {key}")
        return r.buf[at : r.pos] if kind == 4 or kind == 10 else None
    if kind == _GGUF_STRING:
        r.string(f"the string value of {key}")
        return None
    if kind == _GGUF_ARRAY:
        if depth >= MAX_GGUF_DEPTH:
            raise _bad(r.path, f"{key} nests arrays deeper than {MAX_GGUF_DEPTH}")
        inner = r.unpack("<I", f"the item type of {key}")
        n = r.unpack("<Q", f"the item count of {key}")
        if inner in _GGUF_SCALARS:  # a block of fixed-size items: checked, not walked
            r.take(n * _GGUF_SCALARS[inner] if n <= r.end else r.end + 1,
                   f"the {n} items of {key}")
            return None
        if inner not in (_GGUF_STRING, _GGUF_ARRAY):
            raise _bad(r.path, f"{key} is an array of unknown type {inner}")
        if n > (r.end - r.pos) // 8:  # every string or array item takes at least 8 bytes
            raise _bad(r.path, f"{key} claims {n} items; the file holds far fewer")
        for _ in range(n):
            _gguf_value(r, inner, key, depth + 1)
        return None
    raise _bad(r.path, f"{key} has unknown value type {kind}")


def _ggml_sizes() -> dict[int, tuple[int, int]]:
    """(block size, bytes per block) of each GGML tensor type the gguf package knows."""
    try:
        from gguf.constants import GGML_QUANT_SIZES
    except ImportError:  # pragma: no cover - gguf comes with transformers' GGUF support
        return {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
                8: (32, 34), 30: (1, 2)}
    return {int(k): (int(b), int(t)) for k, (b, t) in GGML_QUANT_SIZES.items()}


def check_gguf(path: str | os.PathLike[str]) -> None:
    """ModelError unless `path` is a structurally sound GGUF (version 2 or 3): every metadata
    entry and tensor record inside the file, tensor types known, shapes sane, and every
    tensor's data inside the data section, aligned."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 24:
                raise _bad(path, f"truncated: {size} bytes, less than a GGUF header")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                _walk_gguf(_Reader(buf, path), path)
    except OSError as exc:
        raise ModelError(f"cannot read {path}: {exc.strerror or exc}") from None


def _walk_gguf(r: _Reader, path: Path) -> None:
    if bytes(r.buf[:4]) != GGUF_MAGIC:
        raise _bad(path, "no GGUF magic")
    r.take(4, "the magic")
    version = r.unpack("<I", "the version")
    if version not in (2, 3):
        raise _bad(path, f"GGUF version {version} (2 and 3 are read)")
    n_tensors = r.unpack("<Q", "the tensor count")
    n_kv = r.unpack("<Q", "the metadata count")
    if n_kv > (r.end - r.pos) // 12 or n_tensors > (r.end - r.pos) // 28:
        raise _bad(path, f"it claims {n_tensors} tensors and {n_kv} metadata entries; the "
                         f"file's {r.end} bytes hold far fewer")
    alignment, keys = 32, set()
    for _ in range(n_kv):
        key = r.string("a metadata key")
        name = key.decode("utf-8", "replace")[:80]
        if key in keys:
            raise _bad(path, f"metadata key {name!r} appears twice")
        keys.add(key)
        kind = r.unpack("<I", f"the type of {name}")
        value = _gguf_value(r, kind, name)
        if key == b"general.alignment":
            if kind != 4:
                raise _bad(path, "general.alignment is not a uint32")
            alignment = struct.unpack("<I", value)[0]
            if alignment == 0 or alignment & (alignment - 1) or alignment > 1 << 16:
                raise _bad(path, f"general.alignment {alignment} is no power of two")
    sizes, tensors, names = _ggml_sizes(), [], set()
    for _ in range(n_tensors):
        raw = r.string("a tensor name")
        name = raw.decode("utf-8", "replace")[:80]
        if raw in names:
            raise _bad(path, f"tensor {name!r} appears twice")
        names.add(raw)
        n_dims = r.unpack("<I", f"the rank of {name}")
        if not 1 <= n_dims <= MAX_DIMS:
            raise _bad(path, f"tensor {name!r} has {n_dims} dimensions (1 to {MAX_DIMS})")
        dims = [r.unpack("<Q", f"the shape of {name}") for _ in range(n_dims)]
        kind = r.unpack("<I", f"the type of {name}")
        offset = r.unpack("<Q", f"the offset of {name}")
        if kind not in sizes:
            raise _bad(path, f"tensor {name!r} has unknown type {kind}")
        block, per_block = sizes[kind]
        count = math.prod(dims)
        if count == 0 or count > r.end * 8 or dims[0] % block:
            raise _bad(path, f"tensor {name!r} has an impossible shape {dims}")
        tensors.append((name, offset, count // block * per_block))
    start = -(-r.pos // alignment) * alignment
    data = r.end - start
    for name, offset, nbytes in tensors:
        if offset % alignment or offset > data or nbytes > data - offset:
            raise _bad(path, f"tensor {name!r} ({nbytes} bytes at {offset}) lies outside the "
                             f"{max(data, 0)} bytes of tensor data (truncated or a lying header)")


# -- safetensors -------------------------------------------------------------------------------
def check_safetensors(path: str | os.PathLike[str]) -> None:
    """ModelError unless `path` is a sound safetensors file: a header of at most 100 MB that
    is a JSON object of tensors, each a known dtype and a shape whose bytes are exactly its
    data offsets, the tensors tiling the data section with no gap or overlap."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                raise _bad(path, "truncated: no safetensors header")
            n = struct.unpack("<Q", head)[0]
            if n > MAX_SAFETENSORS_HEADER or n > size - 8:
                raise _bad(path, f"its header claims {n} bytes; the file has {size - 8} after "
                                 "the length (truncated or a lying header)")
            text = f.read(n)
    except OSError as exc:
        raise ModelError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        header = json.loads(text)
    except ValueError:
        raise _bad(path, "its header is not JSON") from None
    if not isinstance(header, dict):
        raise _bad(path, "its header is not a JSON object")
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise _bad(path, "its __metadata__ is not a map of strings")
    spans = []
    for name, t in header.items():
        shown = str(name)[:80]
        if not (isinstance(t, dict) and t.get("dtype") in _SAFETENSORS_DTYPES
                and isinstance(t.get("shape"), list) and isinstance(t.get("data_offsets"), list)
                and len(t["data_offsets"]) == 2
                and all(type(v) is int and v >= 0 for v in t["shape"] + t["data_offsets"])):
            raise _bad(path, f"tensor {shown!r} has no known dtype, shape and data offsets")
        begin, end = t["data_offsets"]
        if begin > end or end - begin != math.prod(t["shape"]) * _SAFETENSORS_DTYPES[t["dtype"]]:
            raise _bad(path, f"tensor {shown!r}'s offsets do not hold its {t['shape']} "
                             f"{t['dtype']} values")
        spans.append((begin, end, shown))
    data, at = size - 8 - n, 0
    for begin, end, shown in sorted(spans):
        if begin != at:
            raise _bad(path, f"tensor {shown!r} starts at {begin}, not {at} (a gap or overlap)")
        at = end
    if at != data:
        raise _bad(path, f"its tensors take {at} bytes; the file holds {data} (truncated or "
                         "a lying header)")


# -- folders -----------------------------------------------------------------------------------
def _json_object(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            text = f.read(MAX_JSON_BYTES + 1)
    except OSError as exc:
        raise ModelError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(text) > MAX_JSON_BYTES:
        raise _bad(path, f"over {MAX_JSON_BYTES} bytes")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise _bad(path, "not JSON") from None
    if not isinstance(data, dict):
        raise _bad(path, "not a JSON object")
    return data


def check_adapter(folder: str | os.PathLike[str]) -> dict:
    """A LoRA adapter folder's config (ModelError unless it is a JSON object whose base and
    rank are sane), its safetensors weights checked when present."""
    folder = Path(folder)
    config_path = folder / "adapter_config.json"
    config = _json_object(config_path)
    base = config.get("base_model_name_or_path")
    if base is not None and not (isinstance(base, str) and len(base) <= 4096
                                 and base.isprintable()):
        raise _bad(config_path, "base_model_name_or_path is not a printable string")
    rank = config.get("r")
    if rank is not None and not (type(rank) is int and 0 < rank <= 1 << 16):
        raise _bad(config_path, f"the rank r is {str(rank)[:40]}, not a positive integer")
    for weights in sorted(folder.glob("*.safetensors")):
        check_safetensors(weights)
    return config


def check_model_folder(folder: str | os.PathLike[str]) -> dict:
    """A model folder's config.json (ModelError unless a JSON object), its safetensors
    weights checked."""
    folder = Path(folder)
    config = _json_object(folder / "config.json")
    for weights in sorted(folder.glob("*.safetensors")):
        check_safetensors(weights)
    return config
