"""Parts picked from the part catalogue (training/tasks/recipes/parts.py) for the catalogue families
(cad_parts, mesh_reconstruction, deliverables): the pick by level, the plan, topology checks
and the geometry spec.
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.recipes import parts as P

PART_IOU_MIN = (
    0.999  # exact solids: a correct part scores 1 to ~1e-9; a missing 1 mm chamfer ~0.998
)


def pick(level: int, rng: random.Random) -> P.Part:
    if level == 1:
        return rng.choice(P.SIMPLE)(rng)
    if level == 2:
        return rng.choice(P.MEDIUM)(rng)
    if level == 4:
        return P.bossed_plate(rng)
    return P.mounting_plate(rng)


def pick_pair(rng: random.Random) -> tuple[P.Part, P.Part]:
    """Level 5: a padded housing (thirteen steps) and a ring whose bore fits its boss (four)."""
    housing = P.bossed_plate(rng, pad=True)
    return housing, P.cap(rng, fits=housing.params["boss_diameter"])


def part_plan(part: P.Part, rng: random.Random, level: int) -> list[dict[str, Any]]:
    # Levels 3+ exist to need many steps: always the structured plan. Otherwise either form
    # (cadquery_script is the form the strongest CAD-RL results use).
    if part.plan is not None and (level >= 3 or rng.random() < 0.5):
        return part.plan
    return part.script_plan()


def topology_check(part: P.Part, level: int) -> list[dict[str, Any]]:
    # The many-feature part: every feature must be there, however small its volume.
    if level < 3:
        return []
    return [{"kind": "topology", "object": part.name, "script": part.script}]


def part_geometry(*parts: P.Part) -> dict[str, Any]:
    return {"kind": "parts", "parts": [{"name": p.name, "script": p.script} for p in parts]}
