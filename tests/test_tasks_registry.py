"""The family registry as users and training read it: `tasks list|show|verify`, and the
config's family/level weights shared by GRPO's curriculum and SFT's demonstrations (#31)."""

from __future__ import annotations

import json
import random
import re
from collections import Counter

import pytest
from typer.testing import CliRunner

from studio.cli import build_app
from training.tasks import FAMILIES, get_task, held_out_families
from training.tasks.families import REWARD_WEIGHTS
from training.tasks.spec import Family, TaskSpec, call

runner = CliRunner()


def cli(*args: str):
    result = runner.invoke(build_app(), list(args))
    return result.exit_code, result.output


@pytest.fixture
def planted():
    """Throwaway families in this process: one whose checker only counts objects (so a
    moved or resized box passes), one whose generator raises. Removed afterwards."""

    def loose(level: int, rng: random.Random) -> TaskSpec:
        box = call("add_primitive", kind="cube", name="Box", location=[1.0, 0.0, 0.5],
                   dimensions=[1.0, 1.0, 1.0])
        return TaskSpec("Add a cube named Box.", {}, [box], [{"kind": "count", "equal": 1}])

    def broken(level: int, rng: random.Random) -> TaskSpec:
        raise RuntimeError("not finished")

    planted = [
        Family("zz_loose_checker", "A box anywhere (a planted weak checker).", domain="parts",
               levels=(1,), weights={"constraints": 0.8, "validity": 0.2}, held_out=False,
               toolbox=("add_primitive",), make=loose),
        Family("zz_broken_generator", "Raises (a family being written).", domain="parts",
               levels=(1,), weights={"constraints": 1.0}, held_out=False, toolbox=(),
               make=broken),
    ]
    for f in planted:
        FAMILIES[f.name] = f
        REWARD_WEIGHTS[f.name] = f.weights
    yield tuple(f.name for f in planted)
    for f in planted:
        FAMILIES.pop(f.name, None)
        REWARD_WEIGHTS.pop(f.name, None)


def test_list_json_has_domain_split_and_measured_calls_sorted_by_domain():
    code, out = cli("tasks", "list", "--json")
    assert code == 0, out
    rows = json.loads(out)
    assert [r["family"] for r in rows] == [f.name for f in sorted(
        FAMILIES.values(), key=lambda f: (f.domain, f.name))]
    for r in rows:
        assert {"family", "domain", "levels", "split", "held_out", "description", "calls"} <= set(r)
        assert r["split"] == ("held out" if FAMILIES[r["family"]].held_out
                              else "train/validation/test")
        assert sorted(r["calls"]) == sorted(map(str, r["levels"])), r
    # Measured from the plans of the split's first seeds, never declared.
    row = next(r for r in rows if r["family"] == "scene_editing")
    counts = [len(get_task(f"scene_editing:3:{s}").oracle) for s in range(5)]
    assert row["calls"]["3"] == {"mean": round(sum(counts) / 5, 1), "min": min(counts),
                                 "max": max(counts)}
    held = next(r for r in rows if r["family"] == "mesh_reconstruction")
    first = len(get_task("mesh_reconstruction:2:110000").oracle)
    assert held["held_out"] and held["calls"]["2"]["min"] <= first <= held["calls"]["2"]["max"]
    code, out = cli("tasks", "list")
    assert code == 0 and all(len(line) <= 100 for line in out.splitlines()), out
    assert "held out" in out and "scene_editing" in out


def test_show_renders_prompt_and_start_of_every_family():
    for name, fam in sorted(FAMILIES.items()):
        for level in sorted({fam.levels[0], fam.levels[-1]}):
            task = get_task(f"{name}:{level}:0")
            code, out = cli("tasks", "show", task.id)
            assert code == 0, (task.id, out)
            assert "Prompt" in out and "Start" in out and task.prompt.split()[0] in out
            assert len(task.spec.start) == 0 or "  1. " in out.split("Start", 1)[1]
            for path in task.spec.files:
                assert f"  file: {path} (" in out, (task.id, out)


def test_verify_fails_on_a_broken_generator_without_a_worker(planted):
    code, out = cli("tasks", "verify", "--family", planted[1], "--seeds", "2", "--json")
    assert code == 1, out
    report = json.loads(out[out.index("{"):])
    assert report["tasks"] == 2 and report["attempts"] == 0
    assert report["problems"] == [f"{planted[1]}:1:{s}: the generator fails: RuntimeError: "
                                  "not finished" for s in (0, 1)]
    code, out = cli("tasks", "verify", "--family", "nope")
    assert code == 2 and "unknown task families ['nope']" in out
    code, out = cli("tasks", "verify", "--family", planted[1], "--level", "5")
    assert code == 2 and "has no level 5" in out


def test_verify_passes_a_good_checker_and_catches_a_planted_weak_one(planted):
    """Real workers: materials' checker catches every perturbation; the planted one, which
    only counts objects, lets a moved and a resized box pass."""
    code, out = cli("tasks", "verify", "--family", "materials", "--family", planted[0],
                    "--level", "1", "--seeds", "1", "--jobs", "2")
    assert code == 1, out
    problems = [line for line in out.splitlines() if ": perturbation" in line]
    assert sorted(problems) == [f"{planted[0]}:1:0: perturbation move passes (1.000)",
                                f"{planted[0]}:1:0: perturbation resize passes (1.000)"], out
    assert "materials:1:0: ok" in out
    assert "verified 2 families, 2 levels, 2 tasks, 9 attempts: 2 problem(s)" in out
    code, out = cli("tasks", "verify", "--family", "materials", "--level", "1", "--seeds", "1",
                    "--no-perturb", "--json")
    assert code == 0, out
    report = json.loads(out[out.index("{"):])
    assert (report["tasks"], report["attempts"], report["problems"]) == (1, 2, [])


# -- weights from config: one sampler for GRPO's curriculum and SFT's demonstrations -----------


def test_curriculum_family_and_level_weights_scale_the_draws():
    from training.rl.curriculum import Curriculum
    from training.train_config import CurriculumSpec

    spec = CurriculumSpec(family_weights={"materials": 0, "scene_editing": 3},
                          level_weights={2: 0.5})
    cur = Curriculum(["primitive_placement", "materials", "scene_editing"], [1, 2], seed=3,
                     spec=spec)
    assert "materials:1" not in cur.buckets and "materials:2" not in cur.buckets
    drawn = Counter(cur.task_for(s).rsplit(":", 1)[0] for s in range(600))
    assert not any(b.startswith("materials") for b in drawn)
    # Weights 1, 0.5 (placement) and 3, 1.5 (editing) of a total 6: expected 100/50/300/150.
    assert 60 < drawn["primitive_placement:1"] < 140 and 200 < drawn["scene_editing:1"] < 400
    assert drawn["scene_editing:1"] > drawn["scene_editing:2"] > drawn["primitive_placement:2"]
    again = Curriculum(["primitive_placement", "materials", "scene_editing"], [1, 2], seed=3,
                       spec=spec)
    assert [again.task_for(s) for s in range(50)] == [cur.task_for(s) for s in range(50)]


@pytest.mark.parametrize("weights, match", [
    ({"family_weights": {"mesh_reconstruction": 1}}, "'mesh_reconstruction' is held out"),
    ({"family_weights": {"cubes": 1}}, "'cubes' is not a task family"),
    ({"family_weights": {"materials": -1}}, "materials: -1.0 is below 0"),
    ({"level_weights": {7: 1}}, r"level 7 is not one of grpo.tasks.levels \[1\]"),
    ({"family_weights": {"primitive_placement": 0, "materials": 0, "scene_editing": 0}},
     "no task to draw"),
])
def test_bad_weights_are_one_line_config_errors(tmp_path, weights, match):
    """`modelwright train` checks families, levels and weights against the registry first."""
    import yaml

    raw = {"kind": "grpo", "model": {"build_tiny": True},
           "grpo": {"tasks": {"families": ["primitive_placement", "materials", "scene_editing"]},
                    "curriculum": weights}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    code, out = cli("train", "grpo", "--config", str(path))
    assert code == 2, out
    assert re.search(match, out) and "grpo.curriculum" in out
    assert out.strip().count("\n") == 0 and "Traceback" not in out, out


def test_demos_share_out_the_same_weights_and_default_to_the_old_ids():
    from training.eval.run_eval import task_ids
    from training.tasks.sampling import TaskSampler, demo_task_ids
    from training.train_config import DemoSpec

    fams = ["primitive_placement", "materials", "scene_editing"]
    plain = DemoSpec(families=fams, levels=[1, 2, 3], per_family=7)
    assert demo_task_ids(plain) == task_ids(fams, [1, 2, 3], "train", 7)  # no weights: as before
    fw, lw = {"materials": 0, "scene_editing": 2}, {1: 3, 2: 1}
    spec = DemoSpec(families=fams, levels=[1, 2], per_family=12, family_weights=fw,
                    level_weights=lw)
    ids = demo_task_ids(spec)
    per_bucket = Counter(i.rsplit(":", 1)[0] for i in ids)
    # 24 demos (12 x the two families drawn from) shared 1:2, then 3:1 between the levels.
    assert per_bucket == {"primitive_placement:1": 6, "primitive_placement:2": 2,
                          "scene_editing:1": 12, "scene_editing:2": 4}
    assert len(set(ids)) == len(ids) and all(int(i.split(":")[2]) < 100_000 for i in ids)
    # GRPO's curriculum with the same weights draws from exactly these buckets.
    cur = TaskSampler(fams, [1, 2], "train", fw, lw)
    assert set(cur.buckets) == set(per_bucket)
    with pytest.raises(ValueError, match=r"demos.family_weights: 'mesh_reconstruction' is held"):
        demo_task_ids(spec.model_copy(update={"family_weights": {"mesh_reconstruction": 1}}))


def test_held_out_eval_covers_every_held_out_family_unless_narrowed():
    from training.pipeline import held_out_config
    from training.tasks import TaskError
    from training.tasks.sampling import check_task_choices
    from training.train_config import TrainConfig

    base = {"kind": "pipeline", "model": {"build_tiny": True}, "demos": {"families": ["materials"]},
            "sft": {}, "grpo": {}, "eval": {"families": ["materials"], "held_out_per_family": 1}}
    cfg = TrainConfig.model_validate(base)
    assert held_out_config(cfg).eval.families == held_out_families()
    assert "mesh_reconstruction" in held_out_families()
    base["eval"]["held_out_families"] = ["materials"]
    with pytest.raises(TaskError, match=r"eval.held_out_families: \['materials'\] are not held"):
        check_task_choices(TrainConfig.model_validate(base))


def test_calls_table_goes_between_its_markers_once(tmp_path):
    doc = tmp_path / "TASKS.md"
    doc.write_text("# Tasks\n\nintro\n")
    code, out = cli("tasks", "cards", "--table", "--family", "materials", "--doc", str(doc))
    assert code == 0, out
    first = doc.read_text()
    assert first.startswith("# Tasks\n\nintro\n\n<!-- calls-table -->\n| family | domain | L1 |")
    levels = FAMILIES["materials"].levels
    mean = sum(len(get_task(f"materials:{levels[-1]}:{s}").oracle) for s in range(5)) / 5
    assert "| `materials` | scenes | " in first and f" {mean:g} |" in first
    doc.write_text(first + "after\n")
    code, _ = cli("tasks", "cards", "--table", "--family", "materials", "--doc", str(doc))
    assert doc.read_text() == first + "after\n"  # replaced in place, not appended again
    code, out = cli("tasks", "cards", "--family", "nope")
    assert code == 2 and "unknown task families ['nope']" in out
