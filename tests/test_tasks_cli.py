"""`modelwright tasks ...`, `score` and external benchmark folders, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import cadquery as cq
import pytest
from typer.testing import CliRunner

from studio.cli import build_app
from training.tasks.benchmark import load_benchmark
from training.tasks.runner import attempt

runner = CliRunner()

PARTS = {
    "plate": "import cadquery as cq\nresult = cq.Workplane('XY').box(60, 40, 5).faces('>Z').workplane().rarray(40, 20, 2, 2).hole(6)\n",
    "shaft": "import cadquery as cq\nresult = cq.Workplane('XY').circle(10).extrude(20).faces('>Z').workplane().circle(6).extrude(30)\n",
    "tray": "import cadquery as cq\nresult = cq.Workplane('XY').box(50, 30, 20).faces('>Z').shell(-2)\nshow_object(result)\n",
}


def cli(*args: str):
    result = runner.invoke(build_app(), list(args))
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    """A benchmark folder: three good cases (STL, prompts, reference) and malformed ones."""
    root = tmp_path_factory.mktemp("bench")
    for name, code in PARTS.items():
        case = root / name
        case.mkdir()
        ns: dict = {"show_object": lambda *a, **k: None}
        exec(code, ns)
        cq.exporters.export(ns["result"], str(case / "gt.stl"))
        (case / "prompt_1.txt").write_text(f"Model a {name}.")
        (case / "prompt_2.txt").write_text(f"Please build the {name} part.")
        (case / "reference.py").write_text(code)
    (root / "no_mesh").mkdir()
    (root / "no_mesh" / "p.txt").write_text("a part")
    (root / "bad_mesh").mkdir()
    (root / "bad_mesh" / "gt.stl").write_bytes(b"garbage")
    (root / "bad_mesh" / "p.txt").write_text("a part")
    (root / "no_prompt").mkdir()
    cq.exporters.export(cq.Workplane().box(1, 1, 1), str(root / "no_prompt" / "gt.stl"))
    return root


def test_malformed_cases_are_reported_and_skipped(bench):
    b = load_benchmark(bench)
    assert sorted(b.cases) == ["plate", "shaft", "tray"]
    reasons = {s["case"]: s["reason"] for s in b.skipped}
    assert set(reasons) == {"no_mesh", "bad_mesh", "no_prompt"}
    assert "no ground-truth mesh" in reasons["no_mesh"]
    assert "unreadable" in reasons["bad_mesh"]
    assert "prompt" in reasons["no_prompt"]
    assert len(b.cases["plate"].prompts) == 2


def test_reference_scripts_score_near_perfect(bench, session):
    b = load_benchmark(bench)
    for name in PARTS:
        task = b.case(name).task()
        a = attempt(task, session, task.oracle)
        geo = a.reward.details["geometry"]
        assert a.reward.success, (name, a.summary())
        assert geo["voxel_iou"] > 0.95 and geo["chamfer_x1e3"] < 1.0, (name, geo)
        idle = attempt(task, session, [])
        assert not idle.reward.success and idle.reward.total == -1.0
    # The wrong part for a case scores clearly worse.
    wrong = b.case("plate").task()
    a = attempt(wrong, session, load_benchmark(bench).case("shaft").task().oracle)
    assert not a.reward.success and a.reward.details["geometry"]["chamfer_x1e3"] > 5


def test_tasks_list_and_show_json():
    code, out = cli("tasks", "list", "--json")
    assert code == 0
    families = json.loads(out)
    assert len(families) >= 10 and all(
        {"family", "levels", "description", "split"} <= set(f) for f in families
    )
    code, out = cli("tasks", "show", "cad_parts:2:7", "--json")
    assert code == 0
    shown = json.loads(out)
    for key in ("prompt", "parameters", "oracle", "constraints", "budget"):
        assert key in shown
    assert all(set(step) == {"tool", "args"} for step in shown["oracle"])
    code, out = cli("tasks", "show", "nope:1:1", "--json")
    assert code == 2 and "unknown task family" in out


def test_tasks_show_reads_as_sections_not_json():
    code, out = cli("tasks", "show", "cad_parts:2:7")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == "cad_parts:2:7  (cad_parts, level 2, seed 7, train split)"
    for heading in ("Prompt", "Parameters", "Start", "Checked (3)", "Oracle plan (1 call)"):
        assert heading in lines, heading
    assert "  - holes of Flange: diameter 6, count 8" in lines
    assert "  1. cadquery_script(name=Flange, code=<5 lines of code>)" in lines
    assert "Budget: 6 steps" in lines and not any(line.startswith("{") for line in lines)


def test_score_says_why_a_metric_was_not_measured(tmp_path):
    cq.exporters.export(cq.Workplane().box(2, 1, 1), str(tmp_path / "a.step"))
    cq.exporters.export(cq.Workplane().box(2, 1, 1), str(tmp_path / "b.stl"))
    code, out = cli("score", str(tmp_path / "a.step"), str(tmp_path / "b.stl"))
    assert code == 0, out
    assert "brep_iou: n/a — needs two exact CAD solids (STEP); b.stl is a mesh" in out
    assert "None" not in out
    code, out = cli("score", str(tmp_path / "a.step"), str(tmp_path / "b.stl"), "--json")
    assert json.loads(out)["not_measured"] == {
        "brep_iou": "needs two exact CAD solids (STEP); b.stl is a mesh"}


def test_score_command_prints_every_metric(tmp_path):
    cq.exporters.export(cq.Workplane().box(2, 1, 1), str(tmp_path / "a.step"))
    cq.exporters.export(cq.Workplane().box(2, 1, 1).translate((5, 0, 0)), str(tmp_path / "b.stl"))
    code, out = cli("score", str(tmp_path / "a.step"), str(tmp_path / "b.stl"), "--json")
    assert code == 0, out
    m = json.loads(out)
    assert m["voxel_iou"] > 0.97 and m["chamfer_x1e3"] < 1.0
    assert {"brep_iou", "volume_a", "volume_b", "extents_a", "watertight_b"} <= set(m)
    code, out = cli("score", str(tmp_path / "a.step"), str(tmp_path / "missing.stl"), "--json")
    assert code == 2 and "no such file" in out


def test_tasks_try_runs_in_a_fresh_session(tmp_path):
    """The oracle of a task through --calls, in the command's own fresh worker."""
    calls = tmp_path / "calls.jsonl"
    from training.tasks import get_task

    task = get_task("composition:1:3")
    calls.write_text("\n".join(json.dumps(s) for s in task.oracle) + "\n")
    out_dir = tmp_path / "out"
    code, out = cli(
        "tasks", "try", "composition:1:3", "--calls", str(calls), "--out", str(out_dir), "--json"
    )
    assert code == 0, out
    summary = json.loads(out)
    assert summary["success"] and summary["steps"] == 1 and summary["errors"] == []
    assert {"task", "reward", "components"} <= set(summary)
    assert (out_dir / "reward.json").is_file() and (out_dir / "final.png").is_file()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    code, out = cli("tasks", "try", "composition:1:3", "--calls", str(bad))
    assert code == 2 and "not JSON" in out
    code, out = cli("tasks", "try", "composition:1:3", "--oracle", "--none")
    assert code == 2 and "exactly one" in out


def test_tasks_verify_sweeps_oracles_idleness_and_perturbations():
    code, out = cli("tasks", "verify", "--family", "recovery", "--level", "1", "--level", "2",
                    "--seeds", "1", "--jobs", "1", "--json")
    assert code == 0, out
    report = json.loads(out[out.index("{") :])
    assert (report["families"], report["levels"], report["tasks"]) == (1, 2, 2)
    assert report["problems"] == [] and report["attempts"] >= 4  # oracle + empty plan, each
    code, out = cli("tasks", "verify", "--family", "nope", "--seeds", "1")
    assert code == 2 and "unknown task families ['nope']" in out
    code, out = cli("tasks", "verify", "--seeds", "zero")
    assert code == 2
