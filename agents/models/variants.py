"""An agent's variants: the standard one (the weights as trained), and the fast one.

The fast variant in llama.cpp is the agent's q8_0 GGUF (`agents/models/export.py`), made the
first time `--variant fast` runs and kept under DATA/variants/, named by the agent and keyed
by a digest of the base's GGUF hash, the number format and the adapter's files: an adapter
trained again gets a new file, never an old one. `--quant f32` (or f16) makes the same agent
in another format: f32 is what a pipeline's eval stages run, the standard variant's float32
turns in llama.cpp's time (docs/MODELS.md). Beside each GGUF a `.speed.json` adds up the turns run on it
(prompt and new tokens, seconds): what `modelwright models show` reports as its speed here.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from agents.models.convert import BASE_NAME, BASE_SHA256, MANIFEST, ModelError, progress

VERSION = "1"  # of the export's layout: a change makes every variant again
QUANT = "q8_0"  # the fast variant's number format
# The formats a fast variant may be made in (gguf-py writes them; no quantizer needed)
FAST_QUANTS = ("q8_0", "f16", "bf16", "f32")
_BUILD_LOCK = threading.Lock()


@dataclass(frozen=True)
class FastGGUF:
    gguf: Path
    folder: Path  # the base's model folder (tokenizer, config)
    label: str
    stats: Path
    quant: str = QUANT


def variants_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    from agents.models.registry import models_dir

    return models_dir(data_dir).parent / "variants"


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def variant_key(base: str, folder: Path, adapter: Path | None, quant: str = QUANT) -> str:
    """A digest of what the GGUF is made from: the base's GGUF hash (recorded when it was
    converted), the number format and the adapter's weights and config."""
    if base == BASE_NAME:
        source = BASE_SHA256
    else:
        try:
            source = str(json.loads((folder / MANIFEST).read_text()).get("gguf_sha256") or base)
        except (OSError, ValueError):
            source = base
    h = hashlib.sha256(f"{VERSION}:{quant}:{source}".encode())
    if adapter is not None:
        for name in sorted(p.name for p in adapter.iterdir()
                           if p.is_file() and p.name.startswith("adapter_")):  # fmt: skip
            h.update(f"{name}:{_file_digest(adapter / name)}".encode())
    return h.hexdigest()[:16]


def fast_gguf(model: str | None, adapter: str | None,
              data_dir: str | os.PathLike[str] | None = None, quant: str = QUANT,
              root: Path | None = None) -> FastGGUF:  # fmt: skip
    """The fast variant's GGUF for this model and adapter in `quant`, exported now if there is
    none yet, under `root` (default DATA/variants; a training run keeps its own). ModelError
    (one line) when the model cannot be exported (not from a GGUF, not llama)."""
    if quant not in FAST_QUANTS:
        raise ModelError(f"a fast variant is made in {', '.join(FAST_QUANTS)}, not {quant!r} "
                         "(`modelwright models export --quant` makes the others)")
    from agents.models.export import export, pick
    from agents.models.registry import resolve

    name = model if model and not Path(model).is_dir() else None
    if model and name is None:
        name = _registered_name(Path(model), data_dir)
        if name is None:
            raise ModelError(f"{model} is not a registered model, so it has no GGUF to export "
                             "from; add it with `modelwright models add FILE.gguf`")
    base, adapter_dir, label = pick(name, adapter, data_dir)
    folder = resolve(base, data_dir)
    if folder is None:
        raise ModelError(f"no model folder for {base}; see `modelwright models list`")
    root = Path(root) if root is not None else variants_dir(data_dir)
    key = variant_key(base, folder, adapter_dir, quant)
    gguf = root / f"{label}-{key}.{quant}.gguf"
    stats = gguf.with_suffix(".speed.json")
    with _BUILD_LOCK:
        if not gguf.is_file():
            root.mkdir(parents=True, exist_ok=True)
            progress(f"making the fast variant of {label} (once): merged, {quant} GGUF")
            tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=root))
            try:
                done = export(name=base, adapter=str(adapter_dir) if adapter_dir else None,
                              quant=quant, out=tmp / "out", data_dir=data_dir)  # fmt: skip
                os.replace(done.gguf, gguf)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return FastGGUF(gguf=gguf, folder=folder, label=label, stats=stats, quant=quant)


def _registered_name(path: Path, data_dir) -> str | None:
    from agents.models.registry import list_models

    for entry in list_models(data_dir):
        if entry.path and Path(entry.path).resolve() == path.resolve():
            return entry.name
    return None


def add_speed(path: Path, counts: dict, threads: int) -> None:
    """Add one process's turn counts to the speed file (best effort: a write that fails is
    dropped; the file is only ever read for `models show`)."""
    try:
        data = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    for key, value in counts.items():
        if isinstance(value, int | float):
            data[key] = data.get(key, 0) + value
    data["threads"] = threads
    try:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError:
        pass


def variants_of(name: str, data_dir: str | os.PathLike[str] | None = None) -> list[dict]:
    """An agent's variants, as `models show` lists them: the standard one (the weights as
    trained), the in-process int8 one, and the llama.cpp GGUFs made so far, each with its size
    and the speed measured where it ran."""
    return [{"variant": "standard", "engine": "transformers"},
            {"variant": "fast", "engine": "transformers int8",
             "note": "where llama.cpp is not installed"},
            *describe(name, data_dir)]


def describe(label: str, data_dir: str | os.PathLike[str] | None = None) -> list[dict]:
    """The fast variants made for an agent named `label`: file, size and measured speed."""
    root = variants_dir(data_dir)
    out = []
    if not root.is_dir():
        return out
    for gguf in sorted(root.glob(f"{label}-*.gguf")):
        match = re.fullmatch(r"[0-9a-f]{16}\.(\w+)\.gguf", gguf.name[len(label) + 1:])
        if match is None or match[1] not in FAST_QUANTS:
            continue  # another agent whose name starts alike
        row: dict = {"variant": "fast", "engine": "llama.cpp", "quant": match[1],
                     "path": str(gguf), "size_bytes": gguf.stat().st_size}  # fmt: skip
        try:
            s = json.loads(gguf.with_suffix(".speed.json").read_text())
        except (OSError, ValueError):
            s = None
        if isinstance(s, dict) and s.get("decode_s"):
            row["turns"] = int(s.get("turns", 0))
            row["new_tok_s"] = round(s["new_tokens"] / s["decode_s"], 1)
            if s.get("prefill_s"):
                row["prompt_tok_s"] = round(s["prompt_encoded"] / s["prefill_s"], 1)
        out.append(row)
    return out
