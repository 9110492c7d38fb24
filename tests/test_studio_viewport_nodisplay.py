"""`modelwright` with no display does not hang with an invisible window: like `make run` it
runs one session offscreen, saves a screenshot, prints the summary and exits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bare_modelwright_without_display_runs_offscreen_and_exits(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM", "MODELWRIGHT_DATA_DIR")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", "studio.cli"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "No display found" in proc.stderr and "xvfb-run" in proc.stderr
    summary = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    assert summary["status"] == "done" and summary["success"] is True
    assert (tmp_path / "runs/studio-offscreen/screenshot.png").stat().st_size > 10_000


def test_the_offscreen_session_records_where_make_run_does(tmp_path, monkeypatch):
    from studio.commands import OFFSCREEN_OUT, offscreen_session

    monkeypatch.setenv("MODELWRIGHT_DATA_DIR", str(tmp_path / "mine"))
    assert offscreen_session({})["data_dir"] == str(tmp_path / "mine")
    assert offscreen_session({"data_dir": str(tmp_path / "given")})["data_dir"] == str(tmp_path / "given")
    monkeypatch.delenv("MODELWRIGHT_DATA_DIR")
    kw = offscreen_session({"policy": "none"})
    assert kw["data_dir"] == str(OFFSCREEN_OUT / "data") and kw["policy"] == "oracle"
    assert kw["task"] and kw["autorun"] and kw["exit_when_done"]
    mine = offscreen_session({"goal": "a cube", "policy": "openai"})  # the person's goal, not a task
    assert not mine.get("task") and mine["autorun"] and mine["policy"] == "openai"
    calls = offscreen_session({"hand": ["add_primitive"]})  # calls only: run them, no agent
    assert not calls.get("task") and not calls["autorun"]
