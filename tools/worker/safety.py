"""Blender hardening inside the worker: no auto-run scripts, no Python drivers, few operators."""

from __future__ import annotations

import bpy

# The only operators the worker ever calls (import/export); everything else uses the data API.
ALLOWED_OPERATORS = frozenset({
    "export_scene.gltf", "import_scene.gltf", "wm.stl_export", "wm.stl_import",
    "wm.obj_export", "wm.obj_import", "render.render",
})


def harden_blender() -> None:
    """Run again after every factory reset (it restores the preferences); the load hook is
    persistent, so it survives resets and is added once, not once per reset."""
    prefs = bpy.context.preferences
    prefs.filepaths.use_scripts_auto_execute = False
    try:
        prefs.system.use_online_access = False  # type: ignore[attr-defined]
    except AttributeError:
        pass
    if _after_load not in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.append(_after_load)


def run_operator(idname: str, **kwargs):
    if idname not in ALLOWED_OPERATORS:
        raise PermissionError(f"operator {idname} is not allowed")
    group, name = idname.split(".")
    return getattr(getattr(bpy.ops, group), name)(**kwargs)


@bpy.app.handlers.persistent
def _after_load(*_args) -> None:
    strip_scripts()


def _id_blocks():
    """Every ID datablock in the file, and the node trees embedded in them (a material's,
    world's, light's... node tree is not in `bpy.data.node_groups` but carries drivers)."""
    for prop in bpy.data.bl_rna.properties:
        if prop.type != "COLLECTION" or prop.identifier == "all_ids":
            continue
        base = prop.fixed_type
        while base is not None and base.identifier != "ID":
            base = base.base
        if base is None:
            continue
        for idb in getattr(bpy.data, prop.identifier):
            yield idb
            embedded = getattr(idb, "node_tree", None)
            if embedded is not None:
                yield embedded


def strip_scripts() -> int:
    """Remove SCRIPTED drivers from every ID type (objects, meshes, curves, materials and
    their node trees, node groups, shape keys, worlds, scenes, cameras, lights, ...) and
    every text block: loaded data must never carry code, nor take it into an export."""
    removed = 0
    for idb in list(_id_blocks()):
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
