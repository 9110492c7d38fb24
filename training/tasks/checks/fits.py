"""Constraint kinds for assemblies and edits: a part through a hole, faces flush, the gaps
of a part in a cavity, and a CAD part that is exactly a reference part where it should be.

Listed in `checks.CHECKS` (training/tasks/checks/__init__.py) with the other kinds.
Everything is measured from the verifier's clean session: world boxes from `get_scene`,
exact solids from STEP exports (millimetres).
"""

from __future__ import annotations

import numpy as np

from training.tasks.checks.measure import Measured, centre, missing_object
from training.tasks.context import EvalContext

AXES = "xyz"


def _face(o: dict, face: str) -> float:
    """The coordinate of a box face: '+x' is bbox_max x, '-z' bbox_min z."""
    i = AXES.index(face[1])
    return float(o["bbox_max"][i] if face[0] == "+" else o["bbox_min"][i])


def c_in_hole(
    ctx: EvalContext, object: str, point, hole_diameter: float, span, axis: str = "z",
    tol: float = 0.002,
) -> Measured:
    """A round part (bolt shank, pin) on a hole's axis, clear of the hole's wall, reaching
    through the whole stack: off the axis by at most `tol`, off-axis + its radius within the
    hole's radius, and its extent along `axis` covering `span` = [lo, hi]."""
    o = ctx.obj(object)
    if o is None:
        return missing_object(object)
    k = AXES.index(axis)
    others = [i for i in range(3) if i != k]
    c = centre(o)
    off = float(np.hypot(*(c[i] - p for i, p in zip(others, point, strict=True))))
    radius = max(o["bbox_max"][i] - o["bbox_min"][i] for i in others) / 2
    clear = off + radius <= hole_diameter / 2 + 1e-4
    reach = o["bbox_min"][k] <= span[0] + tol and o["bbox_max"][k] >= span[1] - tol
    ok = off <= tol and clear and reach
    return ok, {"off_axis": round(off, 5), "radius": round(float(radius), 5),
                "from": round(float(o["bbox_min"][k]), 4), "to": round(float(o["bbox_max"][k]), 4)}


def c_flush(ctx: EvalContext, a: str, face_a: str, b: str, face_b: str, tol: float) -> Measured:
    """Face `face_a` of `a`'s box lies in the plane of `face_b` of `b`'s box. Facing faces
    ('-z' on '+z') must also touch: the boxes overlap across the other two axes."""
    oa, ob = ctx.obj(a), ctx.obj(b)
    if oa is None or ob is None:
        return missing_object(a if oa is None else b)
    off = _face(oa, face_a) - _face(ob, face_b)
    ok = abs(off) <= tol
    if face_a[1] == face_b[1] and face_a[0] != face_b[0]:
        k = AXES.index(face_a[1])
        overlap = min(
            min(oa["bbox_max"][i], ob["bbox_max"][i]) - max(oa["bbox_min"][i], ob["bbox_min"][i])
            for i in range(3) if i != k
        )
        ok &= overlap > tol
    return ok, round(float(off), 5)


def c_cavity_gap(ctx: EvalContext, object: str, cavity, faces: dict[str, list[float]]) -> Measured:
    """The clearance between a part's box and a cavity `[lo, hi]` on each named face: '+x' is
    cavity hi x minus the part's max x; negative is interference. Each within [min, max]."""
    o = ctx.obj(object)
    if o is None:
        return missing_object(object)
    lo, hi = (np.asarray(v, float) for v in cavity)
    gaps = {}
    for face in faces:
        i = AXES.index(face[1])
        gaps[face] = float(hi[i] - o["bbox_max"][i] if face[0] == "+" else o["bbox_min"][i] - lo[i])
    ok = all(faces[f][0] <= g <= faces[f][1] for f, g in gaps.items())
    return ok, {f: round(g, 5) for f, g in gaps.items()}


def c_part_at(
    ctx: EvalContext, object: str, script: str, location_mm=(0.0, 0.0, 0.0), iou_min: float = 0.9995
) -> Measured:
    """The CAD part is the reference part (our own CadQuery script) moved to `location_mm`,
    in world space: exact B-rep IoU, nothing forgiven. A changed dimension, a feature left
    out or one too many, a part moved: all lower it."""
    from training.rewards.geometry import brep_iou
    from training.tasks.shapes import build_reference

    solid = ctx.solid(object)
    if solid is None:
        return False, "no CAD part of that name"
    ref = build_reference(script)
    if any(location_mm):
        ref = ref.translate(tuple(float(v) for v in location_mm))
    iou = brep_iou(ref, solid)
    return iou >= iou_min, round(iou, 6)

