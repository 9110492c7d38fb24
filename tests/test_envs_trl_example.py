"""The TRL example (examples/trl_grpo.py) trains the packaged base with TRL's own
GRPOTrainer on Modelwright's environment, shortened to one step of two rollouts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_trl_example_runs_a_grpo_step_on_the_packaged_base(base_data_dir, tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "MODELWRIGHT_DATA_DIR": str(base_data_dir), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trl_grpo.py"), "--steps", "1",
         "--generations", "2", "--max-completion", "24", "--tasks", "2", "--out", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    [row] = json.loads((out / "log.json").read_text())
    assert row["step"] == 1
    # the reward came from the environment's verifier: one reward source, named after the class
    assert "rewards/ModelwrightEnv/mean" in row and -1.0 <= row["reward"] <= 1.0
    assert (out / "adapter" / "adapter_config.json").is_file()
