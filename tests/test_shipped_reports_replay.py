"""A shipped agent's report is what `modelwright eval --adapter NAME` gives: a few of the
report's own test episodes, replayed by the real CLI on the real packaged base with the
shipped adapter, the task ids, step and token budgets its pipeline's eval used, score the
rewards the report recorded for them (a stale report, a retrained adapter shipped beside an
old report, or an eval that drifted from the pipeline's would not)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
AGENTS = ROOT / "assets" / "agents"
# Each shipped agent: a cheap part of its report to replay (family, tasks per family), chosen
# where rewards differ between tasks; the levels, budgets and phrasing come from its config.
REPLAY = {
    "smollm2-requests-grpo": ("requests", 3),       # 0.617, 1.0, -1.0
    "smollm2-curriculum": ("materials", 1),          # level 1, seen and re-worded
}


def shipped() -> list[str]:
    return sorted(p.name for p in AGENTS.iterdir() if (p / "manifest.json").is_file())


def test_every_shipped_agent_has_a_replay():
    assert set(shipped()) == set(REPLAY)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REPLAY))
def test_eval_on_a_shipped_agent_scores_its_reports_episodes(name, base_data_env, tmp_path):
    manifest = json.loads((AGENTS / name / "manifest.json").read_text())
    report = json.loads((AGENTS / name / "report.json").read_text())
    config = yaml.safe_load((ROOT / "configs" / f"{report['config']}.yaml").read_text())
    ev = config["eval"]
    family, per_family = REPLAY[name]
    args = [sys.executable, "-m", "studio.cli", "eval", "--policy", "hf", "--adapter", name,
            "--split", ev.get("split", "test"), "--families", family,
            "--levels", ",".join(str(lv) for lv in ev["levels"]),
            "--per-family", str(per_family), "--phrasing", ev.get("phrasing", "seen"),
            "--max-steps", str(ev["max_steps"]), "--max-tokens", str(ev["max_tokens"]),
            "--no-record", "--json", str(tmp_path / "replay.json")]  # fmt: skip
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    episodes = json.loads((tmp_path / "replay.json").read_text())["episodes"]
    recorded = report["stages"][manifest["measured"]["stage"]]["rewards_by_task"]
    assert len(episodes) == per_family * (2 if ev.get("phrasing") == "both" else 1)
    for e in episodes:
        assert e["task"] in recorded, e["task"]
        assert e["reward"] == pytest.approx(recorded[e["task"]], abs=1e-3), e["task"]


def test_levels_choose_the_tasks_a_pipeline_eval_scores():
    from training.eval.run_eval import task_ids
    from training.tasks import TaskError, split_ids

    fams = ["materials", "requests"]
    # what a pipeline's `eval.levels` scores, and so what `eval --levels` replays
    assert split_ids("test", 3, fams, levels=[1, 2, 3]) == task_ids(fams, [1, 2, 3], "test", 3)
    assert split_ids("test", 2, ["requests"], levels=[1]) == ["requests:1:110000", "requests:1:110001"]
    assert [i.split(":")[1] for i in split_ids("test", 6, ["requests"])] == ["1", "2", "3", "4", "5", "1"]
    with pytest.raises(TaskError, match="no chosen family has level 9"):
        split_ids("test", 1, ["requests"], levels=[1, 9])


@pytest.mark.parametrize("levels, said", [("9", "no chosen family has level 9"),
                                          ("one", "--levels one: give level numbers")])
def test_bad_levels_are_one_line(levels, said):
    out = subprocess.run([sys.executable, "-m", "studio.cli", "eval", "--policy", "scripted",
                          "--families", "requests", "--levels", levels, "--no-record"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 2 and said in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
