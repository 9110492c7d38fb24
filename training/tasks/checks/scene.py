"""Constraint kinds on scene objects, from `get_scene`'s world boxes: exists, absent, count,
position, size, rotation, material, shape kind, on the ground, on top, touching, aligned,
evenly spaced, symmetric, no overlap, gap.
"""

from __future__ import annotations

import numpy as np

from training.tasks.checks.measure import (
    Measured,
    centre,
    hex_of,
    missing_object,
    rotation_error_deg,
)
from training.tasks.context import EvalContext


def c_exists(ctx: EvalContext, object: str) -> Measured:
    return ctx.obj(object) is not None, object in ctx.objects


def c_absent(ctx: EvalContext, object: str) -> Measured:
    return ctx.obj(object) is None, object in ctx.objects


def c_count(ctx: EvalContext, equal: int, source: str | None = None) -> Measured:
    n = sum(1 for o in ctx.objects.values() if source is None or o.get("source") == source)
    return n == equal, n


def c_position(ctx: EvalContext, object: str, value, tol: float) -> Measured:
    o = ctx.obj(object)
    if o is None:
        return missing_object(object)
    c = centre(o)
    return bool(np.max(np.abs(c - np.asarray(value))) <= tol), [round(v, 4) for v in c]


def c_size(ctx: EvalContext, object: str, value, tol_rel: float) -> Measured:
    o = ctx.obj(object)
    if o is None:
        return missing_object(object)
    d = np.asarray(o["dimensions"], float)
    v = np.asarray(value, float)
    return bool(np.all(np.abs(d - v) <= tol_rel * np.maximum(v, 1e-9))), [round(x, 4) for x in d]


def c_rotation(ctx: EvalContext, object: str, value, tol_deg: float) -> Measured:
    o = ctx.obj(object)
    if o is None:
        return missing_object(object)
    err = rotation_error_deg(o["rotation_deg"], value)
    return err <= tol_deg, round(err, 3)


def c_material(
    ctx: EvalContext, object: str, color: str, metallic=None, roughness=None, tol=12
) -> Measured:
    o = ctx.obj(object)
    if o is None:
        return missing_object(object)
    m = o.get("material")
    if not m:
        return False, None
    ok = bool(np.max(np.abs(hex_of(m["color"]) - hex_of(color))) <= tol)
    if metallic is not None:
        ok &= abs(float(m.get("metallic", 0)) - metallic) <= 0.05
    if roughness is not None:
        ok &= abs(float(m.get("roughness", 0.5)) - roughness) <= 0.05
    return ok, m


def c_shape_kind(ctx: EvalContext, object: str, primitive: str) -> Measured:
    from training.tasks.scene_geometry import kind_of

    o, mesh = ctx.obj(object), ctx.meshes().get(object)
    if o is None or mesh is None:
        return missing_object(object)
    seen = kind_of(mesh, o["dimensions"])  # the object's own size: turned boxes stay boxes
    return seen == primitive, seen


def c_on_ground(ctx: EvalContext, object: str, tol: float) -> Measured:
    o = ctx.obj(object)
    if o is None:
        return missing_object(object)
    z = float(o["bbox_min"][2])
    return abs(z) <= tol, round(z, 4)


def c_on_top(ctx: EvalContext, upper: str, lower: str, tol: float) -> Measured:
    a, b = ctx.obj(upper), ctx.obj(lower)
    if a is None or b is None:
        return missing_object(upper if a is None else lower)
    gap = float(a["bbox_min"][2] - b["bbox_max"][2])
    c = centre(a)
    over = all(b["bbox_min"][i] - tol <= c[i] <= b["bbox_max"][i] + tol for i in (0, 1))
    return abs(gap) <= tol and over, {"gap": round(gap, 4), "over": over}


def c_touching(ctx: EvalContext, a: str, b: str, tol: float) -> Measured:
    oa, ob = ctx.obj(a), ctx.obj(b)
    if oa is None or ob is None:
        return missing_object(a if oa is None else b)
    gaps = [
        max(oa["bbox_min"][i] - ob["bbox_max"][i], ob["bbox_min"][i] - oa["bbox_max"][i])
        for i in range(3)
    ]
    g = float(max(gaps))  # > 0: apart along that axis; < 0: boxes interpenetrate
    return -tol <= g <= tol, round(g, 4)


def c_aligned(ctx: EvalContext, objects: list[str], axes: str, tol: float) -> Measured:
    found = [ctx.obj(n) for n in objects]
    if any(o is None for o in found):
        return False, "missing objects"
    idx = ["xyz".index(a) for a in axes]
    cs = np.array([centre(o)[idx] for o in found])
    spread = float(np.max(np.ptp(cs, axis=0)))
    return spread <= tol, round(spread, 4)


def c_evenly_spaced(
    ctx: EvalContext, objects: list[str], axis: str, tol: float, spacing=None
) -> Measured:
    found = [ctx.obj(n) for n in objects]
    if any(o is None for o in found):
        return False, "missing objects"
    i = "xyz".index(axis)
    gaps = np.diff(sorted(float(centre(o)[i]) for o in found))
    ok = float(np.ptp(gaps)) <= tol and float(np.min(gaps)) > tol
    if spacing is not None:
        ok &= bool(np.all(np.abs(gaps - spacing) <= tol))
    return bool(ok), [round(g, 4) for g in gaps]


def c_symmetric(ctx: EvalContext, a: str, b: str, axis: str, tol: float) -> Measured:
    oa, ob = ctx.obj(a), ctx.obj(b)
    if oa is None or ob is None:
        return missing_object(a if oa is None else b)
    i = "xyz".index(axis)
    mirrored = centre(ob).copy()
    mirrored[i] = -mirrored[i]
    err = float(np.max(np.abs(centre(oa) - mirrored)))
    return err <= tol, round(err, 4)


def c_no_overlap(ctx: EvalContext, objects: list[str], tol: float) -> Measured:
    """No two of the objects' boxes interpenetrate by more than `tol` (touching is fine)."""
    found = [ctx.obj(n) for n in objects]
    if any(o is None for o in found):
        return False, "missing objects"
    worst, pair = 0.0, None
    for i, a in enumerate(found):
        for b in found[i + 1 :]:
            depth = min(
                min(a["bbox_max"][k], b["bbox_max"][k]) - max(a["bbox_min"][k], b["bbox_min"][k])
                for k in range(3)
            )
            if depth > worst:
                worst, pair = float(depth), [a["name"], b["name"]]
    return worst <= tol, {"depth": round(worst, 4), "pair": pair}


def c_gap(ctx: EvalContext, a: str, b: str, axis: str, value: float, tol: float) -> Measured:
    """The clear distance between two boxes along one axis (0: touching on that axis)."""
    oa, ob = ctx.obj(a), ctx.obj(b)
    if oa is None or ob is None:
        return missing_object(a if oa is None else b)
    i = "xyz".index(axis)
    g = float(max(oa["bbox_min"][i] - ob["bbox_max"][i], ob["bbox_min"][i] - oa["bbox_max"][i]))
    return abs(g - value) <= tol, round(g, 4)
