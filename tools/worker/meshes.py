"""The scene as GPU-ready buffers for the studio's live viewport (a worker op, not a tool).

Each visible mesh object is sent as its local-space triangles with smooth normals split at
creases (30°), and its feature edges (creases, open borders: for a CAD part these are its
B-rep edges) as line indices. The studio says which geometry it already holds (`known`:
name -> key); only geometry it lacks travels, as one compact binary blob per object, so a
move or a colour change costs a few bytes of JSON.

Blob layout (little-endian): positions f32[nv*3] | normals f32[nv*3] | triangles u32[nt*3] |
edges u32[ne*2]; the counts are in the object's JSON entry, with `closed`: the surface is
closed and wound outwards, so the viewer may cull back faces.
"""

from __future__ import annotations

import hashlib

import bpy
import numpy as np

from tools.worker.scene import material_of, user_objects

CREASE_COS = float(np.cos(np.radians(30.0)))
DEFAULT_COLOR = "#B4B4B4"


def _mesh_arrays(me) -> tuple[np.ndarray, np.ndarray]:
    me.calc_loop_triangles()
    co = np.empty(len(me.vertices) * 3, np.float32)
    me.vertices.foreach_get("co", co)
    tris = np.empty(len(me.loop_triangles) * 3, np.int32)
    me.loop_triangles.foreach_get("vertices", tris)
    return co.reshape(-1, 3), tris.reshape(-1, 3)


def _arrays(ob) -> tuple[np.ndarray, np.ndarray]:
    """Vertex positions (local, float32) and triangle vertex indices of the evaluated mesh."""
    if not ob.modifiers:  # the mesh as stored: no evaluated copy needed
        return _mesh_arrays(ob.data)
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    me = ev.to_mesh()
    try:
        return _mesh_arrays(me)
    finally:
        ev.to_mesh_clear()


def _quick_key(ob) -> str | None:
    """The geometry key without triangulating: positions and face corners of the stored mesh
    (None when modifiers make the evaluated mesh differ)."""
    if ob.modifiers:
        return None
    me = ob.data
    co = np.empty(len(me.vertices) * 3, np.float32)
    me.vertices.foreach_get("co", co)
    corners = np.empty(len(me.loops), np.int32)
    me.loops.foreach_get("vertex_index", corners)
    sizes = np.empty(len(me.polygons), np.int32)
    me.polygons.foreach_get("loop_total", sizes)
    return geometry_key(co, np.concatenate([corners, sizes]))


def geometry_key(co: np.ndarray, topology: np.ndarray) -> str:
    h = hashlib.blake2b(digest_size=12)
    h.update(co.tobytes())
    h.update(topology.tobytes())
    return h.hexdigest()


def _weld(co: np.ndarray) -> np.ndarray:
    """One id per distinct position (a CAD tessellation repeats the nodes on face borders)."""
    scale = float(np.abs(co).max()) if len(co) else 1.0
    q = np.round(co / max(scale, 1e-9) * 5e5).astype(np.int64) + (1 << 19)  # 20 bits each
    _, ids = np.unique((q[:, 0] << 40) | (q[:, 1] << 20) | q[:, 2], return_inverse=True)
    return ids.reshape(-1)


def build(co: np.ndarray, tris: np.ndarray) -> tuple[bytes, dict]:
    """Smooth-where-smooth vertex buffer, triangles and feature edges for one mesh."""
    if len(tris) == 0:
        return b"", {"nv": 0, "nt": 0, "ne": 0, "closed": False}
    weld = _weld(co)
    wt = weld[tris]  # triangles over welded ids
    p = co[tris].astype(np.float64)
    cross = np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0])
    area2 = np.linalg.norm(cross, axis=1)
    fn = cross / np.maximum(area2, 1e-30)[:, None]

    # feature edges: open borders, or creases sharper than 30°
    directed = np.stack([wt[:, [0, 1]], wt[:, [1, 2]], wt[:, [2, 0]]], 1).reshape(-1, 2).astype(np.int64)
    e = np.sort(directed, axis=1)
    face_of = np.repeat(np.arange(len(tris)), 3)
    packed, inv, count = np.unique((e[:, 0] << 32) | e[:, 1],
                                   return_inverse=True, return_counts=True)
    uniq = np.column_stack([packed >> 32, packed & 0xFFFFFFFF])
    inv = inv.reshape(-1)
    order = np.argsort(inv, kind="stable")
    starts = np.searchsorted(inv[order], np.arange(len(uniq)))
    f1 = face_of[order[starts]]
    f2 = face_of[order[np.minimum(starts + 1, len(order) - 1)]]
    dots = np.einsum("ij,ij->i", fn[f1], fn[f2])
    feature = (count != 2) | (dots < CREASE_COS)
    edges_w = uniq[feature]
    closed = _closed_outward(directed, p, count)

    # corner normals: area-weighted face normals of the corners around the same welded
    # vertex whose faces lie within 30° of this corner's face
    corner_v = wt.reshape(-1)
    corner_f = face_of
    by_v = np.argsort(corner_v, kind="stable")
    sv = corner_v[by_v]
    gstart = np.searchsorted(sv, sv, side="left")
    gsize = np.searchsorted(sv, sv, side="right") - gstart
    rep = np.repeat(np.arange(len(by_v)), gsize)
    offs = np.arange(len(rep)) - np.repeat(np.cumsum(gsize) - gsize, gsize)
    partner = gstart[rep] + offs
    a_f, b_f = corner_f[by_v[rep]], corner_f[by_v[partner]]
    keep = np.einsum("ij,ij->i", fn[a_f], fn[b_f]) >= CREASE_COS
    # weighted by the corner's angle: a quad split in two triangles counts once, not twice
    e1, e2 = np.roll(p, -1, axis=1) - p, np.roll(p, 1, axis=1) - p
    cosang = np.einsum("ijk,ijk->ij", e1, e2) / np.maximum(
        np.linalg.norm(e1, axis=2) * np.linalg.norm(e2, axis=2), 1e-30)
    angle = np.arccos(np.clip(cosang, -1.0, 1.0)).reshape(-1)
    b_c = by_v[partner][keep]
    acc = np.column_stack([np.bincount(rep[keep], fn[b_f[keep], k] * angle[b_c], minlength=len(by_v))
                           for k in range(3)])
    normals = np.empty_like(acc)
    normals[by_v] = acc
    normals /= np.maximum(np.linalg.norm(normals, axis=1), 1e-30)[:, None]

    # GPU vertices: one per (welded position, normal)
    qn = np.round(normals * 1000).astype(np.int64) + 1024  # 11 bits each
    keys = (corner_v.astype(np.int64) << 33) | (qn[:, 0] << 22) | (qn[:, 1] << 11) | qn[:, 2]
    _, first_corner, gl_index = np.unique(keys, return_index=True, return_inverse=True)
    gl_index = gl_index.reshape(-1)
    positions = co[tris.reshape(-1)[first_corner]].astype(np.float32)
    gl_normals = normals[first_corner].astype(np.float32)
    triangles = gl_index.reshape(-1, 3).astype(np.uint32)
    vertex_of_weld = np.zeros(int(weld.max()) + 1, np.int64)
    vertex_of_weld[corner_v] = gl_index  # any GPU vertex at that position
    edges = vertex_of_weld[edges_w].astype(np.uint32)
    blob = positions.tobytes() + gl_normals.tobytes() + triangles.tobytes() + edges.tobytes()
    return blob, {"nv": len(positions), "nt": len(triangles), "ne": len(edges), "closed": closed}


def _closed_outward(directed: np.ndarray, p: np.ndarray, count: np.ndarray) -> bool:
    """Whether the surface (its welded triangles' `directed` edges, with each undirected edge's
    `count`) is closed, consistently wound and facing outwards: then
    no back face can ever be seen and the viewer may cull them (half the triangles a software
    rasteriser would otherwise set up and shade)."""
    if not np.all(count == 2):
        return False
    if len(np.unique((directed[:, 0] << 32) | directed[:, 1])) != len(directed):  # used twice one way
        return False
    volume6 = float(np.einsum("ij,ij->i", p[:, 0], np.cross(p[:, 1], p[:, 2])).sum())
    return volume6 > 0


def mesh_buffers(known: dict) -> tuple[dict, list[bytes]]:
    """Every visible mesh object: its transform, colour and geometry key, plus a blob for
    each geometry the caller does not hold yet."""
    objects: list[dict] = []
    blobs: list[bytes] = []
    for ob in user_objects():
        if ob.type != "MESH" or ob.hide_render:
            continue
        key = _quick_key(ob)
        co = tris = None
        if key is None:
            co, tris = _arrays(ob)
            key = geometry_key(co, tris)
        mat = material_of(ob)
        entry = {"name": ob.name, "key": key, "color": mat["color"] if mat else DEFAULT_COLOR,
                 "matrix": [float(v) for row in ob.matrix_world for v in row],
                 "location": [float(v) for v in ob.location], "blob": None}
        if known.get(ob.name) != key:
            if co is None:
                co, tris = _arrays(ob)
            blob, counts = build(co, tris)
            entry.update(counts, blob=len(blobs))
            blobs.append(blob)
        objects.append(entry)
    return {"objects": objects}, blobs
