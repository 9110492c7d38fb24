"""Deliverable files reloaded in the verifier: does each exist, reload, and hold the right
geometry? A STEP by B-rep IoU against its reference and a scene file by voxel IoU
(`check_deliverable`), or by the check a deliverable names (`DELIVERABLE_CHECKS`): a 3MF for a
printer, a millimetre mesh file, an assembly STEP by its solids, a GLB by its named objects.
"""

from __future__ import annotations

import zipfile
from typing import Any
from xml.etree import ElementTree

import numpy as np

from training.rewards import geometry
from training.tasks.recipes.boxes import rounded, rounded_all
from training.tasks.shapes import PART_IOU_MIN, SCENE_IOU_MIN, filed_reference


def check_deliverable(ctx: Any, d: dict[str, Any]) -> dict[str, Any]:
    """Does the file exist, reload, and hold the right geometry?"""
    path = ctx.workspace / d["path"]
    out: dict[str, Any] = {"path": d["path"], "exists": path.is_file(), "ok": False}
    if not out["exists"]:
        return out
    if d.get("check") in DELIVERABLE_CHECKS:  # a family's own reload-and-compare
        return DELIVERABLE_CHECKS[d["check"]](path, d, out)
    try:
        if d["format"] == "step":
            solid = geometry.load_solid(path)
            iou = geometry.brep_iou(filed_reference(d["script"]), solid, align_centres=True)
            out.update(reloads=True, iou=round(iou, 6), ok=iou >= PART_IOU_MIN)
        else:
            from training.tasks.scene_geometry import scene_iou

            meshes = geometry.load_scene_meshes(path)
            names_ok = all(any(k.startswith(n) for k in meshes) for n in d.get("names", []))
            iou = scene_iou(meshes.values(), d["items"])
            out.update(reloads=True, iou=round(iou, 6), names=names_ok)
            out["ok"] = names_ok and iou >= SCENE_IOU_MIN
    except geometry.ShapeLoadError as exc:
        out.update(reloads=False, error=str(exc))
    return out


def read_3mf(path) -> tuple[str, list[tuple[str, np.ndarray, np.ndarray]]]:
    """A 3MF package's unit and its mesh objects (name, vertices, triangles)."""
    with zipfile.ZipFile(path) as z:
        model = next((n for n in z.namelist() if n.lower().endswith(".model")), None)
        if model is None:
            raise ValueError("no 3D model in the package")
        root = ElementTree.fromstring(z.read(model))
    ns = {"m": root.tag.split("}")[0].strip("{")} if root.tag.startswith("{") else {"m": ""}
    q = (lambda t: f"m:{t}") if ns["m"] else (lambda t: t)
    out = []
    for o in root.iter(f"{{{ns['m']}}}object" if ns["m"] else "object"):
        verts = [[float(v.get(k)) for k in "xyz"] for v in o.findall(f".//{q('vertex')}", ns)]
        tris = [[int(t.get(k)) for k in ("v1", "v2", "v3")]
                for t in o.findall(f".//{q('triangle')}", ns)]
        if verts and tris:
            out.append((o.get("name", ""), np.array(verts), np.array(tris)))
    return root.get("unit", "millimeter"), out


def _mesh_facts(verts: np.ndarray, tris: np.ndarray) -> dict[str, Any]:
    import trimesh

    m = trimesh.Trimesh(verts, tris, process=False)
    lo, hi = verts.min(0), verts.max(0)
    return {"lo": lo, "hi": hi, "size": hi - lo, "volume": abs(float(m.volume))}


def _part_ok(facts: dict[str, Any], want: dict[str, Any], scale: float = 1.0) -> tuple[bool, dict]:
    """One reloaded mesh against the part it must be (sizes in the file's unit: mm * scale)."""
    size = np.asarray(want["size"], float) * scale
    ok = bool(np.all(np.abs(facts["size"] - size) <= 0.01 * size + 0.2 * scale))
    vol = want["volume"] * scale**3
    ok &= abs(facts["volume"] - vol) <= 0.02 * vol
    seen: dict[str, Any] = {"size": rounded_all(facts["size"]), "volume": rounded(facts["volume"], 6)}
    if want.get("centre") is not None:
        c = (facts["lo"][:2] + facts["hi"][:2]) / 2
        ok &= bool(np.all(np.abs(c - np.asarray(want["centre"], float) * scale) <= 1.0 * scale))
        seen["centre"] = rounded_all(c)
    if want.get("z0") is not None:
        ok &= abs(float(facts["lo"][2]) - want["z0"] * scale) <= 0.05 * scale
        seen["z_min"] = rounded(facts["lo"][2], 4)
    return ok, seen


def _on_plate(meshes: list[dict[str, Any]], plate, gap: float) -> tuple[bool, dict]:
    lo = np.min([m["lo"] for m in meshes], 0)
    hi = np.max([m["hi"] for m in meshes], 0)
    inside = bool(np.all(lo >= -0.05) and np.all(hi <= np.asarray(plate, float) + 0.05))
    clear = True
    for i, a in enumerate(meshes):
        for b in meshes[i + 1:]:
            sep = max(max(a["lo"][k] - b["hi"][k], b["lo"][k] - a["hi"][k]) for k in (0, 1))
            clear &= sep >= gap
    return inside and clear, {"inside": inside, "apart": clear}


def check_print_3mf(path, d: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    try:
        unit, objects = read_3mf(path)
    except (zipfile.BadZipFile, ElementTree.ParseError, ValueError, KeyError, TypeError) as e:
        return out | {"reloads": False, "error": str(e)[:200]}
    facts = {name: _mesh_facts(v, t) for name, v, t in objects}
    want = {p["name"]: p for p in d["parts"]}
    out.update(reloads=True, unit=unit, objects=sorted(facts))
    ok = unit == "millimeter" and set(facts) == set(want) and len(objects) == len(want)
    parts = {}
    for name, p in want.items():
        if name in facts:
            good, parts[name] = _part_ok(facts[name], p)
            ok &= good
    placed, out["plate"] = _on_plate(list(facts.values()), d["plate"], d.get("gap", 2.0))
    out["parts"] = parts
    out["ok"] = bool(ok and placed)
    return out


def check_mesh_file(path, d: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """An STL of one or more parts: reloads, in the declared unit, each part's size and
    volume (parts told apart by connected pieces, matched by size), optionally on a plate."""
    import trimesh

    try:
        mesh = trimesh.load(path, force="mesh")
        if mesh.is_empty:
            raise ValueError("no triangles")
    except Exception as e:  # noqa: BLE001 - any unreadable file is a failed deliverable
        return out | {"reloads": False, "error": str(e)[:200]}
    scale = 1.0 if d.get("unit", "mm") == "mm" else 0.001
    pieces = [_mesh_facts(np.asarray(m.vertices), np.asarray(m.faces))
              for m in mesh.split(only_watertight=False)]
    out["reloads"] = True
    whole = _mesh_facts(np.asarray(mesh.vertices), np.asarray(mesh.faces))
    if len(d["parts"]) == 1:
        ok, out["part"] = _part_ok(whole, d["parts"][0], scale)
    else:
        vol = sum(p["volume"] for p in d["parts"]) * scale**3
        ok = abs(whole["volume"] - vol) <= 0.02 * vol and len(pieces) >= len(d["parts"])
        out["volume"] = rounded(whole["volume"], 6)
    if d.get("plate"):
        placed, out["plate"] = _on_plate([whole], d["plate"], 0.0)
        ok &= placed
    out["ok"] = bool(ok)
    return out


def check_step_parts(path, d: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """A STEP file of several parts: one solid each, total volume, overall box (mm)."""
    from training.rewards.geometry import ShapeLoadError, load_solid, solid_volume, tight_bbox

    try:
        shape = load_solid(path)
    except ShapeLoadError as e:
        return out | {"reloads": False, "error": str(e)[:200]}
    lo, hi = tight_bbox(shape)
    vol = solid_volume(shape)
    n = len(shape.Solids())
    size = np.asarray(d["size"], float)
    ok = n == d["solids"] and abs(vol - d["volume"]) <= 0.01 * d["volume"]
    ok &= bool(np.all(np.abs((hi - lo) - size) <= 0.01 * size + 0.1))
    return out | {"reloads": True, "solids": n, "volume": rounded(vol), "size": rounded_all(hi - lo),
                  "ok": bool(ok)}


def check_glb_named(path, d: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """A GLB whose nodes keep the objects' names, each mesh of its size and place (metres)."""
    from training.rewards.geometry import ShapeLoadError, load_scene_meshes

    try:
        meshes = load_scene_meshes(path)
    except ShapeLoadError as e:
        return out | {"reloads": False, "error": str(e)[:200]}
    ok = True
    seen = {}
    for o in d["objects"]:
        node = next((k for k in meshes if k == o["name"] or k.startswith(o["name"] + ".")), None)
        if node is None:
            ok, seen[o["name"]] = False, "missing"
            continue
        m = meshes[node]
        lo, hi = m.bounds
        good = bool(np.all(np.abs((hi - lo) - np.asarray(o["size"])) <= 0.01 * np.asarray(o["size"]) + 2e-4))
        good &= bool(np.all(np.abs((lo + hi) / 2 - np.asarray(o["centre"])) <= 0.002))
        seen[o["name"]] = {"size": rounded_all(hi - lo), "centre": rounded_all((lo + hi) / 2), "ok": good}
        ok &= good
    ok &= len(meshes) >= len(d["objects"])
    return out | {"reloads": True, "objects": seen, "ok": bool(ok)}


# Deliverable checks by name (`"check"` in a deliverable): fn(path, d, out) -> out.
DELIVERABLE_CHECKS: dict[str, Any] = {
    "print_3mf": check_print_3mf, "mesh_file": check_mesh_file, "step_parts": check_step_parts,
    "glb_named": check_glb_named,
}
