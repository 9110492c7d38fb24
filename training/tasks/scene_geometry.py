"""Analytic targets for Blender scenes: primitives as meshes and occupancy with cut-outs.

A scene target is a list of items `{kind, dimensions, location, rotation_deg, op}` where op
is `add` (union) or `cut` (difference, in order). Items are tessellated like Blender's
defaults (48 segments) so that a correct scene scores close to 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # trimesh and scipy cost ~1 s to import: task listing must not pay it
    import trimesh

SEGMENTS = 48  # the runtime's cylinders, cones and spheres (tools/worker/scene.py)
# Volume of each kind as a share of its bounding box (for recognising a primitive's kind).
FILL_RATIO = {
    "cube": 1.0,
    "cylinder": SEGMENTS / 2 * math.sin(2 * math.pi / SEGMENTS) / 4,
    "uv_sphere": 0.52,
    "cone": SEGMENTS / 2 * math.sin(2 * math.pi / SEGMENTS) / 12,
}


def primitive_mesh(item: Mapping[str, Any]) -> trimesh.Trimesh:
    """The primitive at unit size scaled to its bounding `dimensions`, rotated, placed."""
    import trimesh

    kind = item["kind"]
    if kind == "cube":
        mesh = trimesh.creation.box(extents=(1.0, 1.0, 1.0))
    elif kind == "cylinder":
        mesh = trimesh.creation.cylinder(radius=0.5, height=1.0, sections=SEGMENTS)
    elif kind == "cone":
        mesh = trimesh.creation.cone(radius=0.5, height=1.0, sections=SEGMENTS)
        mesh.apply_translation((0, 0, -0.5))  # centred on its bbox, like Blender's
    elif kind == "uv_sphere":
        mesh = trimesh.creation.uv_sphere(radius=0.5, count=(24, SEGMENTS))
    else:
        raise ValueError(f"no analytic target for primitive kind {kind!r}")
    mesh.apply_scale(np.asarray(item["dimensions"], dtype=float))
    rx, ry, rz = (math.radians(v) for v in item.get("rotation_deg", (0, 0, 0)))
    # Blender's XYZ Euler is R = Rz·Ry·Rx, which is trimesh's static 'sxyz'.
    mesh.apply_transform(trimesh.transformations.euler_matrix(rx, ry, rz, "sxyz"))
    mesh.apply_translation(np.asarray(item.get("location", (0, 0, 0)), dtype=float))
    return mesh


def items_bounds(items: Iterable[Mapping[str, Any]]) -> np.ndarray:
    bounds = [primitive_mesh(it).bounds for it in items if it.get("op", "add") == "add"]
    return np.array([np.min([b[0] for b in bounds], 0), np.max([b[1] for b in bounds], 0)])


def target_occupancy(
    items: Iterable[Mapping[str, Any]], lo, hi, resolution: int | None = None
) -> np.ndarray:
    from training.rewards.geometry import VOXEL_RESOLUTION, voxel_occupancy

    resolution = resolution or VOXEL_RESOLUTION
    grid = np.zeros((resolution,) * 3, dtype=bool)
    for item in items:
        occ = voxel_occupancy(primitive_mesh(item), lo, hi, resolution)
        grid = grid & ~occ if item.get("op", "add") == "cut" else grid | occ
    return grid


def scene_iou(
    meshes: Iterable[trimesh.Trimesh],
    items: list[Mapping[str, Any]],
    resolution: int | None = None,
) -> float:
    """Voxel IoU, in world space (placement matters), of a scene's meshes against a target."""
    from training.rewards.geometry import VOXEL_RESOLUTION, voxel_occupancy

    resolution = resolution or VOXEL_RESOLUTION
    meshes = [m for m in meshes if len(m.faces)]
    tb = items_bounds(items)
    lo, hi = tb[0], tb[1]
    for m in meshes:
        lo, hi = np.minimum(lo, m.bounds[0]), np.maximum(hi, m.bounds[1])
    size = float(np.max(hi - lo)) or 1.0
    centre = (lo + hi) / 2
    lo, hi = centre - 0.51 * size, centre + 0.51 * size
    target = target_occupancy(items, lo, hi, resolution)
    actual = np.zeros_like(target)
    for m in meshes:
        actual |= voxel_occupancy(m, lo, hi, resolution)
    union = np.count_nonzero(target | actual)
    return float(np.count_nonzero(target & actual)) / union if union else 0.0


def kind_of(mesh: trimesh.Trimesh, dimensions) -> str:
    """The primitive kind whose volume share of the bounding box is nearest the mesh's."""
    box = float(np.prod(dimensions))
    ratio = abs(float(mesh.volume)) / box if box > 0 else 0.0
    return min(FILL_RATIO, key=lambda k: abs(FILL_RATIO[k] - ratio))


def matched_iou(
    meshes: dict[str, trimesh.Trimesh], items: list[Mapping[str, Any]], resolution: int = 32
) -> tuple[float, list[dict[str, Any]]]:
    """Per-object matching for multi-object scenes, independent of names.

    Target items (only `add` ones) and scene meshes are paired by the Hungarian method on
    box-centre distance plus size difference; each pair's IoU is taken on a grid around the
    pair. The score is the sum of pair IoUs over max(#targets, #objects): a missing or an
    extra object costs as much as a wrong one.
    """
    from scipy.optimize import linear_sum_assignment

    from training.rewards.geometry import voxel_occupancy

    targets = [it for it in items if it.get("op", "add") == "add"]
    names = list(meshes)
    if not targets or not names:
        return 0.0, []
    t_meshes = [primitive_mesh(it) for it in targets]
    cost = np.zeros((len(targets), len(names)))
    for i, tm in enumerate(t_meshes):
        tc, ts = tm.bounds.mean(0), tm.extents
        for j, n in enumerate(names):
            m = meshes[n]
            scale = max(float(np.max(ts)), 1e-9)
            cost[i, j] = (
                np.linalg.norm(m.bounds.mean(0) - tc) + np.linalg.norm(m.extents - ts)
            ) / scale
    rows, cols = linear_sum_assignment(cost)
    pairs = []
    for i, j in zip(rows, cols, strict=True):
        a, b = t_meshes[i], meshes[names[j]]
        lo = np.minimum(a.bounds[0], b.bounds[0])
        hi = np.maximum(a.bounds[1], b.bounds[1])
        size = float(np.max(hi - lo)) or 1.0
        c = (lo + hi) / 2
        va = voxel_occupancy(a, c - 0.51 * size, c + 0.51 * size, resolution)
        vb = voxel_occupancy(b, c - 0.51 * size, c + 0.51 * size, resolution)
        union = np.count_nonzero(va | vb)
        iou = float(np.count_nonzero(va & vb)) / union if union else 0.0
        pairs.append({"target": targets[i].get("name"), "object": names[j], "iou": round(iou, 4)})
    score = sum(p["iou"] for p in pairs) / max(len(targets), len(names))
    return score, pairs
