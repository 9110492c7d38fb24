"""Blender scene tools, on the data API and bmesh (50-100x faster here than bpy.ops)."""

from __future__ import annotations

import fnmatch
import math

import bmesh
import bpy
import numpy as np
from mathutils import Euler, Matrix, Vector

from tools.errors import ErrorKind, ToolError
from tools.worker import relations
from tools.worker.cad import PartStore


def obj(name: str) -> bpy.types.Object:
    ob = bpy.data.objects.get(name)
    if ob is None or ob.get("mw_helper"):
        names = user_objects()
        shown = ", ".join(o.name for o in names[:20]) or "none"
        raise ToolError(ErrorKind.VALIDATION, f"no object named {name!r}; objects: {shown}")
    return ob


def user_objects() -> list[bpy.types.Object]:
    return sorted((o for o in bpy.data.objects if not o.get("mw_helper")), key=lambda o: o.name)


def rounded(v, nd=6) -> list[float]:
    return [round(float(x), nd) + 0.0 for x in v]


def world_bbox(ob) -> tuple[Vector, Vector]:
    m = ob.matrix_world  # read once: every read builds a new wrapper (renders call this per object)
    xs, ys, zs = zip(*(m @ Vector(c) for c in ob.bound_box), strict=True)
    return Vector((min(xs), min(ys), min(zs))), Vector((max(xs), max(ys), max(zs)))


def material_of(ob) -> dict | None:
    mat = ob.active_material
    if mat is None:
        return None
    r, g, b = (max(0, min(255, round(c * 255))) for c in mat.diffuse_color[:3])
    return {"color": f"#{r:02X}{g:02X}{b:02X}", "metallic": round(mat.metallic, 4),
            "roughness": round(mat.roughness, 4)}


def describe(ob) -> dict:
    lo, hi = world_bbox(ob)
    loc, rot, scale = ob.matrix_world.decompose()
    mesh = ob.data if ob.type == "MESH" else None
    return {
        "name": ob.name, "source": ob.get("mw_source", "blender"), "type": ob.type.lower(),
        "location": rounded(loc), "rotation_deg": rounded(math.degrees(a) for a in rot.to_euler("XYZ")),
        "scale": rounded(scale), "dimensions": rounded(ob.dimensions), "bbox_min": rounded(lo), "bbox_max": rounded(hi),
        "material": material_of(ob), "vertices": len(mesh.vertices) if mesh else 0,
        "faces": len(mesh.polygons) if mesh else 0, "parent": ob.parent.name if ob.parent else None,
        "visible": not ob.hide_render, **_lamp_or_lens(ob),
    }


def _lamp_or_lens(ob) -> dict:
    """A light's kind, energy and colour; a camera's lens (checkers read framing and lighting)."""
    if ob.type == "LIGHT":
        r, g, b = (max(0, min(255, round(c * 255))) for c in ob.data.color[:3])
        return {"light": {"kind": ob.data.type.lower(), "energy": round(float(ob.data.energy), 6),
                          "color": f"#{r:02X}{g:02X}{b:02X}"}}
    if ob.type == "CAMERA":
        return {"camera": {"lens_mm": round(float(ob.data.lens), 6),
                           "sensor_mm": round(float(ob.data.sensor_width), 6)}}
    return {}


SCENE_PAGE = 25  # objects listed when the caller does not ask for more (keeps a reply small)
SHOWN_CHANGED = 20  # names of the objects the last mutating call changed, at most


def get_scene(a: dict | None = None, changed: set[str] | None = None) -> dict:
    """A bounded page of the scene: `limit` objects (name order) from `offset`, those whose
    name matches the glob `filter`, plus totals, counts by type and source, and the objects
    the last mutating call changed (`changed`; None when it may have changed any)."""
    a = a or {}
    objects = user_objects()
    pattern = a.get("filter")
    chosen = [o for o in objects if fnmatch.fnmatchcase(o.name, pattern)] if pattern else objects
    offset, limit = a.get("offset", 0), a.get("limit", SCENE_PAGE)
    page = chosen[offset:offset + limit]
    out: dict = {"objects": [describe(o) for o in page], "total": len(chosen), "offset": offset}
    if offset + len(page) < len(chosen):
        out["next_offset"] = offset + len(page)
    if offset == 0:
        counts: dict[str, int] = {}
        for o in objects:
            key = "cad" if o.get("mw_source") == "cad" else o.type.lower()
            counts[key] = counts.get(key, 0) + 1
        out["scene_objects"] = len(objects)
        out["counts"] = dict(sorted(counts.items()))
        if changed is None:
            out["changed"] = "unknown"
        else:
            names = sorted(n for n in changed if n in bpy.data.objects)
            out["changed"] = names[:SHOWN_CHANGED]
            if len(names) > SHOWN_CHANGED:
                out["changed_more"] = len(names) - SHOWN_CHANGED
    return out


def smooth_shade(me) -> None:
    """Curved surfaces render smooth, creases sharper than 30° stay crisp (Blender's
    "shade auto smooth"; shading flags only, the geometry and the scene hash are unchanged)."""
    me.shade_smooth()
    me.set_sharp_from_angle(angle=math.radians(30.0))


def _link(ob) -> None:
    bpy.context.scene.collection.objects.link(ob)


def _require_new(name: str) -> None:
    if name in bpy.data.objects:
        raise ToolError(ErrorKind.VALIDATION, f"an object named {name!r} exists already; pick another name or delete it")


def _torus(bm, dims) -> None:
    minor = dims[2] / 2
    major = min(dims[0], dims[1]) / 2 - minor
    if major <= 0:
        raise ToolError(ErrorKind.VALIDATION, "torus: dimensions x and y must exceed z (x = y = 2*(R + r), z = 2*r)")
    nu, nv = 48, 16
    verts = []
    for i in range(nu):
        u = 2 * math.pi * i / nu
        for j in range(nv):
            v = 2 * math.pi * j / nv
            verts.append(bm.verts.new(((major + minor * math.cos(v)) * math.cos(u),
                                       (major + minor * math.cos(v)) * math.sin(u), minor * math.sin(v))))
    for i in range(nu):
        for j in range(nv):
            a, b = i * nv + j, ((i + 1) % nu) * nv + j
            c, d = ((i + 1) % nu) * nv + (j + 1) % nv, i * nv + (j + 1) % nv
            bm.faces.new((verts[a], verts[b], verts[c], verts[d]))
    sx, sy = dims[0] / (2 * (major + minor)), dims[1] / (2 * (major + minor))
    bmesh.ops.scale(bm, vec=(sx, sy, 1.0), verts=bm.verts)


def add_primitive(a) -> dict:
    name, kind, dims = a["name"], a["kind"], a["dimensions"]
    _require_new(name)
    if kind != "plane" and min(dims) <= 0:
        raise ToolError(ErrorKind.VALIDATION, f"{kind}: every dimension must be > 0 (only a plane may have z = 0)")
    if kind == "plane" and min(dims[:2]) <= 0:
        raise ToolError(ErrorKind.VALIDATION, "plane: x and y dimensions must be > 0")
    bm = bmesh.new()
    try:
        if kind == "cube":
            bmesh.ops.create_cube(bm, size=1.0)
        elif kind == "cylinder":
            bmesh.ops.create_cone(bm, cap_ends=True, segments=48, radius1=0.5, radius2=0.5, depth=1.0)
        elif kind == "cone":
            bmesh.ops.create_cone(bm, cap_ends=True, segments=48, radius1=0.5, radius2=0.0, depth=1.0)
        elif kind == "uv_sphere":
            bmesh.ops.create_uvsphere(bm, u_segments=48, v_segments=24, radius=0.5)
        elif kind == "plane":
            bmesh.ops.create_grid(bm, x_segments=1, y_segments=1, size=0.5)
        if kind == "torus":
            _torus(bm, dims)
        else:
            bmesh.ops.scale(bm, vec=(dims[0], dims[1], dims[2] if kind != "plane" else 1.0), verts=bm.verts)
        me = bpy.data.meshes.new(name)
        bm.to_mesh(me)
    finally:
        bm.free()
    smooth_shade(me)
    ob = bpy.data.objects.new(name, me)
    ob.location = a["location"]
    ob.rotation_euler = Euler([math.radians(x) for x in a["rotation_deg"]], "XYZ")
    _link(ob)
    relations.place(ob)
    return {"created": describe(ob)}


def transform(a) -> dict:
    ob = obj(a["name"])
    if a.get("location") is not None:
        ob.location = a["location"]
    if a.get("rotation_deg") is not None:
        ob.rotation_mode = "XYZ"
        ob.rotation_euler = Euler([math.radians(x) for x in a["rotation_deg"]], "XYZ")
    if a.get("scale") is not None:
        ob.scale = a["scale"]
    relations.place(ob)
    return {"object": describe(ob)}


def set_material(a) -> dict:
    ob = obj(a["name"])
    if ob.type != "MESH":
        raise ToolError(ErrorKind.VALIDATION, f"{ob.name!r} is a {ob.type.lower()}, not a mesh")
    c = a["color"]
    rgb = [int(c[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    mat = bpy.data.materials.get(f"mw_{ob.name}") or bpy.data.materials.new(f"mw_{ob.name}")
    mat.diffuse_color = (*rgb, 1.0)
    mat.metallic = a["metallic"]
    mat.roughness = a["roughness"]
    if mat.node_tree is not None:  # keep the principled BSDF in step for glTF export
        bsdf = mat.node_tree.nodes.get("Principled BSDF")
        if bsdf is not None:
            bsdf.inputs["Base Color"].default_value = (*rgb, 1.0)
            bsdf.inputs["Metallic"].default_value = a["metallic"]
            bsdf.inputs["Roughness"].default_value = a["roughness"]
    ob.data.materials.clear()
    ob.data.materials.append(mat)
    return {"object": ob.name, "material": material_of(ob)}


MAX_FACES = 2_000_000


def apply_evaluated(ob) -> None:
    """Bake the object's modifiers into its mesh without bpy.ops."""
    dg = bpy.context.evaluated_depsgraph_get()
    new = bpy.data.meshes.new_from_object(ob.evaluated_get(dg))
    if len(new.polygons) > MAX_FACES:
        bpy.data.meshes.remove(new)
        raise ToolError(ErrorKind.KERNEL, f"the result would have over {MAX_FACES:,} faces; use fewer levels or copies")
    old = ob.data
    ob.modifiers.clear()
    ob.data = new
    new.name = ob.name
    if old.users == 0:
        bpy.data.meshes.remove(old)


def boolean(parts: PartStore):
    def run(a) -> dict:
        target, cutter = obj(a["target"]), obj(a["cutter"])
        if target == cutter:
            raise ToolError(ErrorKind.VALIDATION, "target and cutter must be different objects")
        op = a["operation"]
        if parts.has(target.name) and parts.has(cutter.name):
            t, c = parts.world(target.name), parts.world(cutter.name)
            shape = {"union": t.fuse, "difference": t.cut, "intersect": t.intersect}[op](c).clean()
            cname = cutter.name
            bpy.data.objects.remove(cutter)
            parts.drop(cname)
            target.matrix_world = Matrix.Identity(4)
            info = parts.set(target.name, shape, keep_transform=True)
            return {"object": target.name, "kernel": "cadquery", "volume": info["volume"]}
        for ob in (target, cutter):
            if ob.type != "MESH":
                raise ToolError(ErrorKind.VALIDATION, f"{ob.name!r} is not a mesh")
        mod = target.modifiers.new("mw_boolean", "BOOLEAN")
        mod.operation = {"union": "UNION", "difference": "DIFFERENCE", "intersect": "INTERSECT"}[op]
        mod.object = cutter
        mod.solver = "EXACT"
        apply_evaluated(target)
        parts.drop(target.name)  # a mixed boolean leaves a plain mesh
        target["mw_source"] = "blender"
        cname = cutter.name
        bpy.data.objects.remove(cutter)
        parts.drop(cname)
        bpy.context.view_layer.update()
        if len(target.data.polygons) == 0 and op != "difference":
            raise ToolError(ErrorKind.KERNEL, f"{op} left {target.name!r} empty (do the objects overlap?)")
        return {"object": describe(target), "kernel": "blender"}
    return run


def delete(parts: PartStore):
    def run(a) -> dict:
        ob = obj(a["name"])
        for child in ob.children:
            mw = child.matrix_world.copy()
            child.parent = None
            child.matrix_world = mw
        parts.drop(ob.name)
        bpy.data.objects.remove(ob)
        return {"deleted": a["name"]}
    return run


def duplicate(parts: PartStore):
    def run(a) -> dict:
        ob = obj(a["name"])
        _require_new(a["new_name"])
        new = ob.copy()
        if ob.data is not None:
            new.data = ob.data.copy()
            new.data.name = a["new_name"]
        new.name = a["new_name"]
        _link(new)
        if a.get("location") is not None:
            new.location = a["location"]
        if parts.has(ob.name):
            parts.copy(ob.name, new.name)
        relations.place(new)
        return {"created": describe(new)}
    return run


def rename(parts: PartStore):
    def run(a) -> dict:
        ob = obj(a["name"])
        _require_new(a["new_name"])
        parts.rename(ob.name, a["new_name"])
        ob.name = a["new_name"]
        if ob.data is not None and ob.data.users == 1:
            ob.data.name = a["new_name"]
        return {"renamed": a["name"], "to": ob.name}
    return run


def parent(a) -> dict:
    child = obj(a["child"])
    mw = child.matrix_world.copy()
    if a.get("parent") is None:
        child.parent = None
    else:
        p = obj(a["parent"])
        anc = p
        while anc is not None:
            if anc == child:
                raise ToolError(ErrorKind.VALIDATION, "that parenting would make a cycle")
            anc = anc.parent
        child.parent = p
        child.matrix_parent_inverse = p.matrix_world.inverted()
    child.matrix_world = mw
    relations.forget()  # the scene may have its first parent now
    bpy.context.view_layer.update()
    return {"object": describe(child)}


def join(parts: PartStore):
    def run(a) -> dict:
        into = obj(a["into"])
        others = [obj(n) for n in a["others"]]
        if into in others or len(set(others)) != len(others):
            raise ToolError(ErrorKind.VALIDATION, "join: `into` and `others` must be distinct objects")
        for ob in [into, *others]:
            if ob.type != "MESH":
                raise ToolError(ErrorKind.VALIDATION, f"{ob.name!r} is not a mesh")
        bm = bmesh.new()
        try:
            inv = into.matrix_world.inverted()
            for ob in [into, *others]:
                tmp = ob.data.copy()
                tmp.transform(inv @ ob.matrix_world)
                bm.from_mesh(tmp)
                bpy.data.meshes.remove(tmp)
            bm.to_mesh(into.data)
        finally:
            bm.free()
        for ob in others:
            parts.drop(ob.name)
            bpy.data.objects.remove(ob)
        parts.drop(into.name)
        into["mw_source"] = "blender"
        return {"object": describe(into)}
    return run


def modifier(parts: PartStore):
    def run(a) -> dict:
        ob = obj(a["name"])
        if ob.type != "MESH":
            raise ToolError(ErrorKind.VALIDATION, f"{ob.name!r} is not a mesh")
        kind = a["kind"]
        mod = ob.modifiers.new(f"mw_{kind}", {"bevel": "BEVEL", "array": "ARRAY", "mirror": "MIRROR",
                                               "solidify": "SOLIDIFY", "subdivision": "SUBSURF"}[kind])
        if kind == "bevel":
            mod.width, mod.segments = a["width"], a["segments"]
        elif kind == "array":
            mod.count = a["count"]
            mod.use_relative_offset = True
            mod.relative_offset_displace = a["offset"]
        elif kind == "mirror":
            mod.use_axis = [a["axis"] == ax for ax in "XYZ"]
        elif kind == "solidify":
            mod.thickness = a["thickness"]
        else:
            mod.levels = mod.render_levels = a["levels"]
        if a["apply"]:
            apply_evaluated(ob)
            parts.drop(ob.name)
            ob["mw_source"] = "blender"
        bpy.context.view_layer.update()
        return {"object": describe(ob), "applied": a["apply"]}
    return run


def add_light(a) -> dict:
    _require_new(a["name"])
    light = bpy.data.lights.new(a["name"], a["kind"].upper())
    light.energy = a["energy"]
    light.color = [int(a["color"][i:i + 2], 16) / 255 for i in (1, 3, 5)]
    ob = bpy.data.objects.new(a["name"], light)
    ob.location = a["location"]
    if a.get("target") is not None:
        _aim(ob, a["target"])
    _link(ob)
    # Place it now, as every other tool does: a world matrix left for some later call to
    # update made the scene hash change under a call that never touched the light.
    relations.place(ob)
    return {"created": describe(ob)}


def _aim(ob, target) -> None:
    """Point the object's -Z (a light's beam, a camera's view) at `target`, +Y up."""
    d = Vector(target) - Vector(ob.location)
    if d.length < 1e-9:
        raise ToolError(ErrorKind.VALIDATION, "target must differ from location")
    ob.rotation_mode = "XYZ"
    ob.rotation_euler = d.to_track_quat("-Z", "Y" if abs(d.normalized().z) < 0.999 else "X").to_euler()


def add_camera(a) -> dict:
    _require_new(a["name"])
    cam = bpy.data.cameras.new(a["name"])
    cam.lens = a["lens_mm"]
    cam.sensor_width = 36.0
    cam.sensor_fit = "AUTO"
    ob = bpy.data.objects.new(a["name"], cam)
    ob.location = a["location"]
    _aim(ob, a["target"])
    _link(ob)
    relations.place(ob)
    return {"created": describe(ob)}


def set_visible(a) -> dict:
    ob = obj(a["name"])
    ob.hide_render = not a["visible"]
    return {"object": ob.name, "visible": a["visible"]}


def clear_scene(parts: PartStore):
    def run(_a) -> dict:
        n = 0
        for ob in user_objects():
            bpy.data.objects.remove(ob)
            n += 1
        parts.clear()
        return {"deleted": n}
    return run


def _mesh_arrays(ob):
    dg = bpy.context.evaluated_depsgraph_get()
    ev = ob.evaluated_get(dg)
    me = ev.to_mesh()
    try:
        bm = bmesh.new()
        bm.from_mesh(me)
        bm.transform(ob.matrix_world)
        vol = abs(bm.calc_volume(signed=True))
        area = sum(f.calc_area() for f in bm.faces)
        bm.free()
    finally:
        ev.to_mesh_clear()
    return vol, area


def measure(a) -> dict:
    ob = obj(a["name"])
    out: dict = {"name": ob.name, "dimensions": rounded(ob.dimensions)}
    if ob.type == "MESH":
        vol, area = _mesh_arrays(ob)
        out.update(volume=round(vol, 9), area=round(area, 9))
    if a.get("other"):
        other = obj(a["other"])
        lo1, hi1 = world_bbox(ob)
        lo2, hi2 = world_bbox(other)
        c1, c2 = (lo1 + hi1) / 2, (lo2 + hi2) / 2
        gap = np.maximum(0.0, np.maximum(np.array(lo2) - np.array(hi1), np.array(lo1) - np.array(hi2)))
        out["other"] = other.name
        out["center_distance"] = round((c1 - c2).length, 6)
        out["center_delta"] = rounded(c2 - c1)
        out["bbox_gap"] = round(float(np.linalg.norm(gap)), 6)
        out["bbox_overlap"] = bool(np.all(gap == 0))
    return out


def handlers(parts: PartStore) -> dict:
    return {
        "add_primitive": add_primitive, "transform": transform, "set_material": set_material,
        "boolean": boolean(parts), "delete": delete(parts), "duplicate": duplicate(parts),
        "rename": rename(parts), "parent": parent, "join": join(parts), "modifier": modifier(parts),
        "add_light": add_light, "add_camera": add_camera, "set_visible": set_visible, "clear_scene": clear_scene(parts), "get_scene": get_scene,
        "measure": measure,
    }
