"""Constraint kinds on solids: mesh volume and occupancy of Blender objects; exact CAD parts
(size and volume, holes by diameter, face types, placement against a reference, a feature
judged alone).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from training.tasks.checks.measure import (
    Measured,
    missing_object,
)
from training.tasks.context import EvalContext


def c_mesh_volume(ctx: EvalContext, object: str, value: float, tol_rel: float) -> Measured:
    mesh = ctx.meshes().get(object)
    if mesh is None:
        return missing_object(object)
    v = abs(float(mesh.volume))
    return abs(v - value) <= tol_rel * value, round(v, 5)


def c_occupancy(ctx: EvalContext, object: str, empty=(), filled=()) -> Measured:
    """Points that must lie outside (a hole's axis) or inside (a boss) the object's mesh."""
    from training.rewards.geometry import voxel_occupancy

    mesh = ctx.meshes().get(object)
    if mesh is None:
        return missing_object(object)

    def inside(p) -> bool:
        # A one-voxel grid centred on the point: its winding number decides inside/outside.
        p = np.asarray(p, float)
        return bool(voxel_occupancy(mesh, p - 1e-3, p + 1e-3, 1)[0, 0, 0])

    wrong = [p for p in empty if inside(p)] + [p for p in filled if not inside(p)]
    return not wrong, {"wrong": wrong}


def c_part(
    ctx: EvalContext, object: str, size=None, volume=None, tol_rel: float = 0.01
) -> Measured:
    """A valid single-solid CAD part, optionally of a bounding size and volume (exact B-rep)."""
    from training.rewards.geometry import solid_volume, tight_bbox

    solid = ctx.solid(object)
    if solid is None:
        return False, "no CAD part of that name"
    lo, hi = tight_bbox(solid)
    dims, vol = hi - lo, solid_volume(solid)
    ok = bool(solid.isValid()) and len(solid.Solids()) == 1
    if size is not None:
        ok &= bool(np.all(np.abs(dims - np.asarray(size)) <= tol_rel * np.asarray(size) + 1e-6))
    if volume is not None:
        ok &= abs(vol - volume) <= tol_rel * volume
    return ok, {"size": [round(float(x), 4) for x in dims], "volume": round(vol, 4)}


def c_holes(ctx: EvalContext, object: str, diameter: float, count: int,
            whole: bool = False) -> Measured:  # fmt: skip
    """Number of distinct cylindrical faces of a diameter (grouped by axis line); `whole`:
    only those that go more than half-way round (holes, not rounded edges)."""
    from training.tasks.shapes import count_cylinders

    solid = ctx.solid(object)
    if solid is None:
        return False, "no exact solid"
    n = count_cylinders(solid, diameter / 2, whole=whole)
    return n == count, n


def c_topology(ctx: EvalContext, object: str, script: str) -> Measured:
    """Same number of faces of each surface type as the reference part (every feature there)."""
    from training.tasks.shapes import build_reference, face_types

    solid = ctx.solid(object)
    if solid is None:
        return False, "no exact solid"
    seen, want = face_types(solid), face_types(build_reference(script))
    return seen == want, seen


def c_placed(ctx: EvalContext, object: str, script: str, tol: float = 0.5) -> Measured:
    """The part's exact bounding box (centre and size) matches the reference's, in mm: the
    geometry IoU forgives placement, this does not."""
    from training.rewards.geometry import tight_bbox
    from training.tasks.shapes import build_reference

    solid = ctx.solid(object)
    if solid is None:
        return False, "no exact solid"
    (lo, hi), (rlo, rhi) = tight_bbox(solid), tight_bbox(build_reference(script))
    err = float(max(np.max(np.abs(lo - rlo)), np.max(np.abs(hi - rhi))))
    return err <= tol, {"bbox_min": [round(float(v), 3) for v in lo],
                        "bbox_max": [round(float(v), 3) for v in hi], "error": round(err, 4)}


def c_feature(ctx: EvalContext, object: str, script: str, base: str, min_iou: float = 0.9) -> Measured:
    """A small feature (engraved or raised text) judged on its own: what sets the part apart
    from the blank `base` (cut away or added) against what sets the reference apart, by IoU."""
    from tools.cadfix import fixed_solids
    from training.rewards.geometry import brep_iou, fuzzy_value, solid_volume
    from training.tasks.shapes import build_reference

    solid = ctx.solid(object)
    if solid is None:
        return False, "no exact solid"
    blank = fixed_solids(build_reference(base))

    def feature(shape: Any) -> Any:
        # fuzzy: a part placed through Blender is float32-noise off its blank (brep_iou)
        shape = fixed_solids(shape)
        tol = fuzzy_value(blank, shape)
        return blank.cut(shape, tol=tol).fuse(shape.cut(blank, tol=tol), tol=tol)

    want, got = feature(build_reference(script)), feature(solid)
    if solid_volume(got) <= 0:
        return False, {"iou": 0.0, "feature_volume": 0.0}
    iou = brep_iou(want, got)
    return iou >= min_iou, {"iou": round(iou, 4), "feature_volume": round(solid_volume(got), 3)}
