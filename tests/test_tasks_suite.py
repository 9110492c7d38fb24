"""Task generation, splits and reward arithmetic (no tool runtime needed)."""

from __future__ import annotations

import json

import pytest

from training import rewards
from training.tasks import (
    FAMILIES,
    SPLITS,
    TaskError,
    get_task,
    list_families,
    split_ids,
    split_of,
)
from training.tasks.checks import CHECKS
from training.tasks.config import DOMAINS
from training.tasks.families import REWARD_WEIGHTS

QUERIES = {"get_scene", "cad_query", "cad_pattern", "measure", "render"}


def all_ids(seeds=(0, 1, 2)):
    return [f"{f}:{lvl}:{s}" for f in FAMILIES for lvl in FAMILIES[f].levels for s in seeds]


def test_at_least_ten_families_with_five_levels_each():
    assert len(FAMILIES) >= 10
    for fam in FAMILIES.values():
        assert fam.levels == (1, 2, 3, 4, 5), fam.name
    listed = list_families()
    assert {f["family"] for f in listed} == set(FAMILIES)
    for f in listed:
        assert set(f) == {"family", "domain", "levels", "description", "held_out", "split"}
        assert f["description"] and f["domain"] in DOMAINS


def test_generation_is_deterministic_per_id_and_varies_with_seed():
    for task_id in all_ids():
        a, b = get_task(task_id), get_task(task_id)
        assert json.dumps(a.describe(), sort_keys=True) == json.dumps(b.describe(), sort_keys=True)
    for fam in FAMILIES:
        prompts = {get_task(f"{fam}:2:{s}").prompt for s in range(6)}
        assert len(prompts) >= 3, fam


def test_level_one_is_short_and_the_top_level_needs_at_least_fifteen_calls():
    for fam in FAMILIES.values():
        for seed in range(5):
            low = get_task(f"{fam.name}:{fam.levels[0]}:{seed}")
            work = [c for c in low.oracle if c["tool"] not in QUERIES]
            assert 1 <= len(work) <= 2, (low.id, low.oracle)
            top = get_task(f"{fam.name}:{fam.levels[-1]}:{seed}")
            assert len(top.oracle) >= 15, top.id


def test_tasks_are_complete_and_use_only_known_tools_and_checks():
    from tools import tool_names

    known = set(tool_names())
    for task_id in all_ids(seeds=(0,)):
        t = get_task(task_id)
        assert t.prompt and t.constraints and t.oracle and t.budget >= len(t.oracle) + 2
        for step in t.oracle + t.spec.start:
            assert step["tool"] in known, (task_id, step)
        for c in t.constraints:
            assert c["kind"] in CHECKS, (task_id, c)
        assert abs(sum(t.weights.values()) - 1.0) < 1e-9


def test_splits_do_not_overlap_and_hold_out_one_family():
    ranges = list(SPLITS.values())
    for i, a in enumerate(ranges):
        for b in ranges[i + 1 :]:
            assert not set(a) & set(b)
    ids = {s: split_ids(s, per_family=6) for s in SPLITS}
    for i, a in enumerate(SPLITS):
        for b in list(SPLITS)[i + 1 :]:
            assert not set(ids[a]) & set(ids[b])
    for split, listed in ids.items():
        for task_id in listed:
            assert get_task(task_id).split == split
    held = [name for name, f in FAMILIES.items() if f.held_out]
    assert "mesh_reconstruction" in held
    for name in held:
        assert all(not i.startswith(f"{name}:") for s in ("train", "validation") for i in ids[s])
        assert any(i.startswith(f"{name}:") for i in ids["test"])
        assert split_of(name, 3) == "test"
    assert set(split_ids("heldout", per_family=3)) <= set(split_ids("test", per_family=3))
    assert split_ids("train", per_family=2, families=["materials"]) == [
        "materials:1:0",
        "materials:2:1",
    ]


def test_every_family_has_reward_weights():
    assert set(REWARD_WEIGHTS) == set(FAMILIES) | {"benchmark"}


@pytest.mark.parametrize(
    "bad",
    ["nope:1:1", "materials:9:1", "materials:1", "materials:x:1", "materials:1:-4", ""],
)
def test_bad_ids_raise_an_actionable_error(bad):
    with pytest.raises(TaskError):
        get_task(bad)


def test_unknown_split_or_family_is_refused():
    with pytest.raises(TaskError, match="unknown split"):
        split_ids("dev")
    with pytest.raises(TaskError, match="unknown families"):
        split_ids("train", families=["nope"])


# ---------------------------------------------------------------- reward arithmetic


def test_components_combine_by_weight_and_invalid_results_get_the_hard_penalty():
    w = {"a_missing": 1.0, "constraints": 0.5, "validity": 0.5}
    r = rewards.combine({"constraints": 1.0, "validity": 0.5}, w, True, True)
    assert r.total == pytest.approx(0.75) and r.success
    bad = rewards.combine({"constraints": 1.0, "validity": 1.0}, w, False, True)
    assert bad.total == rewards.INVALID_TOTAL and not bad.success
    with pytest.raises(ValueError, match="outside its range"):
        rewards.combine({"validity": 1.5}, w, True, True)


def test_cadrille_form_and_validity():
    assert rewards.cadrille(0.9, True) == pytest.approx(9.0)
    assert rewards.cadrille(0.9, False) == -10.0
    calls = [{"tool": "a", "args": {}, "ok": True}, {"tool": "b", "args": {}, "ok": False}]
    assert rewards.validity(calls) == 0.5
    assert rewards.validity([]) == 1.0


def test_recovery_punishes_repeating_a_failing_call_verbatim():
    fail = {"tool": "cad_fillet", "args": {"radius": 9}, "ok": False}
    fixed = {"tool": "cad_fillet", "args": {"radius": 4}, "ok": True}
    assert rewards.recovery([fixed], success=True) == 1.0
    assert rewards.recovery([fail, fixed], success=True) == 1.0
    assert rewards.recovery([fail, fail, fixed], success=True) == 0.5
    assert rewards.recovery([fail, fail], success=False) == 0.0
    assert rewards.repeated_failures([fail, fail, fail]) == 2


def test_efficiency_falls_from_oracle_length_to_budget():
    assert rewards.efficiency(3, 3, 10) == 1.0
    assert rewards.efficiency(10, 3, 10) == 0.0
    assert rewards.efficiency(6, 2, 10) == pytest.approx(0.5)


def test_per_object_matching_ignores_names_and_counts_missing_and_extra_objects():
    import trimesh

    from training.tasks.scene_geometry import matched_iou, primitive_mesh

    items = [
        {"name": "A", "kind": "cube", "dimensions": [1, 1, 1], "location": [0, 0, 0.5]},
        {"name": "B", "kind": "cylinder", "dimensions": [1, 1, 2], "location": [4, 0, 1]},
    ]
    right = {"whatever": primitive_mesh(items[1]), "other": primitive_mesh(items[0])}
    score, pairs = matched_iou(right, items)
    assert score == pytest.approx(1.0) and {p["object"] for p in pairs} == {"whatever", "other"}
    half, _ = matched_iou({"only": primitive_mesh(items[0])}, items)
    assert half == pytest.approx(0.5)
    blob = trimesh.util.concatenate([primitive_mesh(it) for it in items])
    merged, _ = matched_iou({"blob": blob}, items)
    assert merged < 0.5
    extra = dict(right, spare=primitive_mesh({**items[0], "location": [9, 9, 0.5]}))
    assert matched_iou(extra, items)[0] == pytest.approx(2 / 3)
