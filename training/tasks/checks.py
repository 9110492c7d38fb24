"""Checkers: constraints evaluated on the final scene, and the task's reward breakdown.

Everything is measured from what the session exposes: `get_scene` (world-space boxes,
transforms, materials), `cad_query` facts, and files exported into the session's workspace
(meshes for Blender objects, STEP for exact CAD geometry). A constraint is plain data
(`{"kind": ..., ...}`) so `tasks show` can print it; `CHECKS[kind]` evaluates it.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from typing import Any

import numpy as np

from tools import TOOLS, Session
from training import rewards
from training.tasks.context import EvalContext
from training.tasks.shapes import evaluate_geometry

Measured = tuple[bool, Any]


# ---------------------------------------------------------------- helpers on scene objects


def centre(o: dict) -> np.ndarray:
    return (np.asarray(o["bbox_min"], float) + np.asarray(o["bbox_max"], float)) / 2


def _rot(deg) -> np.ndarray:
    rx, ry, rz = (math.radians(v) for v in deg)
    cx, sx, cy, sy, cz, sz = (
        math.cos(rx),
        math.sin(rx),
        math.cos(ry),
        math.sin(ry),
        math.cos(rz),
        math.sin(rz),
    )
    mx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    my = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    mz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return mz @ my @ mx


def rotation_error_deg(a, b) -> float:
    r = _rot(a).T @ _rot(b)
    return math.degrees(math.acos(max(-1.0, min(1.0, (np.trace(r) - 1) / 2))))


def _hex(c: str) -> np.ndarray:
    c = c.lstrip("#")
    return np.array([int(c[i : i + 2], 16) for i in (0, 2, 4)], float)


def missing_object(name: str) -> Measured:
    return False, f"{name} missing"


# ---------------------------------------------------------------- constraint evaluators


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
    ok = bool(np.max(np.abs(_hex(m["color"]) - _hex(color))) <= tol)
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


# ---------------------------------------------------------------- repair and targets (#31)


def _tool(ctx: EvalContext, tool: str, args: dict) -> dict | None:
    """A read-only tool's answer in the checker's (clean) session, cached per call."""
    cache = ctx.__dict__.setdefault("_tool_answers", {})
    key = (tool, repr(sorted(args.items())))
    if key not in cache:
        r = ctx.session.call(tool, args)
        cache[key] = r.output if r.ok else None
    return cache[key]


MESH_FACTS = {
    "closed": lambda h: h["boundary_edges"] == 0 and h["non_manifold_edges"] == 0,
    "consistent": lambda h: h["flipped_edges"] == 0,
    "outward": lambda h: h["normals"] == "outward",
    "welded": lambda h: h["duplicate_vertices"] == 0,
    "one_piece": lambda h: h["loose_parts"] == 1 and h["loose_geometry"] == 0,
    "manifold": lambda h: bool(h["manifold"]),
}


def c_mesh_health(ctx: EvalContext, object: str, require: list[str]) -> Measured:
    """Facts of a mesh as `mesh_check` measures them in the clean session (closed, welded...)."""
    if ctx.obj(object) is None:
        return missing_object(object)
    h = _tool(ctx, "mesh_check", {"name": object})
    if h is None:
        return False, "not a mesh"
    failed = [f for f in require if not MESH_FACTS[f](h)]
    keys = ("boundary_edges", "holes", "flipped_edges", "normals", "duplicate_vertices",
            "loose_parts", "non_manifold_edges")
    return not failed, {"failed": failed, **{k: h[k] for k in keys}}


def c_wall_thickness(ctx: EvalContext, object: str, value: float, tol_rel: float) -> Measured:
    """Walls `value` metres thick, as `mesh_check` measures them (rays through the material):
    the area-weighted 5th percentile within `tol_rel`, and nowhere thinner than that allows."""
    if ctx.obj(object) is None:
        return missing_object(object)
    h = _tool(ctx, "mesh_check", {"name": object})
    w = h and h.get("wall_thickness")
    if not w:
        return False, "not measurable"
    ok = abs(w["p5"] - value) <= tol_rel * value and w["min"] >= value * (1 - 2 * tol_rel)
    return ok, w


def _mass_props(ctx: EvalContext, objects: list[str]) -> dict | None:
    return _tool(ctx, "mass_properties", {"names": list(objects)})


def c_mass(ctx: EvalContext, objects: list[str], density: float, value: float,
           tol_rel: float) -> Measured:
    """The mass (kg) of objects of one density (kg/m³), from their meshes' volume."""
    missing = [n for n in objects if ctx.obj(n) is None]
    if missing:
        return missing_object(missing[0])
    p = _mass_props(ctx, objects)
    if p is None:
        return False, "not measurable"
    m = p["volume"] * density
    return abs(m - value) <= tol_rel * value, round(m, 5)


def c_centre_of_mass(ctx: EvalContext, densities: dict[str, float], value, tol: float,
                     axes: str = "xyz") -> Measured:
    """The centre of mass of objects of given densities (kg/m³) lies at `value` (metres) along
    `axes` (the other coordinates of `value` are ignored)."""
    missing = [n for n in densities if ctx.obj(n) is None]
    if missing:
        return missing_object(missing[0])
    total, moment = 0.0, np.zeros(3)
    for name, rho in densities.items():
        p = _mass_props(ctx, [name])
        if p is None or p["centre_of_mass"] is None:
            return False, f"{name} not measurable"
        total += p["volume"] * rho
        moment += p["volume"] * rho * np.asarray(p["centre_of_mass"], float)
    if total <= 0:
        return False, "no mass"
    com = moment / total
    idx = ["xyz".index(a) for a in axes]
    err = float(np.max(np.abs(com[idx] - np.asarray(value, float)[idx])))
    return err <= tol, [round(float(x), 4) for x in com]


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


def _forward(o: dict) -> np.ndarray:
    """Where a light or camera points: its local -Z in world space."""
    return _rot(o["rotation_deg"]) @ np.array([0.0, 0.0, -1.0])


def c_light(
    ctx: EvalContext, object: str, type: str, energy, aim=None, tol_deg: float = 5.0,
    location=None, tol: float = 0.1,
) -> Measured:
    """A light of a kind, with energy in [lo, hi], optionally at a place and aimed at a point."""
    o = ctx.obj(object)
    if o is None:
        return missing_object(object)
    light = o.get("light")
    if not light:
        return False, f"{object} is not a light"
    ok = light["kind"] == type and energy[0] <= light["energy"] <= energy[1]
    out: dict[str, Any] = {"kind": light["kind"], "energy": light["energy"]}
    loc = np.asarray(o["location"], float)
    if location is not None:
        off = float(np.max(np.abs(loc - np.asarray(location, float))))
        ok &= off <= tol
        out["offset"] = round(off, 4)
    if aim is not None:
        want = np.asarray(aim, float) - loc
        cosang = float(np.dot(_forward(o), want) / max(np.linalg.norm(want), 1e-9))
        err = math.degrees(math.acos(max(-1.0, min(1.0, cosang))))
        ok &= err <= tol_deg
        out["aim_error_deg"] = round(err, 3)
    return bool(ok), out


def c_framed(
    ctx: EvalContext, camera: str, objects: list[str], fill, view=None, tol_deg: float = 10.0,
    location=None, tol: float = 0.1,
) -> Measured:
    """Every corner of the objects' boxes projects inside the camera's square frame, the
    projection spans a share of the frame in [lo, hi] (its larger side), and optionally the
    camera looks from `view` (a direction from the subjects towards the camera)."""
    cam = ctx.obj(camera)
    found = [ctx.obj(n) for n in objects]
    if cam is None or not cam.get("camera"):
        return False, f"no camera {camera}"
    if any(o is None for o in found):
        return False, "missing objects"
    r = _rot(cam["rotation_deg"])
    right, up, fwd = r[:, 0], r[:, 1], -r[:, 2]
    half = cam["camera"]["sensor_mm"] / 2 / cam["camera"]["lens_mm"]  # tan of the half view
    pos = np.asarray(cam["location"], float)
    pts = []
    for o in found:
        lo, hi = np.asarray(o["bbox_min"], float), np.asarray(o["bbox_max"], float)
        for k in range(8):
            p = np.where([k & 1, k & 2, k & 4], hi, lo) - pos
            depth = float(np.dot(p, fwd))
            if depth <= 1e-6:
                return False, "behind the camera"
            pts.append((np.dot(p, right) / depth / half, np.dot(p, up) / depth / half))
    xy = np.array(pts)
    inside = bool(np.all(np.abs(xy) <= 1.0))
    share = float(max(np.ptp(xy[:, 0]), np.ptp(xy[:, 1])) / 2)
    ok = inside and fill[0] <= share <= fill[1]
    out: dict[str, Any] = {"inside": inside, "fill": round(share, 3)}
    if view is not None:
        lo = np.min([o["bbox_min"] for o in found], axis=0)
        hi = np.max([o["bbox_max"] for o in found], axis=0)
        d = pos - (lo + hi) / 2
        v = np.asarray(view, float)
        cosang = float(np.dot(d, v) / max(np.linalg.norm(d) * np.linalg.norm(v), 1e-9))
        err = math.degrees(math.acos(max(-1.0, min(1.0, cosang))))
        ok &= err <= tol_deg
        out["view_error_deg"] = round(err, 3)
    if location is not None:
        off = float(np.max(np.abs(pos - np.asarray(location, float))))
        ok &= off <= tol
        out["offset"] = round(off, 4)
    return bool(ok), out


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


CHECKS: dict[str, Callable[..., Measured]] = {
    "exists": c_exists,
    "absent": c_absent,
    "count": c_count,
    "position": c_position,
    "size": c_size,
    "rotation": c_rotation,
    "material": c_material,
    "shape_kind": c_shape_kind,
    "on_ground": c_on_ground,
    "on_top": c_on_top,
    "touching": c_touching,
    "aligned": c_aligned,
    "evenly_spaced": c_evenly_spaced,
    "symmetric": c_symmetric,
    "mesh_volume": c_mesh_volume,
    "occupancy": c_occupancy,
    "part": c_part,
    "holes": c_holes,
    "topology": c_topology,
    "placed": c_placed,
    "feature": c_feature,
    "gap": c_gap,
    "light": c_light,
    "framed": c_framed,
    "mesh_health": c_mesh_health,
    "mass": c_mass,
    "centre_of_mass": c_centre_of_mass,
    "no_overlap": c_no_overlap,
    "wall_thickness": c_wall_thickness,
}


def check(ctx: EvalContext, constraint: dict[str, Any]) -> Measured:
    args = {k: v for k, v in constraint.items() if k not in ("kind", "text", "weight")}
    return CHECKS[constraint["kind"]](ctx, **args)


# ---------------------------------------------------------------- the whole verdict


def evaluate_task(task: Any, session: Session, calls: list[dict[str, Any]]) -> rewards.RewardBreakdown:
    """The task's verdict on `session`'s final state. The checkers run in the jailed geometry
    checker (training/tasks/checker.py: a deadline and a memory cap); `session` only answers
    its queries. CheckerError (a ConfinedPathError) when it gives no verdict. A task whose
    checkers load no shape (`checker.touches_geometry`) is checked here: it reads bounded
    frames only."""
    from training.tasks.checker import check, touches_geometry

    if not touches_geometry(task):
        return evaluate_here(task, session, calls)
    return check(task, session, calls)


def evaluate_here(task: Any, session: Any, calls: list[dict[str, Any]]) -> rewards.RewardBreakdown:
    """The checkers in this process: the checker's own body (training/tasks/checker_main.py),
    and the in-process baseline of benchmarks/bench_trust.py. Unbounded: never on the
    trusted side for a policy's episode."""
    ctx = EvalContext(session, calls)
    try:
        return _verdict(task, ctx, calls)
    finally:
        shutil.rmtree(ctx.workspace / ctx.check_dir, ignore_errors=True)


# Constraints on one object that a differently named object can be checked against.
STAND_IN_KINDS = frozenset({"position", "size", "rotation", "shape_kind", "material", "on_ground"})
# What a constraint met by a stand-in earns, against 1 for the object of the goal's name.
STAND_IN_CREDIT = 0.5


def _named(c: dict[str, Any]) -> set[str]:
    """Every object name a constraint refers to."""
    names = {c.get(k) for k in ("object", "a", "b", "upper", "lower")} | set(c.get("objects", ()))
    return {n for n in names if isinstance(n, str)}


def mark_stand_ins(ctx: EvalContext, results: list[dict[str, Any]]) -> None:
    """Give each unmet check of a missing object its stand-in's verdict (`result["stand_in"]`).

    An object the goal names but the scene lacks (the agent built it under another name) is
    matched to one of the objects no constraint names, one to one, so that the matched pairs
    meet the most constraint weight (an optimal assignment); a pair meeting none is no match.
    Only the STAND_IN_KINDS checks of the missing object are tried, each once per candidate.
    Without it a call that gets kind, size and place right but the name wrong scores the same
    as one that gets nothing right, and GRPO groups of such calls have no reward spread.
    """
    by_name: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        c = r["constraint"]
        if not r["ok"] and c["kind"] in STAND_IN_KINDS and ctx.obj(c["object"]) is None:
            by_name.setdefault(c["object"], []).append(r)
    named = set().union(*(_named(r["constraint"]) for r in results))
    spare = [n for n in ctx.objects if n not in named]
    if not by_name or not spare:
        return
    from scipy.optimize import linear_sum_assignment

    missing = list(by_name)
    tried = {
        (m, s): [check(ctx, {**r["constraint"], "object": s}) for r in by_name[m]]
        for m in missing
        for s in spare
    }

    def met(m: str, s: str) -> float:
        verdicts = zip(by_name[m], tried[m, s], strict=True)
        return sum(float(r["constraint"].get("weight", 1.0)) for r, (ok, _) in verdicts if ok)

    score = np.array([[met(m, s) for s in spare] for m in missing])
    for i, j in zip(*linear_sum_assignment(score, maximize=True), strict=True):
        if score[i, j] > 0:
            m, s = missing[i], spare[j]
            for r, (ok, measured) in zip(by_name[m], tried[m, s], strict=True):
                r["stand_in"] = {"object": s, "ok": bool(ok), "measured": measured}


def is_idle(spec: Any, calls: list[dict[str, Any]]) -> bool:
    """An episode that did nothing toward a task with work to do: no call at all, or, where
    the oracle's plan changes the scene, no call that changed the rebuilt scene (the
    verifier's `changed` flag, cleared when the episode ends on the scene it started from).
    One harmless call (a `get_scene`, a `transform` to where an object already is) or a thing
    added and deleted re-states the start and is as idle as no call; a call that failed is a
    try (it keeps its recovery credit, not validity)."""
    if not spec.oracle:
        return False
    if not calls:
        return True
    if not all("changed" in c for c in calls):  # not scored by the verifier: calls alone
        return False
    needs_change = any(getattr(TOOLS.get(s.get("tool")), "mutating", False) for s in spec.oracle)
    return needs_change and not any(c["changed"] for c in calls)


def _verdict(task: Any, ctx: EvalContext, calls: list[dict[str, Any]]) -> rewards.RewardBreakdown:
    spec = task.spec
    results = []
    for c in spec.constraints:
        ok, measured = check(ctx, c)
        results.append({"constraint": c, "ok": bool(ok), "measured": measured})
    met = sum(r["ok"] for r in results)
    # Success needs every constraint met on the object of its name; the graded share gives a
    # constraint met only by a stand-in (the same object under another name) part credit.
    mark_stand_ins(ctx, results)
    weight = [float(r["constraint"].get("weight", 1.0)) for r in results]

    def credit(r: dict[str, Any]) -> float:
        if r["ok"]:
            return 1.0
        return STAND_IN_CREDIT if r.get("stand_in", {}).get("ok") else 0.0

    share = (
        sum(w * credit(r) for w, r in zip(weight, results, strict=True)) / sum(weight)
        if results
        else 1.0
    )
    # Doing nothing is not valid, just idle (as for efficiency below): an episode that made no
    # call on a task with work to do earns no validity or recovery. Both read 1.0 for "no
    # call failed", and GRPO learned to stop calling: idling beat a call that failed.
    idle = is_idle(spec, calls)
    components: dict[str, float] = {
        "validity": 0.0 if idle else rewards.validity(calls),
        "constraints": share,
    }
    details: dict[str, Any] = {"constraints": results, "steps": len(calls)}
    valid_result = bool(ctx.objects)
    geometry_ok = True
    if spec.geometry is not None:
        geo = evaluate_geometry(ctx, spec.geometry)
        components["geometry"] = geo["score"]
        details["geometry"] = geo
        valid_result = valid_result and geo.get("valid", True)
        geometry_ok = geo["score"] >= spec.geometry_min
        if "iou" in geo:
            components["cadrille"] = rewards.cadrille(geo["iou"], geo.get("valid", True))
    if spec.deliverables:
        from training.tasks.shapes import check_deliverable

        delivered = [check_deliverable(ctx, d) for d in spec.deliverables]
        components["completeness"] = sum(d["ok"] for d in delivered) / len(delivered)
        details["deliverables"] = delivered
    success = (
        valid_result
        and met == len(results)
        and geometry_ok
        and components.get("completeness", 1.0) == 1.0
    )
    # An idle episode's only recovery credit is for failed tries it did not repeat: a try
    # that failed still ranks above calls that change nothing (see `is_idle`).
    tried = idle and any(not c.get("ok") for c in calls)
    components["recovery"] = (rewards.recovery(calls, success) if tried or not idle else 0.0)
    # Efficiency only counts for a solved task: doing nothing is not efficient, just idle.
    eff = rewards.efficiency(len(calls), len(spec.oracle), task.budget)
    components["efficiency"] = eff if success else 0.0
    details["errors"] = sum(1 for c in calls if not c.get("ok"))
    return rewards.combine(components, task.weights, valid_result, success, details)
