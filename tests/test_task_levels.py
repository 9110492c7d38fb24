"""Levels 4 and 5 of the ten original families, and the promise that made them safe to add:
levels 1-3 generate exactly what they did before (recorded episodes replay by task id)."""

from __future__ import annotations

import functools
import hashlib
import json

from training.tasks import FAMILIES, get_task
from training.tasks.perturb import QUERIES

ORIGINAL = (
    "primitive_placement", "scene_editing", "materials", "render_reconstruction", "composition",
    "booleans", "cad_parts", "mesh_reconstruction", "deliverables", "recovery",
)  # fmt: skip

# sha256[:16] of json.dumps([prompt, oracle's working calls, constraints], sort_keys=True), computed
# before levels 4 and 5 existed. A change here means a level 1-3 id no longer means what it meant.
# Read-only looks (perturb.QUERIES) are left out: an oracle may look more without changing the task
# or what its recorded episodes did (recovery level 2 gained two cad_query calls for #31). When
# that rule came in, every id below matched its first pin with the looks hashed too; the four ids
# whose oracles look (cad_parts:3, mesh_reconstruction:3, recovery:1 and :3) were re-pinned then.
PINNED = {
    "primitive_placement:1:0": "615f0d56d8a1bdf2",
    "primitive_placement:2:7": "341386822ca3e4a4",
    "primitive_placement:3:13": "fd039a955eb6d832",
    "scene_editing:1:0": "ec511981b992df0c",
    "scene_editing:2:7": "e23e401dbbe3dce7",
    "scene_editing:3:13": "210795e6d649dc83",
    "materials:1:0": "05b72f38608059ab",
    "materials:2:7": "e0df68e6a21453ca",
    "materials:3:13": "d0c1eac1b6a5d135",
    "render_reconstruction:1:0": "9d502447c4e6bebc",
    "render_reconstruction:2:7": "cd04ab0e4964c12a",
    "render_reconstruction:3:13": "4dd2fe32b07024f6",
    "composition:1:0": "dfe8bd8e134e216f",
    "composition:2:7": "7ab8139215332b5e",
    "composition:3:13": "62c7b28fd7c5a2b2",
    "booleans:1:0": "2c60b2c69133463f",
    "booleans:2:7": "4c2bc6c52743eda8",
    "booleans:3:13": "dead3da93657a042",
    "cad_parts:1:0": "a4b72142d568db2a",
    "cad_parts:2:7": "53c99cf66493e94d",
    "cad_parts:3:13": "5ea3e619ab1cc580",
    "mesh_reconstruction:1:0": "ea72b2f231ab065f",
    "mesh_reconstruction:2:7": "213c8736096b5fc3",
    "mesh_reconstruction:3:13": "2186c3db12971815",
    "deliverables:1:0": "9aa8356b6a9c3117",
    "deliverables:2:7": "b1088ec66aeff23a",
    "deliverables:3:13": "59fbd2041b532087",
    "recovery:1:0": "540380d4dae6afaa",
    "recovery:2:7": "83235b5c93dbcee9",
    "recovery:3:13": "9b64372b4830c84a",
}


def spec_hash(task_id: str) -> str:
    # The template wording (w0): since #49 an id shows its goal in one of several wordings
    # picked by the id, none of which changes the task; w0 is the goal it showed before.
    t = get_task(f"{task_id}:w0")
    working = [c for c in t.oracle if c["tool"] not in QUERIES]
    blob = json.dumps([t.prompt, working, t.constraints], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def test_levels_one_to_three_still_mean_what_they_meant():
    changed = {i: spec_hash(i) for i in PINNED if spec_hash(i) != PINNED[i]}
    assert not changed, changed


@functools.cache
def mean_calls(family: str, level: int, seeds: int = 12) -> float:
    return sum(len(get_task(f"{family}:{level}:{s}").oracle) for s in range(seeds)) / seeds


def test_the_original_families_have_five_levels_and_level_five_is_long():
    for fam in ORIGINAL:
        assert FAMILIES[fam].levels == (1, 2, 3, 4, 5), fam
        for seed in range(12):
            assert len(get_task(f"{fam}:5:{seed}").oracle) >= 15, (fam, seed)
        means = [mean_calls(fam, lvl) for lvl in (3, 4, 5)]
        assert means[0] < means[1] < means[2], (fam, means)


def test_mean_call_count_rises_with_level():
    for fam in ORIGINAL:
        means = [mean_calls(fam, lvl) for lvl in (1, 2, 3, 4, 5)]
        assert all(a < b for a, b in zip(means, means[1:], strict=False)), (fam, means)


def test_new_levels_are_deterministic_and_vary_with_the_seed():
    for fam in ORIGINAL:
        for lvl in (4, 5):
            a, b = get_task(f"{fam}:{lvl}:3"), get_task(f"{fam}:{lvl}:3")
            assert json.dumps(a.describe(), sort_keys=True) == json.dumps(b.describe(), sort_keys=True)
            assert len({get_task(f"{fam}:{lvl}:{s}").prompt for s in range(4)}) >= 3, (fam, lvl)
