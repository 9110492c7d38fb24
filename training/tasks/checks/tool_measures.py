"""Constraint kinds measured by the clean worker's own tools: mesh health (`mesh_check`), wall
thickness, mass and centre of mass (`mass_properties`).
"""

from __future__ import annotations

import numpy as np

from training.tasks.checks.measure import (
    Measured,
    missing_object,
)
from training.tasks.context import EvalContext


def _tool(ctx: EvalContext, tool: str, args: dict) -> dict | None:
    """A read-only tool's answer in the checker's (clean) session, cached per call."""
    cache = ctx.__dict__.setdefault("_tool_answers", {})
    key = (tool, repr(sorted(args.items())))
    if key not in cache:
        r = ctx.session.call(tool, args)
        cache[key] = r.output if r.ok else None
    return cache[key]


MESH_FACTS = {
    "closed": lambda h: h["boundary_edges"] == 0 and h["non_manifold_edges"] == 0,
    "consistent": lambda h: h["flipped_edges"] == 0,
    "outward": lambda h: h["normals"] == "outward",
    "welded": lambda h: h["duplicate_vertices"] == 0,
    "one_piece": lambda h: h["loose_parts"] == 1 and h["loose_geometry"] == 0,
    "manifold": lambda h: bool(h["manifold"]),
}


def c_mesh_health(ctx: EvalContext, object: str, require: list[str]) -> Measured:
    """Facts of a mesh as `mesh_check` measures them in the clean session (closed, welded...)."""
    if ctx.obj(object) is None:
        return missing_object(object)
    h = _tool(ctx, "mesh_check", {"name": object})
    if h is None:
        return False, "not a mesh"
    failed = [f for f in require if not MESH_FACTS[f](h)]
    keys = ("boundary_edges", "holes", "flipped_edges", "normals", "duplicate_vertices",
            "loose_parts", "non_manifold_edges")
    return not failed, {"failed": failed, **{k: h[k] for k in keys}}


def c_wall_thickness(ctx: EvalContext, object: str, value: float, tol_rel: float) -> Measured:
    """Walls `value` metres thick, as `mesh_check` measures them (rays through the material):
    the area-weighted 5th percentile within `tol_rel`, and nowhere thinner than that allows."""
    if ctx.obj(object) is None:
        return missing_object(object)
    h = _tool(ctx, "mesh_check", {"name": object})
    w = h and h.get("wall_thickness")
    if not w:
        return False, "not measurable"
    ok = abs(w["p5"] - value) <= tol_rel * value and w["min"] >= value * (1 - 2 * tol_rel)
    return ok, w


def _mass_props(ctx: EvalContext, objects: list[str]) -> dict | None:
    return _tool(ctx, "mass_properties", {"names": list(objects)})


def c_mass(ctx: EvalContext, objects: list[str], density: float, value: float,
           tol_rel: float) -> Measured:
    """The mass (kg) of objects of one density (kg/m³), from their meshes' volume."""
    missing = [n for n in objects if ctx.obj(n) is None]
    if missing:
        return missing_object(missing[0])
    p = _mass_props(ctx, objects)
    if p is None:
        return False, "not measurable"
    m = p["volume"] * density
    return abs(m - value) <= tol_rel * value, round(m, 5)


def c_centre_of_mass(ctx: EvalContext, densities: dict[str, float], value, tol: float,
                     axes: str = "xyz") -> Measured:
    """The centre of mass of objects of given densities (kg/m³) lies at `value` (metres) along
    `axes` (the other coordinates of `value` are ignored)."""
    missing = [n for n in densities if ctx.obj(n) is None]
    if missing:
        return missing_object(missing[0])
    total, moment = 0.0, np.zeros(3)
    for name, rho in densities.items():
        p = _mass_props(ctx, [name])
        if p is None or p["centre_of_mass"] is None:
            return False, f"{name} not measurable"
        total += p["volume"] * rho
        moment += p["volume"] * rho * np.asarray(p["centre_of_mass"], float)
    if total <= 0:
        return False, "no mass"
    com = moment / total
    idx = ["xyz".index(a) for a in axes]
    err = float(np.max(np.abs(com[idx] - np.asarray(value, float)[idx])))
    return err <= tol, [round(float(x), 4) for x in com]
