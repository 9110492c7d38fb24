"""Geometry checks of a finished task: reference parts, scene IoU, deliverable files.

Reference CAD parts are built in this process from the task's own CadQuery script (code we
generated, so it runs unjailed; CadQuery is imported only here and only when needed).
"""

from __future__ import annotations

import functools
import math
import threading
from typing import Any

import numpy as np

from training.rewards import geometry

PART_IOU_MIN = 0.97  # a deliverable STEP must match its reference this well
SCENE_IOU_MIN = 0.8


# Eval scores episodes in threads, and CadQuery's selector parser (pyparsing) is not
# thread-safe: two first parses at once fail with "atom_callback() missing ... 'res'".
_CADQUERY_LOCK = threading.Lock()


@functools.lru_cache(maxsize=256)
def build_reference(script: str) -> Any:
    """Run a task's CadQuery script and return its `result` as one shape."""
    import cadquery as cq

    namespace: dict[str, Any] = {"cq": cq, "math": math}
    with _CADQUERY_LOCK:
        exec(compile(script, "<reference part>", "exec"), namespace)  # our own generated code
    result = namespace["result"]
    if isinstance(result, cq.Workplane):
        vals = [v for v in result.vals() if isinstance(v, cq.Shape)]
        return vals[0] if len(vals) == 1 else cq.Compound.makeCompound(vals)
    return result


@functools.lru_cache(maxsize=64)
def filed_reference(script: str) -> Any:
    """The reference as the worker's part reaches the checker: through a STEP file, when it has
    B-spline faces (a swept bend's round corner, a loft).

    The part under judgement is always read back from the worker's STEP file, and STEP keeps a
    B-spline's poles only to the writer's printed precision. Its surfaces then lie a few ulps off
    the in-memory reference's, and OCCT's booleans between two nearly coincident B-spline
    surfaces are slow: `sweeps_lofts:4:1`'s IoU took 59-69 s against the in-memory reference and
    3.3 s against the filed one, with the same result (1.0). Parts without B-spline faces are
    left as built (their STEP round trip is exact)."""
    import tempfile

    ref = build_reference(script)
    if not any(f.geomType() == "BSPLINE" for f in ref.Faces()):
        return ref
    import cadquery as cq

    with tempfile.TemporaryDirectory(prefix="modelwright-ref-") as tmp:
        path = f"{tmp}/reference.step"
        cq.exporters.export(ref, path, exportType="STEP")
        return geometry.load_solid(path)


def reference_stl(script: str) -> bytes:
    """The reference part as binary STL bytes (fine tessellation), for mesh targets."""
    mesh = geometry.mesh_from_solid(build_reference(script), tolerance=2e-4)
    return mesh.export(file_type="stl")


def count_cylinders(solid: Any, radius: float, tol_rel: float = 0.01, whole: bool = False) -> int:
    """Distinct cylinder axes carrying faces of `radius` (a hole split in faces counts once).
    `whole`: only axes whose faces go more than half-way round, so that a rounded edge (a
    fillet's quarter-round, which a bend's r=3 shares with a 6 mm hole) is no hole; without
    it a fillet counts (the recovery family counts rounded edges so)."""
    from OCP.BRepAdaptor import BRepAdaptor_Surface
    from OCP.BRepTools import BRepTools

    turn: dict[tuple, float] = {}  # axis line -> the angle its faces sweep round it
    for face in solid.Faces():
        if face.geomType() != "CYLINDER":
            continue
        cyl = BRepAdaptor_Surface(face.wrapped).Cylinder()
        if abs(cyl.Radius() - radius) > tol_rel * radius:
            continue
        d = cyl.Axis().Direction()
        p = cyl.Axis().Location()
        u = np.array([d.X(), d.Y(), d.Z()])
        u = u if u[np.argmax(np.abs(u))] > 0 else -u
        q = np.array([p.X(), p.Y(), p.Z()])
        foot = q - np.dot(q, u) * u  # the axis line's point nearest the origin
        key = tuple(np.round(np.concatenate([u, foot]), 3) + 0.0)
        umin, umax, _, _ = BRepTools.UVBounds_s(face.wrapped)
        turn[key] = turn.get(key, 0.0) + (umax - umin)
    return sum(1 for angle in turn.values() if not whole or angle > np.pi + 1e-6)


def face_types(solid: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for face in solid.Faces():
        counts[face.geomType()] = counts.get(face.geomType(), 0) + 1
    return dict(sorted(counts.items()))


@functools.lru_cache(maxsize=64)
def _reference_mesh(script: str) -> Any:
    return geometry.mesh_from_solid(build_reference(script), 2e-3, 0.3)


def _part_score(ctx: Any, name: str, script: str) -> dict[str, Any]:
    solid = ctx.solid(name)
    if solid is None:
        return {"name": name, "valid": False, "iou": 0.0}
    ref = filed_reference(script)
    iou = geometry.brep_iou(ref, solid, align_centres=True)
    cd = geometry.chamfer_distance(
        _reference_mesh(script), geometry.mesh_from_solid(solid, 2e-3, 0.3)
    )
    return {"name": name, "valid": True, "iou": round(iou, 6), "chamfer_x1e3": round(cd, 4)}


def evaluate_geometry(ctx: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """The geometry component: {score in [0, 1], valid, and what was measured}."""
    kind = spec["kind"]
    if kind == "scene":
        from training.tasks.scene_geometry import matched_iou, scene_iou

        meshes = ctx.meshes()
        names = spec.get("objects")
        chosen = {n: m for n, m in meshes.items() if names is None or n in names}
        if not chosen:
            return {"score": 0.0, "valid": bool(ctx.objects), "iou": 0.0}
        iou = scene_iou(chosen.values(), spec["items"])
        if not spec.get("per_object", True):  # targets merged into one object (booleans)
            return {"score": round(iou, 6), "iou": round(iou, 6), "valid": True}
        per_object, pairs = matched_iou(chosen, spec["items"])
        # Half the union's IoU, half per-object agreement: one merged blob in the right
        # place is not the same as the right separate objects.
        score = 0.5 * iou + 0.5 * per_object
        return {
            "score": round(score, 6),
            "iou": round(iou, 6),
            "per_object_iou": round(per_object, 6),
            "matches": pairs,
            "valid": True,
        }
    if kind == "parts":
        parts = [_part_score(ctx, p["name"], p["script"]) for p in spec["parts"]]
        iou = float(np.mean([p["iou"] for p in parts]))
        valid = any(p["valid"] for p in parts)
        return {"score": round(iou, 6), "iou": round(iou, 6), "valid": valid, "parts": parts}
    if kind == "mesh_file":
        return score_mesh_file(ctx, spec)
    raise ValueError(f"unknown geometry spec kind {kind!r}")


def score_mesh_file(ctx: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """Geometry of the whole final scene against a ground-truth mesh, normalised protocol."""
    from training.rewards.geometry import ShapeLoadError, compare_meshes, load_mesh

    if not ctx.objects:
        return {"score": 0.0, "iou": 0.0, "valid": False}
    rel = f"{ctx.check_dir}/result.stl"
    result = ctx.session.call("export", {"format": "stl", "path": rel})
    if not result.ok:
        return {"score": 0.0, "iou": 0.0, "valid": False, "error": str(result.error)}
    try:
        metrics = compare_meshes(load_mesh(spec["path"]), load_mesh(ctx.workspace / rel))
    except (ShapeLoadError, ValueError) as exc:
        return {"score": 0.0, "iou": 0.0, "valid": False, "error": str(exc)}
    iou = metrics.voxel_iou
    return {"score": round(iou, 6), "iou": round(iou, 6), "valid": True, **metrics.to_dict()}
