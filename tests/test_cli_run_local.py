"""`modelwright run --policy hf` with the local model: an episode that ran and failed exits 1
(README: 0 ok, 1 the work ran and failed, 2 bad usage or input); the bare packaged base, which
answers in prose, is stopped after the first reply's token budget by default (a goal it cannot
act on ends in seconds); the slow first use says what it does, a line per stage on stderr.
Real workers, the real packaged base, a real GGUF conversion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_a_failed_hf_episode_exits_1_after_the_prose_budget(base_data_dir, tmp_path):
    from training.cli.eval import PROSE_STOP_TOKENS

    (tmp_path / "no-agents").mkdir()  # nothing shipped: the bare base
    env = {**os.environ, "PYTHONPATH": str(REPO), "MODELWRIGHT_DATA_DIR": str(base_data_dir),
           "MODELWRIGHT_AGENTS_DIR": str(tmp_path / "no-agents"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "studio.cli", "run", "--task",
                           "primitive_placement:1:0", "--policy", "hf", "--no-record", "--json"],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 1, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["success"] is False and summary["status"] == "done"
    assert summary["policy"] == "hf:smollm2-135m-instruct" and summary["calls"] == 0
    assert summary["steps"] == 1 and summary["tokens_out"] == PROSE_STOP_TOKENS  # cut, in tokens
    assert "Traceback" not in proc.stderr
    said = [line for line in proc.stderr.splitlines() if line.startswith("modelwright: ")]
    assert said[0] == "modelwright: loading the model smollm2-135m-instruct", proc.stderr
    assert said[-1].startswith("modelwright: model loaded on cpu in ")


@pytest.mark.slow  # converts a model
def test_the_first_use_says_each_stage_of_the_conversion(tmp_path, capfd):
    from test_models import _tiny_gguf

    from agents.models.convert import convert_gguf, sha256_of

    gguf = _tiny_gguf(tmp_path / "tiny.gguf")
    convert_gguf(gguf, tmp_path / "models" / "tiny", name="tiny", source="gguf:test",
                 expected_sha256=sha256_of(gguf))
    said = [line for line in capfd.readouterr().err.splitlines()
            if line.startswith("modelwright: ")]
    assert [line.split(" (")[0].split(" in ")[0] for line in said] == [
        "modelwright: checking tiny.gguf against its pinned sha256",
        f"modelwright: converting tiny.gguf into {tmp_path / 'models' / 'tiny'}",
        "modelwright:   loading transformers",
        "modelwright:   reading the tokenizer and dequantizing the weights",
        "modelwright:   saving safetensors and the tokenizer",
        "modelwright: converted tiny",
    ]
