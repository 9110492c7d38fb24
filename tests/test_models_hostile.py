"""Model files someone else made (agents/models/files.py): a malformed GGUF, safetensors file
or adapter gets one line and exit 2 from `models add` and `models show`, never a traceback,
and leaves the models folder exactly as it was."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import pytest
from support import models_cli
from support.models_cli import models

from tools.cli.exits import ExitCode


def one_error_line(result) -> str:
    shown = f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert result.exception is None or isinstance(result.exception, SystemExit), shown
    return models_cli.one_error_line(result, ExitCode.USAGE)


def listing(root: Path) -> dict[str, str]:
    """Every file and folder under `root` (hidden ones too) with its content's digest."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() else "dir" for p in sorted(root.rglob("*"))}


def _s(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def gguf_178() -> bytes:
    """178 bytes: a valid magic, version and one metadata entry, then a tensor record whose
    tensor's data is not in the file (what ended `models add` in a struct.error)."""
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 1)
    kv = _s(b"general.architecture") + struct.pack("<I", 8) + _s(b"llama")
    tensor = _s(b"token_embd.weight") + struct.pack("<I", 2) + struct.pack("<QQ", 64, 49152)
    tensor += struct.pack("<IQ", 0, 0)
    data = head + kv + tensor
    return (data + b"\x7f" * 178)[:178]


def _gguf_cases() -> dict[str, bytes]:
    head = b"GGUF" + struct.pack("<I", 3)
    kv = _s(b"general.architecture") + struct.pack("<I", 8) + _s(b"llama")
    return {
        "178 bytes": gguf_178(),
        "truncated inside the metadata": (head + struct.pack("<QQ", 0, 1) + kv)[:50],
        "absurd counts": head + struct.pack("<QQ", 2**63, 2**62) + b"\0" * 150,
        "absurd string length": head + struct.pack("<QQ", 0, 1) + struct.pack("<Q", 2**62)
        + b"\0" * 150,
        "absurd array": head + struct.pack("<QQ", 0, 1) + _s(b"tokenizer.ggml.tokens")
        + struct.pack("<IIQ", 9, 8, 2**61) + b"\0" * 150,
        "unknown value type": head + struct.pack("<QQ", 0, 1) + _s(b"k") + struct.pack("<I", 99)
        + b"\0" * 150,
        "version 1": b"GGUF" + struct.pack("<IQQ", 1, 0, 0) + b"\0" * 150,
    }


@pytest.fixture
def data_dir(tmp_path) -> Path:
    """A data dir whose models folder already holds a registered adapter."""
    data = tmp_path / "data"
    good = tmp_path / "good-adapter"
    good.mkdir()
    (good / "adapter_config.json").write_text(json.dumps(
        {"peft_type": "LORA", "r": 8, "base_model_name_or_path": "someone/base"}))
    assert models("add", str(good), "--adapter", "--data-dir", str(data)).exit_code == 0
    return data


@pytest.mark.parametrize("case", list(_gguf_cases()))
def test_a_malformed_gguf_is_one_line_and_leaves_nothing(case, data_dir, tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(_gguf_cases()[case])
    if case == "178 bytes":
        assert path.stat().st_size == 178
    before = listing(data_dir)
    line = one_error_line(models("add", str(path), "--data-dir", str(data_dir)))
    assert "model.gguf" in line
    assert listing(data_dir) == before
    assert models("show", "good-adapter", "--data-dir", str(data_dir)).exit_code == 0


def test_a_truncated_real_gguf_is_refused_and_the_whole_one_is_not(data_dir, tmp_path):
    from agents.models.files import check_gguf
    from agents.models.registry import packaged_gguf

    check_gguf(packaged_gguf())  # the real file passes the walk
    whole = packaged_gguf().read_bytes()
    for cut in (178, 4096, len(whole) // 2, len(whole) - 1):
        path = tmp_path / f"cut-{cut}.gguf"
        path.write_bytes(whole[:cut])
        before = listing(data_dir)
        line = one_error_line(models("add", str(path), "--data-dir", str(data_dir)))
        assert "truncated" in line or "outside" in line, line
        assert listing(data_dir) == before


def safetensors(header: dict, data: bytes, claimed: int | None = None) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text) if claimed is None else claimed) + text + data


GOOD_WEIGHTS = safetensors({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}},
                           b"\0" * 16)
BAD_WEIGHTS = {
    "truncated": GOOD_WEIGHTS[:-5],
    "header longer than the file": safetensors({}, b"", claimed=10**9),
    "offsets past the data": safetensors(
        {"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}, b"\0" * 8),
    "shape and offsets disagree": safetensors(
        {"w": {"dtype": "F32", "shape": [1000, 1000], "data_offsets": [0, 16]}}, b"\0" * 16),
    "overlapping tensors": safetensors(
        {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
         "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, b"\0" * 16),
    "header not JSON": struct.pack("<Q", 5) + b"{{{{{",
    "unknown dtype": safetensors({"w": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 1]}},
                                 b"\0"),
}


def _model_folder(folder: Path, weights: bytes) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (folder / "model.safetensors").write_bytes(weights)
    return folder


@pytest.mark.parametrize("case", list(BAD_WEIGHTS))
def test_a_model_folder_with_lying_safetensors_is_refused(case, data_dir, tmp_path):
    folder = _model_folder(tmp_path / "weights", BAD_WEIGHTS[case])
    before = listing(data_dir)
    line = one_error_line(models("add", str(folder), "--data-dir", str(data_dir)))
    assert "model.safetensors" in line
    assert listing(data_dir) == before


def test_show_refuses_a_registered_folder_whose_weights_went_bad(data_dir, tmp_path):
    folder = _model_folder(tmp_path / "weights", GOOD_WEIGHTS)
    assert models("add", str(folder), "--name", "mine", "--data-dir", str(data_dir)).exit_code == 0
    assert models("show", "mine", "--data-dir", str(data_dir)).exit_code == 0
    (folder / "model.safetensors").write_bytes(BAD_WEIGHTS["truncated"])
    before = listing(data_dir)
    line = one_error_line(models("show", "mine", "--data-dir", str(data_dir)))
    assert "model.safetensors" in line and "truncated" in line
    assert listing(data_dir) == before


BAD_CONFIGS = {
    "not JSON": b"{'peft_type': 'LORA'",
    "a list": b"[1, 2, 3]",
    "a NUL in its base": json.dumps({"peft_type": "LORA", "r": 8,
                                     "base_model_name_or_path": "a\0b"}).encode(),
    "a negative rank": json.dumps({"peft_type": "LORA", "r": -1}).encode(),
    "deep nesting": b"[" * 100_000 + b"]" * 100_000,
    "over a megabyte": b'{"pad": "' + b"x" * (2 << 20) + b'"}',
}


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_an_adapter_with_a_bad_config_is_refused(case, data_dir, tmp_path):
    folder = tmp_path / "adapter-x"
    folder.mkdir()
    (folder / "adapter_config.json").write_bytes(BAD_CONFIGS[case])
    before = listing(data_dir)
    line = one_error_line(models("add", str(folder), "--adapter", "--data-dir", str(data_dir)))
    assert "adapter_config.json" in line
    assert listing(data_dir) == before


def test_an_adapter_with_truncated_weights_is_refused(data_dir, tmp_path):
    folder = tmp_path / "adapter-w"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8}))
    (folder / "adapter_model.safetensors").write_bytes(BAD_WEIGHTS["truncated"])
    before = listing(data_dir)
    line = one_error_line(models("add", str(folder), "--adapter", "--data-dir", str(data_dir)))
    assert "adapter_model.safetensors" in line
    assert listing(data_dir) == before


def test_show_and_list_survive_a_registered_adapter_whose_config_went_bad(data_dir, tmp_path):
    good = tmp_path / "good-adapter"
    assert models("show", "good-adapter", "--data-dir", str(data_dir)).exit_code == 0
    (good / "adapter_config.json").write_bytes(BAD_CONFIGS["a NUL in its base"])
    before = listing(data_dir)
    line = one_error_line(models("show", "good-adapter", "--data-dir", str(data_dir)))
    assert "adapter_config.json" in line
    listed = models("list", "--data-dir", str(data_dir))
    assert listed.exit_code == 0 and "good-adapter" in listed.stdout, listed.output
    assert listing(data_dir) == before
