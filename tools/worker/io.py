"""Export and import of files, confined to the session's workspace.

An imported file may name other files: a glTF's buffers and images (`uri`), an OBJ's
material libraries (`mtllib`), an MTL's texture maps (`map_Kd`, `bump`, ...). Each reference
must resolve inside the workspace, or the import is refused before any importer runs.
"""

from __future__ import annotations

import json
import os
import struct
from urllib.parse import unquote, urlsplit

import bpy

from tools.errors import ErrorKind, ToolError
from tools.worker import lazy_cq, safety, threemf
from tools.worker.cad import PartStore
from tools.worker.scene import obj, user_objects

IMPORT_SUFFIXES = (".blend", ".glb", ".gltf", ".stl", ".obj", ".step", ".stp")


def resolve(workspace: str, path: str, must_exist: bool = False) -> str:
    """A path inside the workspace, or a `sandbox` error. Relative paths are workspace-relative."""
    if "\0" in path:
        raise ToolError(ErrorKind.VALIDATION, "path contains a NUL byte")
    root = os.path.realpath(workspace)
    full = os.path.realpath(os.path.join(root, path))
    if full != root and not full.startswith(root + os.sep):
        raise ToolError(ErrorKind.SANDBOX, f"{path!r} is outside the workspace; use a path inside it (e.g. 'out/part.glb')")
    if must_exist and not os.path.isfile(full):
        raise ToolError(ErrorKind.VALIDATION, f"no file {path!r} in the workspace")
    return full


MAX_REFERENCE_SCAN = 64 << 20  # a glTF JSON chunk / OBJ / MTL scanned for file names
_MTL_MAPS = ("map_", "bump", "disp", "decal", "refl", "norm")


def _refuse_outside(workspace: str, base_dir: str, ref: str, what: str) -> str:
    if not ref or "\0" in ref or os.path.isabs(ref):
        raise ToolError(ErrorKind.SANDBOX, f"{what} {ref!r} is not a relative path inside the workspace")
    full = os.path.realpath(os.path.join(base_dir, ref))
    root = os.path.realpath(workspace)
    if full != root and not full.startswith(root + os.sep):
        raise ToolError(ErrorKind.SANDBOX, f"{what} {ref!r} points outside the workspace; refused")
    return full


def _gltf_json(path: str) -> dict:
    with open(path, "rb") as f:
        head = f.read(12)
        if head[:4] == b"glTF":  # GLB: header, then the JSON chunk
            n, kind = struct.unpack("<I4s", f.read(8))
            if kind != b"JSON" or n > MAX_REFERENCE_SCAN:
                raise ToolError(ErrorKind.VALIDATION, "not a valid GLB file (no JSON chunk)")
            data = f.read(n)
        else:
            data = head + f.read(MAX_REFERENCE_SCAN)
    try:
        doc = json.loads(data)
    except ValueError:
        raise ToolError(ErrorKind.VALIDATION, "not a valid glTF file (bad JSON)") from None
    if not isinstance(doc, dict):
        raise ToolError(ErrorKind.VALIDATION, "not a valid glTF file")
    return doc


def check_gltf_references(workspace: str, path: str) -> None:
    """Every buffer/image `uri` is embedded (`data:`) or a file inside the workspace."""
    doc, base = _gltf_json(path), os.path.dirname(path)
    for key in ("buffers", "images"):
        items = doc.get(key) or []
        for item in items if isinstance(items, list) else []:
            uri = item.get("uri") if isinstance(item, dict) else None
            if uri is None:
                continue
            if not isinstance(uri, str):
                raise ToolError(ErrorKind.VALIDATION, f"glTF {key} uri is not a string")
            if uri.startswith("data:"):
                continue
            parts = urlsplit(uri)
            if parts.scheme or parts.netloc:
                raise ToolError(ErrorKind.SANDBOX, f"glTF {key} uri {uri[:200]!r} is not a file in the workspace; refused")
            _refuse_outside(workspace, base, unquote(parts.path), f"glTF {key} uri")


def _lines(path: str):
    with open(path, "rb") as f:
        data = f.read(MAX_REFERENCE_SCAN)
    for raw in data.decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            yield line


def check_obj_references(workspace: str, path: str) -> None:
    """`mtllib` files, and the texture maps they name, all lie inside the workspace."""
    base = os.path.dirname(path)
    for line in _lines(path):
        if line.split(maxsplit=1)[0] != "mtllib":
            continue
        # Blender reads the rest of the line as one file name; check it whole and by word.
        rest = line[len("mtllib"):].strip()
        for ref in {rest, *rest.split()}:
            mtl = _refuse_outside(workspace, base, ref, "OBJ mtllib")
            if os.path.isfile(mtl):
                for mline in _lines(mtl):
                    word = mline.split(maxsplit=1)[0].lower()
                    if word.startswith(_MTL_MAPS) and len(mline.split()) > 1:
                        tex = mline.split(maxsplit=1)[1].strip()
                        for ref2 in {tex, tex.split()[-1]}:
                            _refuse_outside(workspace, os.path.dirname(mtl), ref2, f"MTL {word}")


def _select_only(objs) -> None:
    for ob in bpy.context.scene.objects:
        ob.select_set(ob in objs)
    if objs:
        bpy.context.view_layer.objects.active = objs[0]


def _world_meshes_mm(objs) -> list:
    """(name, vertices in mm, triangles) of each object as drawn (modifiers applied, placed in
    the world); objects without faces (lights, empties) are left out."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    meshes = []
    for ob in objs:
        evaluated = ob.evaluated_get(depsgraph)
        try:
            mesh = evaluated.to_mesh()
        except RuntimeError:  # an object with no geometry
            continue
        if mesh is None:
            continue
        try:
            mesh.calc_loop_triangles()
            m = ob.matrix_world
            verts = [tuple(1000.0 * c for c in m @ v.co) for v in mesh.vertices]
            tris = [tuple(t.vertices) for t in mesh.loop_triangles]
            if m.determinant() < 0:  # a mirrored object: keep the normals pointing out
                tris = [(a, c, b) for a, b, c in tris]
        finally:
            evaluated.to_mesh_clear()
        if tris:
            meshes.append((ob.name, verts, tris))
    if not meshes:
        raise ToolError(ErrorKind.VALIDATION, "nothing to export as 3mf: no object has faces")
    return meshes


def _file_scale(a: dict) -> float:
    """Scene metres to the file's unit (`unit` 'mm' writes millimetres, as slicers expect)."""
    return 1000.0 if a.get("unit") == "mm" else 1.0


def handlers(parts: PartStore, scratch: str, workspace: str) -> dict:
    def export(a) -> dict:
        fmt = a["format"]
        suffix = {"glb": ".glb", "blend": ".blend", "stl": ".stl", "obj": ".obj", "step": ".step",
                  "3mf": ".3mf"}[fmt]
        path = a["path"] if a["path"].lower().endswith(suffix) or fmt == "step" and a["path"].lower().endswith(".stp") else a["path"] + suffix
        full = resolve(workspace, path)
        objs = [obj(n) for n in a["objects"]] if a.get("objects") else user_objects()
        if not objs:
            raise ToolError(ErrorKind.VALIDATION, "nothing to export: the scene is empty")
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if fmt == "step":
            cq = lazy_cq.module()

            not_cad = [o.name for o in objs if not parts.has(o.name)]
            if not_cad:
                raise ToolError(ErrorKind.VALIDATION, f"step export is for CAD parts only; not CAD: {', '.join(not_cad)}")
            shapes = [parts.world(o.name) for o in objs]
            shape = shapes[0] if len(shapes) == 1 else cq.Compound.makeCompound(shapes)
            cq.exporters.export(shape, full, exportType="STEP")
        elif fmt == "3mf":
            threemf.write_3mf(full, _world_meshes_mm(objs))
        elif fmt == "blend":
            safety.strip_scripts()  # code planted since the last load never leaves in a file
            bpy.data.libraries.write(full, set(objs), compress=False)
        else:
            _select_only(objs)
            if fmt == "glb":
                safety.run_operator("export_scene.gltf", filepath=full, export_format="GLB",
                                    use_selection=True, export_apply=True)
            elif fmt == "stl":
                safety.run_operator("wm.stl_export", filepath=full, export_selected_objects=True,
                                    apply_modifiers=True, global_scale=_file_scale(a))
            else:
                safety.run_operator("wm.obj_export", filepath=full, export_selected_objects=True,
                                    export_materials=False, global_scale=_file_scale(a))
        return {"path": os.path.relpath(full, os.path.realpath(workspace)), "format": fmt,
                "objects": [o.name for o in objs], "bytes": os.path.getsize(full)}

    def import_file(a) -> dict:
        full = resolve(workspace, a["path"], must_exist=True)
        suffix = os.path.splitext(full)[1].lower()
        if suffix not in IMPORT_SUFFIXES:
            raise ToolError(ErrorKind.VALIDATION, f"cannot import {suffix or 'a file without suffix'}; use one of {', '.join(IMPORT_SUFFIXES)}")
        before = set(bpy.data.objects)
        if suffix in (".step", ".stp"):
            cq = lazy_cq.module()

            shape = cq.importers.importStep(full).val()
            base = os.path.splitext(os.path.basename(full))[0][:50] or "part"
            name, i = base, 1
            while name in bpy.data.objects:
                i += 1
                name = f"{base}.{i:03d}"
            parts.set(name, shape)
        elif suffix == ".blend":
            with bpy.data.libraries.load(full, link=False) as (src, dst):
                dst.objects = list(src.objects)  # objects only: no texts, no scenes, no UI
            for ob in dst.objects:
                if ob is not None and ob.type in ("MESH", "EMPTY", "LIGHT", "CURVE"):
                    bpy.context.scene.collection.objects.link(ob)
                elif ob is not None:
                    bpy.data.objects.remove(ob)
            safety.strip_scripts()
        elif suffix in (".glb", ".gltf"):
            check_gltf_references(workspace, full)
            safety.run_operator("import_scene.gltf", filepath=full)
        elif suffix == ".stl":
            safety.run_operator("wm.stl_import", filepath=full)
        else:
            check_obj_references(workspace, full)
            safety.run_operator("wm.obj_import", filepath=full)
        safety.strip_scripts()
        new = sorted(o.name for o in set(bpy.data.objects) - before)
        for name in new:
            ob = bpy.data.objects[name]
            if ob.get("mw_helper"):
                ob["mw_helper"] = 0
            if "mw_source" in ob and not parts.has(name):
                ob["mw_source"] = "blender"
        if not new:
            raise ToolError(ErrorKind.KERNEL, f"{a['path']} held no objects")
        bpy.context.view_layer.update()
        return {"imported": new}

    return {"export": export, "import_file": import_file}
