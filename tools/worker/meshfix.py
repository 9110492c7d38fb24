"""Mesh health and mass: `mesh_check` and `mass_properties` (read-only), `mesh_repair`.

Everything is measured on the evaluated mesh in world space (metres), with bmesh: open
borders (holes), edges shared by more than two faces, neighbouring faces wound against each
other (flipped normals), vertices at the same place (unwelded seams), separate pieces.
"""

from __future__ import annotations

import bmesh
import bpy
import numpy as np

from tools.errors import ErrorKind, ToolError
from tools.worker.cad import PartStore
from tools.worker.scene import obj, rounded, world_bbox

DUPLICATE_EPS = 1e-6  # metres: vertices closer than this count as one place


def _world_bmesh(ob) -> bmesh.types.BMesh:
    if ob.type != "MESH":
        raise ToolError(ErrorKind.VALIDATION, f"{ob.name!r} is a {ob.type.lower()}, not a mesh")
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    me = ev.to_mesh()
    try:
        bm = bmesh.new()
        bm.from_mesh(me)
    finally:
        ev.to_mesh_clear()
    bm.transform(ob.matrix_world)
    bm.normal_update()  # the normals were the local ones
    return bm


def _components(n: int, pairs) -> np.ndarray:
    """Union-find labels of `n` items joined by `pairs` (index pairs)."""
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
    return np.array([find(i) for i in range(n)], dtype=np.int64)


def _face_parts(bm) -> list[list]:
    """The faces of each connected piece (faces sharing a vertex are one piece)."""
    bm.verts.index_update()
    labels = _components(len(bm.verts), ((e.verts[0].index, e.verts[1].index) for e in bm.edges))
    parts: dict[int, list] = {}
    for f in bm.faces:
        parts.setdefault(int(labels[f.verts[0].index]), []).append(f)
    return list(parts.values())


def health(bm) -> dict:
    """The facts `mesh_check` reports for one bmesh."""
    boundary = [e for e in bm.edges if len(e.link_faces) == 1]
    bm.verts.index_update()
    if boundary:
        lab = _components(len(bm.verts), ((e.verts[0].index, e.verts[1].index) for e in boundary))
        holes = len({int(lab[e.verts[0].index]) for e in boundary})
    else:
        holes = 0
    non_manifold = sum(1 for e in bm.edges if len(e.link_faces) > 2)
    wire = sum(1 for e in bm.edges if not e.link_faces)
    loose_verts = sum(1 for v in bm.verts if not v.link_edges)
    flipped = sum(1 for e in bm.edges if len(e.link_faces) == 2 and not e.is_contiguous)
    co = np.array([v.co[:] for v in bm.verts], float).reshape(-1, 3)
    dup = len(co) - len(np.unique(np.round(co / DUPLICATE_EPS), axis=0)) if len(co) else 0
    pieces = len(_face_parts(bm))
    manifold = not boundary and not non_manifold and not wire and not loose_verts and not flipped
    volume = bm.calc_volume(signed=True)
    if not manifold:
        normals = "mixed" if flipped else "unknown (not closed)"
    else:
        normals = "outward" if volume > 0 else "inward"
    return {
        "manifold": manifold, "vertices": len(bm.verts), "faces": len(bm.faces),
        "boundary_edges": len(boundary), "holes": holes, "non_manifold_edges": non_manifold,
        "flipped_edges": flipped, "normals": normals, "duplicate_vertices": int(dup),
        "loose_parts": pieces, "loose_geometry": wire + loose_verts,
        "volume": round(abs(volume), 9) if manifold else None,
    }


WALL_RAYS = 20_000  # faces probed at most (a seeded sample beyond that)


def walls(bm) -> dict | None:
    """Wall thickness in metres: from each face's centre, the distance to the next surface
    straight through the material (against its normal); the thinnest and the 5th percentile
    by area (a thin sliver of a face does not decide it)."""
    from mathutils.bvhtree import BVHTree

    faces = [f for f in bm.faces if f.calc_area() > 0]
    if not faces:
        return None
    if len(faces) > WALL_RAYS:
        idx = np.random.default_rng(0).choice(len(faces), WALL_RAYS, replace=False)
        faces = [faces[i] for i in sorted(idx)]
    tree = BVHTree.FromBMesh(bm)
    dist, area = [], []
    for f in faces:
        n = f.normal
        hit = tree.ray_cast(f.calc_center_median() - n * 1e-7, -n)
        if hit[0] is not None:
            dist.append(hit[3] + 1e-7)
            area.append(f.calc_area())
    if not dist:
        return None
    d, w = np.asarray(dist), np.asarray(area)
    order = np.argsort(d)
    cum = np.cumsum(w[order]) / w.sum()
    p5 = float(d[order][np.searchsorted(cum, 0.05)])
    return {"min": round(float(d.min()), 6), "p5": round(p5, 6)}


def mesh_check(a) -> dict:
    ob = obj(a["name"])
    bm = _world_bmesh(ob)
    try:
        out = {"name": ob.name, **health(bm)}
        out["wall_thickness"] = walls(bm)
        return out
    finally:
        bm.free()


OPERATIONS = ("merge_by_distance", "fill_holes", "recalculate_normals", "flip_normals",
              "delete_loose", "keep_largest")


def _repair(bm, op: str, distance: float) -> dict:
    if op == "merge_by_distance":
        before = len(bm.verts)
        bmesh.ops.remove_doubles(bm, verts=bm.verts[:], dist=distance)
        return {"merged_vertices": before - len(bm.verts)}
    if op == "fill_holes":
        made = bmesh.ops.holes_fill(bm, edges=bm.edges[:], sides=0)["faces"]
        return {"filled_faces": len(made)}
    if op == "recalculate_normals":
        bmesh.ops.recalc_face_normals(bm, faces=bm.faces[:])
        return {}
    if op == "flip_normals":
        bmesh.ops.reverse_faces(bm, faces=bm.faces[:])
        return {}
    if op == "delete_loose":
        verts = [v for v in bm.verts if not v.link_edges]
        edges = [e for e in bm.edges if not e.link_faces]
        bmesh.ops.delete(bm, geom=edges, context="EDGES")
        verts += [v for v in bm.verts if not v.link_edges and v not in verts]
        bmesh.ops.delete(bm, geom=verts, context="VERTS")
        return {"deleted_loose": len(edges) + len(verts)}
    # keep_largest: every piece but the one of the largest area goes
    parts = _face_parts(bm)
    if len(parts) <= 1:
        return {"deleted_parts": 0}
    keep = max(parts, key=lambda fs: sum(f.calc_area() for f in fs))
    gone = [f for fs in parts if fs is not keep for f in fs]
    bmesh.ops.delete(bm, geom=gone, context="FACES")
    loose = [v for v in bm.verts if not v.link_edges]
    bmesh.ops.delete(bm, geom=loose, context="VERTS")
    return {"deleted_parts": len(parts) - 1}


def mesh_repair(parts: PartStore):
    def run(a) -> dict:
        ob = obj(a["name"])
        if parts.has(ob.name):
            raise ToolError(ErrorKind.VALIDATION,
                            f"{ob.name!r} is a CAD part (exact B-rep); mesh_repair works on meshes")
        if ob.type != "MESH":
            raise ToolError(ErrorKind.VALIDATION, f"{ob.name!r} is a {ob.type.lower()}, not a mesh")
        if ob.modifiers:
            from tools.worker.scene import apply_evaluated

            apply_evaluated(ob)
        scale = max(abs(s) for s in ob.matrix_world.to_scale()) or 1.0
        bm = bmesh.new()
        try:
            bm.from_mesh(ob.data)
            done = _repair(bm, a["operation"], a["distance"] / scale)
            bm.to_mesh(ob.data)
        finally:
            bm.free()
        ob.data.update()
        check = _world_bmesh(ob)
        try:
            after = health(check)
        finally:
            check.free()
        return {"name": ob.name, "operation": a["operation"], **done, "after": after}
    return run


def _mass(bm) -> tuple[float, np.ndarray, float]:
    """Signed volume, centroid of the enclosed volume and surface area of a closed mesh."""
    tris = bm.calc_loop_triangles()
    if not tris:
        return 0.0, np.zeros(3), 0.0
    p = np.array([[loop.vert.co[:] for loop in t] for t in tris], float)  # (n, 3, 3)
    a, b, c = p[:, 0], p[:, 1], p[:, 2]
    vols = np.einsum("ij,ij->i", a, np.cross(b, c)) / 6.0
    vol = float(vols.sum())
    cen = (vols[:, None] * (a + b + c) / 4.0).sum(axis=0) / vol if abs(vol) > 1e-15 else p.mean((0, 1))
    area = float(np.linalg.norm(np.cross(b - a, c - a), axis=1).sum() / 2)
    return vol, cen, area


def mass_properties(a) -> dict:
    density = a.get("density")
    rows, total_v, moment = [], 0.0, np.zeros(3)
    lo_all, hi_all = np.full(3, np.inf), np.full(3, -np.inf)
    for name in a["names"]:
        ob = obj(name)
        bm = _world_bmesh(ob)
        try:
            vol, cen, area = _mass(bm)
        finally:
            bm.free()
        vol = abs(vol)
        lo, hi = world_bbox(ob)
        lo_all, hi_all = np.minimum(lo_all, lo), np.maximum(hi_all, hi)
        row = {"name": ob.name, "volume": round(vol, 9), "area": round(area, 9),
               "centre_of_mass": rounded(cen), "bbox_min": rounded(lo), "bbox_max": rounded(hi)}
        if density is not None:
            row["mass_kg"] = round(vol * density, 9)
        rows.append(row)
        total_v += vol
        moment += vol * cen
    out: dict = {"objects": rows, "volume": round(total_v, 9),
                 "centre_of_mass": rounded(moment / total_v) if total_v > 0 else None,
                 "bbox_min": rounded(lo_all), "bbox_max": rounded(hi_all)}
    if density is not None:
        out["density"] = density
        out["mass_kg"] = round(total_v * density, 9)
    return out


def handlers(parts: PartStore) -> dict:
    return {"mesh_check": mesh_check, "mesh_repair": mesh_repair(parts),
            "mass_properties": mass_properties}
