"""Renders of large scenes within a budget: past `MERGE_FROM` visible meshes, the views are
drawn from one merged proxy mesh in a scene of its own.

Workbench pays per object (a render builds its own evaluated copy and draw batches of every
object: ~30 s for 10 000 cubes on this machine), not per triangle, so 10 000 objects drawn as
one mesh cost about what one object does. The proxy keeps each object's world-space geometry
and material colour; what it loses is the outline between touching objects. It lives only for
the duration of one render call and is never part of the scene, its commits or its hash.
"""

from __future__ import annotations

from contextlib import contextmanager

import bpy
import numpy as np

MERGE_FROM = 500  # visible mesh objects; below this a render draws the objects themselves
PROXY = "_mw_budget"
DEFAULT_COLOUR = (0.8, 0.8, 0.8, 1.0)  # Workbench's colour for an object without material


def drawable(objects) -> list:
    return [o for o in objects if o.type == "MESH" and not o.hide_render]


@contextmanager
def proxy_scene(objects, helpers, camera):
    """The proxy scene, its mesh filled with the merged `objects` and mesh `helpers` (grid,
    axes), drawn through `camera`; or None when the scene is small enough to draw as it is.

    The scene and its object persist (made once, then reused): adding or removing datablocks
    makes Blender rebuild the dependency graph of the whole 10 000-object scene, which costs
    seconds, while refilling one mesh only touches that mesh. Its geometry is cleared after
    each render, so commits carry an empty mesh."""
    meshes = drawable(objects)
    if len(meshes) < MERGE_FROM:
        yield None
        return
    scene, ob = _proxy()
    if camera.name not in scene.collection.objects:
        scene.collection.objects.link(camera)
    if scene.camera != camera:  # assigning, even the same camera, rebuilds the graph
        scene.camera = camera
    try:
        fill(ob.data, sorted(meshes, key=lambda o: o.name) + list(helpers))
        yield scene
    finally:
        ob.data.clear_geometry()


def _proxy():
    scene = bpy.data.scenes.get(PROXY) or bpy.data.scenes.new(PROXY)
    ob = bpy.data.objects.get(PROXY)
    if ob is None:
        ob = bpy.data.objects.new(PROXY, bpy.data.meshes.new(PROXY))
        ob["mw_helper"] = 1
    if ob.name not in scene.collection.objects:
        scene.collection.objects.link(ob)
    return scene, ob


def fill(me: bpy.types.Mesh, objects) -> None:
    """Fill `me` with every object's faces in world space, each face coloured by its object's
    material (a colour attribute: changing material slots would rebuild the whole graph).
    Per object only the raw arrays are read; transforms and colours are applied in bulk."""
    needs_eval = any(len(o.modifiers) for o in objects)
    dg = bpy.context.evaluated_depsgraph_get() if needs_eval else None  # an update costs O(scene)
    cos, loops, sizes, counts, loop_counts, kept = [], [], [], [], [], []
    for ob in objects:
        src = ob.evaluated_get(dg).data if dg is not None and len(ob.modifiers) else ob.data
        nv, nl, npoly = len(src.vertices), len(src.loops), len(src.polygons)
        if npoly == 0:
            continue
        co = np.empty(nv * 3, dtype=np.float32)
        src.vertices.foreach_get("co", co)
        vi = np.empty(nl, dtype=np.int32)
        src.loops.foreach_get("vertex_index", vi)
        tot = np.empty(npoly, dtype=np.int32)
        src.polygons.foreach_get("loop_total", tot)
        cos.append(co)
        loops.append(vi)
        sizes.append(tot)
        counts.append(nv)
        loop_counts.append(nl)
        kept.append(ob)
    me.clear_geometry()
    if not kept:
        return
    counts_a, loop_counts_a = np.array(counts), np.array(loop_counts)
    matrices = np.array([ob.matrix_world for ob in kept], dtype=np.float64)  # (n, 4, 4)
    owner = np.repeat(np.arange(len(kept)), counts_a)
    co = np.concatenate(cos).reshape(-1, 3)
    co = np.einsum("nij,nj->ni", matrices[owner, :3, :3], co) + matrices[owner, :3, 3]
    starts = np.cumsum(counts_a) - counts_a
    vi = np.concatenate(loops) + np.repeat(starts, loop_counts_a)
    tot = np.concatenate(sizes)
    palette = np.array([tuple(ob.active_material.diffuse_color) if ob.active_material is not None
                        else DEFAULT_COLOUR for ob in kept], dtype=np.float32)
    colours = np.repeat(palette, loop_counts_a, axis=0)
    me.vertices.add(len(co))
    me.vertices.foreach_set("co", co.astype(np.float32).ravel())
    me.loops.add(len(vi))
    me.loops.foreach_set("vertex_index", vi.astype(np.int32))
    me.polygons.add(len(tot))
    me.polygons.foreach_set("loop_start", (np.cumsum(tot) - tot).astype(np.int32))
    attr = me.color_attributes.get(PROXY) or me.color_attributes.new(PROXY, "FLOAT_COLOR", "CORNER")
    attr.data.foreach_set("color", colours.ravel())
    me.color_attributes.active_color = attr
    me.update()
