"""scripts/carry_run.py: a run's resumable state packed (no demos, GGUFs, optimizer state or
unchosen checkpoints), unpacked only when every carried file's hash holds."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "carry_run.py"


@pytest.fixture(scope="module")
def carry():
    spec = importlib.util.spec_from_file_location("carry_run", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_folder(root: Path) -> Path:
    run = root / "run"
    files = {
        ".demos.json": "{}",
        ".sft.json": "{}",
        ".select_sft.json": json.dumps(
            {"result": {"chosen": {"base": "b", "adapter": str(run / "sft" / "checkpoint-300")}}}
        ),
        ".eval_sft.partial.json": '{"seconds": 3.0}',
        "eval-sft.episodes.jsonl": '{"head": 1}\n',
        "demos.parquet": "PAR1",
        "sft/checkpoint-200/adapter_model.safetensors": "two hundred",
        "sft/checkpoint-300/adapter_model.safetensors": "three hundred",
        "sft/checkpoint-300/adapter_config.json": "{}",
        "sft/checkpoint-300/optimizer.pt": "adam",
        "sft/adapter/adapter_model.safetensors": "final",
        "variants/sft.f32.gguf": "gguf",
        "big.json": "x" * 3000,
    }
    for rel, text in files.items():
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_text(text)
    return run


def test_pack_keeps_what_resume_reads_and_unpack_checks_hashes(tmp_path, carry, capsys):
    run = _run_folder(tmp_path)
    dest = tmp_path / "carried"
    assert carry.main(["pack", str(run), str(dest), "--max-mb", str(2000 / 2**20)]) == 0
    manifest = json.loads((dest / "MANIFEST.json").read_text())
    assert sorted(manifest) == [
        ".demos.json", ".eval_sft.partial.json", ".select_sft.json", ".sft.json",
        "eval-sft.episodes.jsonl",
        "sft/checkpoint-300/adapter_config.json", "sft/checkpoint-300/adapter_model.safetensors",
    ]  # fmt: skip
    back = tmp_path / "back"
    assert carry.main(["unpack", str(dest), str(back)]) == 0
    assert (back / "sft/checkpoint-300/adapter_model.safetensors").read_text() == "three hundred"

    (dest / ".sft.json").write_text('{"changed": 1}')
    again = tmp_path / "again"
    assert carry.main(["unpack", str(dest), str(again)]) == 2
    assert "changed" in capsys.readouterr().err
    assert not again.exists()  # nothing written when a hash fails


def test_pack_refuses_a_folder_that_is_no_run(tmp_path, carry, capsys):
    assert carry.main(["pack", str(tmp_path), str(tmp_path / "d")]) == 2
    assert "not a pipeline run folder" in capsys.readouterr().err
