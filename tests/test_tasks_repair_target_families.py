"""The repair and target families (#31): plan lengths, determinism, the held-out split, the
mesh and mass tools on a real worker, and one sampled `verify_task` per family."""

from __future__ import annotations

import random
import statistics

import pytest

from tools.specs import TOOLS
from training.tasks import FAMILIES, get_task, split_ids
from training.tasks.families.repair.mesh_repair import broken_mesh, obj_text
from training.tasks.perturb import QUERIES, verify_task

MINE = {
    "overlap_repair": "repair",
    "mesh_repair": "repair",
    "unit_repair": "repair",
    "boolean_repair": "repair",
    "volume_targets": "targets",
    "mass_targets": "targets",
    "print_walls": "targets",
}
SEEDS = (0, 1, 2)


def _mutating(task_id: str) -> int:
    return sum(1 for c in get_task(task_id).oracle if TOOLS[c["tool"]].mutating)


@pytest.mark.parametrize("name", sorted(MINE))
def test_registered_with_levels_domain_and_weights(name):
    fam = FAMILIES[name]
    assert fam.levels == (1, 2, 3, 4, 5)
    assert fam.domain == MINE[name]
    assert fam.held_out == (name == "mass_targets")


@pytest.mark.parametrize("name", sorted(MINE))
def test_plan_lengths_rise_from_one_call_to_fifteen(name):
    for seed in SEEDS:
        assert 1 <= _mutating(f"{name}:1:{seed}") <= 2
        assert len(get_task(f"{name}:5:{seed}").oracle) >= 15
    means = [statistics.mean(len(get_task(f"{name}:{lvl}:{s}").oracle) for s in SEEDS)
             for lvl in range(1, 6)]
    assert all(a < b for a, b in zip(means, means[1:], strict=False)), means


@pytest.mark.parametrize("name", sorted(MINE))
def test_same_id_same_task_and_seeds_vary(name):
    a, b = get_task(f"{name}:3:7"), get_task(f"{name}:3:7")
    assert a.prompt == b.prompt and a.oracle == b.oracle and a.constraints == b.constraints
    assert len({get_task(f"{name}:1:{s}").prompt for s in range(6)}) > 1


def test_mass_targets_is_held_out_of_training():
    for split in ("train", "validation"):
        assert not any(i.startswith("mass_targets:") for i in split_ids(split, per_family=5))
    assert all(i.startswith("mass_targets:") or FAMILIES[i.split(":")[0]].held_out
               for i in split_ids("heldout", per_family=2))
    assert get_task("mass_targets:1:3").split == "test"


def test_read_only_tools_are_queries_for_the_perturbations():
    # drop_last must drop a repair, never a check that changes nothing
    assert {"mesh_check", "mass_properties"} <= QUERIES
    assert not TOOLS["mesh_check"].mutating and not TOOLS["mass_properties"].mutating
    assert TOOLS["mesh_repair"].mutating


def test_broken_mesh_defects_are_in_the_file():
    rng = random.Random(0)
    square = [(-0.2, -0.2), (0.2, -0.2), (0.2, 0.2), (-0.2, 0.2)]
    verts, faces = broken_mesh(rng, square, 0.3, (0, 0), ["unwelded", "holes", "debris"])
    assert len(verts) == sum(len(f) for f in faces[:-6]) + 8  # soup + the debris cube
    assert len(faces) == 6 - 1 + 6  # a wall missing, the debris cube's six faces
    text = obj_text([("Scan", verts, faces)]).decode()
    assert text.count("\nv ") == len(verts) and text.count("\nf ") == len(faces)


def test_mesh_tools_find_and_fix_every_defect(session):
    rng = random.Random(1)
    square = [(-0.2, -0.2), (0.2, -0.2), (0.2, 0.2), (-0.2, 0.2)]
    verts, faces = broken_mesh(rng, square, 0.3, (1.0, 0), ["unwelded", "debris", "holes", "flipped"])
    (session.workspace / "scan.obj").write_bytes(obj_text([("Scan", verts, faces)]))
    assert session.call("import_file", {"path": "scan.obj"}).ok
    before = session.call("mesh_check", {"name": "Scan"}).output
    assert not before["manifold"] and before["duplicate_vertices"] > 0
    assert before["loose_parts"] >= 2 and before["boundary_edges"] > 0
    for op in ("merge_by_distance", "keep_largest", "fill_holes"):
        assert session.call("mesh_repair", {"name": "Scan", "operation": op}).ok, op
    mid = session.call("mesh_check", {"name": "Scan"}).output
    assert mid["holes"] == 0 and mid["loose_parts"] == 1 and mid["flipped_edges"] > 0
    r = session.call("mesh_repair", {"name": "Scan", "operation": "recalculate_normals"})
    after = r.output["after"]
    assert after["manifold"] and after["normals"] == "outward", after
    assert after["volume"] == pytest.approx(0.4 * 0.4 * 0.3, rel=1e-6)
    walls = session.call("mesh_check", {"name": "Scan"}).output["wall_thickness"]
    assert walls["min"] == pytest.approx(0.3, abs=1e-4)  # the solid's thinnest way through
    bad = session.call("mesh_repair", {"name": "Nope", "operation": "fill_holes"})
    assert not bad.ok and "\n" not in bad.error.message


def test_mass_properties_of_two_boxes(session):
    session.call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [0.1, 0.2, 0.3],
                                   "location": [1, 0, 0.15]})
    session.call("add_primitive", {"kind": "cube", "name": "B", "dimensions": [0.1, 0.2, 0.3],
                                   "location": [-1, 0, 0.15]})
    one = session.call("mass_properties", {"names": ["A"], "density": 7850}).output
    assert one["volume"] == pytest.approx(0.006) and one["mass_kg"] == pytest.approx(47.1)
    assert one["centre_of_mass"] == pytest.approx([1, 0, 0.15], abs=1e-6)
    both = session.call("mass_properties", {"names": ["A", "B"]}).output
    assert both["centre_of_mass"] == pytest.approx([0, 0, 0.15], abs=1e-6)
    assert "mass_kg" not in both


def _sampled() -> list[str]:
    """One (level, seed) per family, drawn by a seeded rng: levels 1-2, and level 5 for one of
    the families whose level-5 plans are cheapest to play."""
    rng = random.Random(31)
    big = rng.choice(("overlap_repair", "unit_repair"))
    return [f"{n}:{5 if n == big else rng.choice((1, 2))}:{rng.randrange(100)}" for n in sorted(MINE)]


# Every second case also runs its perturbations; the others the oracle and the empty plan
# (`tasks verify` runs every perturbation of every family: the suite samples).
PERTURBED = set(_sampled()[::2])


@pytest.mark.parametrize("task_id", _sampled())
def test_oracle_passes_and_every_perturbation_is_caught(task_session, task_id):
    assert verify_task(get_task(task_id), task_session, perturb=task_id in PERTURBED) == []
