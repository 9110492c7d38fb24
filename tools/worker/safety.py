"""Blender hardening inside the worker: no auto-run scripts, no Python drivers, few operators."""

from __future__ import annotations

import bpy

# The only operators the worker ever calls (import/export); everything else uses the data API.
ALLOWED_OPERATORS = frozenset({
    "export_scene.gltf", "import_scene.gltf", "wm.stl_export", "wm.stl_import",
    "wm.obj_export", "wm.obj_import", "render.render",
})


def harden_blender() -> None:
    prefs = bpy.context.preferences
    prefs.filepaths.use_scripts_auto_execute = False
    try:
        prefs.system.use_online_access = False  # type: ignore[attr-defined]
    except AttributeError:
        pass
    bpy.app.handlers.load_post.append(_after_load)


def run_operator(idname: str, **kwargs):
    if idname not in ALLOWED_OPERATORS:
        raise PermissionError(f"operator {idname} is not allowed")
    group, name = idname.split(".")
    return getattr(getattr(bpy.ops, group), name)(**kwargs)


@bpy.app.handlers.persistent
def _after_load(*_args) -> None:
    strip_scripts()


def strip_scripts() -> int:
    """Remove SCRIPTED drivers and text blocks: loaded data must never carry code."""
    removed = 0
    for coll in (bpy.data.objects, bpy.data.meshes, bpy.data.materials, bpy.data.scenes,
                 bpy.data.shape_keys, bpy.data.node_groups, bpy.data.worlds, bpy.data.cameras,
                 bpy.data.lights):
        for idb in coll:
            ad = getattr(idb, "animation_data", None)
            if ad is None:
                continue
            for drv in list(ad.drivers):
                if drv.driver.type == "SCRIPTED":
                    ad.drivers.remove(drv)
                    removed += 1
    for text in list(bpy.data.texts):
        bpy.data.texts.remove(text)
        removed += 1
    return removed
