"""The one place where splits, the held-out family and per-family reward weights are declared."""

from __future__ import annotations

# Seeds are split by range so a task id alone says which split it belongs to.
SPLITS: dict[str, range] = {
    "train": range(0, 100_000),
    "validation": range(100_000, 110_000),
    "test": range(110_000, 120_000),
}
# The first held-out family (kept for old configs and reports); every held-out family is
# marked `held_out=True` at registration (training/tasks/base.py, `held_out_families()`).
HELD_OUT_FAMILY = "mesh_reconstruction"
# The kinds of 3D work a family belongs to (`tasks list` shows them).
DOMAINS = ("parts", "assemblies", "edits", "repair", "targets", "scenes", "reconstruction",
           "deliverables", "recovery")

SCENE_WEIGHTS = {
    "constraints": 0.6,
    "geometry": 0.2,
    "validity": 0.1,
    "efficiency": 0.05,
    "recovery": 0.05,
}
CAD_WEIGHTS = {
    "geometry": 0.5,
    "constraints": 0.3,
    "validity": 0.1,
    "efficiency": 0.05,
    "recovery": 0.05,
}
# Tasks judged on relations and stated measures alone (no reference geometry to score).
RELATION_WEIGHTS = {"constraints": 0.8, "validity": 0.1, "efficiency": 0.05, "recovery": 0.05}
REWARD_WEIGHTS: dict[str, dict[str, float]] = {
    "primitive_placement": SCENE_WEIGHTS,
    "scene_editing": SCENE_WEIGHTS,
    "materials": RELATION_WEIGHTS,
    "composition": SCENE_WEIGHTS,
    "booleans": {**SCENE_WEIGHTS, "geometry": 0.3, "constraints": 0.5},
    "cad_parts": CAD_WEIGHTS,
    "render_reconstruction": {
        "geometry": 0.6,
        "constraints": 0.2,
        "validity": 0.1,
        "efficiency": 0.05,
        "recovery": 0.05,
    },
    "mesh_reconstruction": CAD_WEIGHTS,
    "deliverables": {
        "completeness": 0.3,
        "geometry": 0.3,
        "constraints": 0.2,
        "validity": 0.1,
        "efficiency": 0.05,
        "recovery": 0.05,
    },
    "recovery": {
        "constraints": 0.5,
        "recovery": 0.3,
        "validity": 0.1,
        "efficiency": 0.1,
    },
    # External benchmark cases (training/tasks/benchmark.py): geometry against their mesh.
    "benchmark": {"geometry": 0.8, "validity": 0.1, "efficiency": 0.05, "recovery": 0.05},
}


def seed_split(family: str, seed: int, held_out: bool = False) -> str:
    """The split a task belongs to (a held-out family is always `test`); the registry's
    `training.tasks.base.split_of` says whether a family is held out."""
    if held_out or family == HELD_OUT_FAMILY:
        return "test"
    if family == "benchmark":
        return "benchmark"
    for name, seeds in SPLITS.items():
        if seed in seeds:
            return name
    return "extra"
