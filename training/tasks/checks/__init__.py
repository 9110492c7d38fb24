"""Checkers: constraints evaluated on the final scene, and the task's reward breakdown.

Everything is measured from what the session exposes: `get_scene` (world-space boxes,
transforms, materials), `cad_query` facts, and files exported into the session's workspace
(meshes for Blender objects, STEP for exact CAD geometry). A constraint is plain data
(`{"kind": ..., ...}`) so `tasks show` can print it; `CHECKS[kind]` evaluates it. The kinds
live one concern a module (scene, solids, tool_measures, camera, fits); `CHECKS` below is the
one table of them, and the verdict (checks/verdict.py) reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from training.tasks.checks import camera, fits, scene, solids, tool_measures
from training.tasks.checks.measure import Measured
from training.tasks.context import EvalContext

CHECKS: dict[str, Callable[..., Measured]] = {
    "exists": scene.c_exists,
    "absent": scene.c_absent,
    "count": scene.c_count,
    "position": scene.c_position,
    "size": scene.c_size,
    "rotation": scene.c_rotation,
    "material": scene.c_material,
    "shape_kind": scene.c_shape_kind,
    "on_ground": scene.c_on_ground,
    "on_top": scene.c_on_top,
    "touching": scene.c_touching,
    "aligned": scene.c_aligned,
    "evenly_spaced": scene.c_evenly_spaced,
    "symmetric": scene.c_symmetric,
    "mesh_volume": solids.c_mesh_volume,
    "occupancy": solids.c_occupancy,
    "part": solids.c_part,
    "holes": solids.c_holes,
    "topology": solids.c_topology,
    "placed": solids.c_placed,
    "feature": solids.c_feature,
    "gap": scene.c_gap,
    "light": camera.c_light,
    "framed": camera.c_framed,
    "mesh_health": tool_measures.c_mesh_health,
    "mass": tool_measures.c_mass,
    "centre_of_mass": tool_measures.c_centre_of_mass,
    "no_overlap": scene.c_no_overlap,
    "wall_thickness": tool_measures.c_wall_thickness,
    "in_hole": fits.c_in_hole,
    "flush": fits.c_flush,
    "cavity_gap": fits.c_cavity_gap,
    "part_at": fits.c_part_at,
}


def check(ctx: EvalContext, constraint: dict[str, Any]) -> Measured:
    args = {k: v for k, v in constraint.items() if k not in ("kind", "text", "weight")}
    return CHECKS[constraint["kind"]](ctx, **args)
