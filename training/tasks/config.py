"""Splits, domains and the reward weights families share (each family declares its own weights
and held-out flag: training/tasks/spec.py `Family`)."""

from __future__ import annotations

# Seeds are split by range so a task id alone says which split it belongs to.
SPLITS: dict[str, range] = {
    "train": range(0, 100_000),
    "validation": range(100_000, 110_000),
    "test": range(110_000, 120_000),
}
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
# External benchmark cases (training/tasks/benchmark.py): geometry against their mesh.
BENCHMARK_WEIGHTS = {"geometry": 0.8, "validity": 0.1, "efficiency": 0.05, "recovery": 0.05}


def seed_split(family: str, seed: int, held_out: bool = False) -> str:
    """The split a task belongs to (a held-out family is always `test`); the registry's
    `training.tasks.base.split_of` says whether a family is held out."""
    if held_out:
        return "test"
    if family == "benchmark":
        return "benchmark"
    for name, seeds in SPLITS.items():
        if seed in seeds:
            return name
    return "extra"
