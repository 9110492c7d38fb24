"""Export and import of files, confined to the session's workspace."""

from __future__ import annotations

import os

import bpy

from tools.errors import ErrorKind, ToolError
from tools.worker import safety
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


def _select_only(objs) -> None:
    for ob in bpy.context.scene.objects:
        ob.select_set(ob in objs)
    if objs:
        bpy.context.view_layer.objects.active = objs[0]


def handlers(parts: PartStore, scratch: str, workspace: str) -> dict:
    def export(a) -> dict:
        fmt = a["format"]
        suffix = {"glb": ".glb", "blend": ".blend", "stl": ".stl", "obj": ".obj", "step": ".step"}[fmt]
        path = a["path"] if a["path"].lower().endswith(suffix) or fmt == "step" and a["path"].lower().endswith(".stp") else a["path"] + suffix
        full = resolve(workspace, path)
        objs = [obj(n) for n in a["objects"]] if a.get("objects") else user_objects()
        if not objs:
            raise ToolError(ErrorKind.VALIDATION, "nothing to export: the scene is empty")
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if fmt == "step":
            import cadquery as cq

            not_cad = [o.name for o in objs if not parts.has(o.name)]
            if not_cad:
                raise ToolError(ErrorKind.VALIDATION, f"step export is for CAD parts only; not CAD: {', '.join(not_cad)}")
            shapes = [parts.world(o.name) for o in objs]
            shape = shapes[0] if len(shapes) == 1 else cq.Compound.makeCompound(shapes)
            cq.exporters.export(shape, full, exportType="STEP")
        elif fmt == "blend":
            bpy.data.libraries.write(full, set(objs), compress=False)
        else:
            _select_only(objs)
            if fmt == "glb":
                safety.run_operator("export_scene.gltf", filepath=full, export_format="GLB",
                                    use_selection=True, export_apply=True)
            elif fmt == "stl":
                safety.run_operator("wm.stl_export", filepath=full, export_selected_objects=True,
                                    apply_modifiers=True)
            else:
                safety.run_operator("wm.obj_export", filepath=full, export_selected_objects=True,
                                    export_materials=False)
        return {"path": os.path.relpath(full, os.path.realpath(workspace)), "format": fmt,
                "objects": [o.name for o in objs], "bytes": os.path.getsize(full)}

    def import_file(a) -> dict:
        full = resolve(workspace, a["path"], must_exist=True)
        suffix = os.path.splitext(full)[1].lower()
        if suffix not in IMPORT_SUFFIXES:
            raise ToolError(ErrorKind.VALIDATION, f"cannot import {suffix or 'a file without suffix'}; use one of {', '.join(IMPORT_SUFFIXES)}")
        before = set(bpy.data.objects)
        if suffix in (".step", ".stp"):
            import cadquery as cq

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
            safety.run_operator("import_scene.gltf", filepath=full)
        elif suffix == ".stl":
            safety.run_operator("wm.stl_import", filepath=full)
        else:
            safety.run_operator("wm.obj_import", filepath=full)
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
