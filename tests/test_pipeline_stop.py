"""Stopping `modelwright train pipeline` as a user or a supervisor does (issue #49's long run):
SIGTERM mid-eval ends the episodes under way, starts no other, keeps the stage's time and the
journalled episodes for `--resume`, and says so in one line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow


def test_sigterm_in_an_eval_stage_stops_it_and_keeps_what_resume_needs(tmp_path, tiny_text_dir):
    config = tmp_path / "pipeline.yaml"
    config.write_text(json.dumps({
        "kind": "pipeline", "model": {"path": str(tiny_text_dir), "dtype": "float32"},
        "tools": ["set_material", "add_primitive"], "demos": {"families": ["materials"]},
        "sft": {}, "grpo": {"tasks": {"families": ["materials"]}},
        "eval": {"families": ["materials", "primitive_placement"], "per_family": 40,
                 "max_steps": 2, "max_tokens": 12, "dtype": "float32", "untrained": True},
    }))  # fmt: skip
    out = tmp_path / "run"
    journal = out / "eval-untrained.episodes.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "studio.cli", "train", "pipeline",
                             "--config", str(config), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        while proc.poll() is None:  # until the eval stage has journalled two episodes
            try:
                if len(journal.read_text().splitlines()) >= 1 + 2:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=600)
    finally:
        proc.kill()
    lines = err.strip().splitlines()
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "--resume" in lines[-1] and str(out) in lines[-1]
    journalled = len(journal.read_text().splitlines()) - 1
    assert 2 <= journalled < 80  # it stopped: not every episode ran
    partial = json.loads((out / ".eval_untrained.partial.json").read_text())
    assert partial["seconds"] > 0 and partial["attempts"] == 1
    assert not (out / ".eval_untrained.json").exists()  # not marked done
    assert json.loads((out / ".demos.json").read_text())["result"]  # the stage before is kept
