"""Prepared CAD parts the edit families change (dimension_edits, feature_edits): a part as a
CadQuery script and as structured calls, its holes and placement.
"""

from __future__ import annotations

import math
from typing import Any

from training.tasks.spec import call

# ================================================================== CAD edits

FACE_WP = 'workplane(centerOption="ProjectedOrigin", origin=(0, 0, 0))'


def _pts(points) -> str:
    return "[" + ", ".join(f"({x!r}, {y!r})" for x, y in points) + "]"


def cad_script(plan: list[dict[str, Any]]) -> str:
    """The CadQuery script that builds what a plan of `cad_*` calls on one part builds (the
    same operations as tools/worker/cad.py), for the checker's reference part."""
    lines = ["import cadquery as cq", "s = None"]
    for step in plan:
        t, a = step["tool"], step["args"]
        if t == "cad_box":
            lines.append(f"s = cq.Workplane().box({a['length']!r}, {a['width']!r}, {a['height']!r}, "
                         "centered=(True, True, False)).val()")
        elif t == "cad_cylinder":
            lines.append(f"s = cq.Workplane().circle({a['radius']!r}).extrude({a['height']!r}).val()")
        elif t == "cad_hole":
            wp = (f"cq.Workplane('XY').add(s).faces({a.get('face', '>Z')!r}).{FACE_WP}"
                  f".pushPoints({_pts(a.get('positions', [[0, 0]]))})")
            if a.get("counterbore_diameter"):
                lines.append(f"s = {wp}.cboreHole({a['diameter']!r}, {a['counterbore_diameter']!r}, "
                             f"{a['counterbore_depth']!r}, {a.get('depth')!r}).val()")
            else:
                lines.append(f"s = {wp}.hole({a['diameter']!r}, {a.get('depth')!r}).val()")
        elif t == "cad_fillet":
            lines.append(f"s = cq.Workplane('XY').add(s).edges({a['edges']!r}).fillet({a['radius']!r}).val()")
        elif t == "cad_chamfer":
            lines.append(f"s = cq.Workplane('XY').add(s).edges({a['edges']!r}).chamfer({a['length']!r}).val()")
        elif t == "cad_sketch_extrude":
            p = a["profile"]
            assert p["kind"] == "circle", p
            lines.append(f"s = s.fuse(cq.Workplane('XY', origin=(0, 0, {a.get('at_z', 0.0)!r}))"
                         f".circle({p['radius']!r}).extrude({a['distance']!r}).val()).clean()")
        elif t in ("cad_pattern", "cad_query"):
            continue
        else:
            raise ValueError(f"cad_script: no translation for {t}")
    lines.append("result = s")
    return "\n".join(lines) + "\n"


def grid_points(count_x: int, count_y: int, sx: float, sy: float) -> list[list[float]]:
    return [[round((i - (count_x - 1) / 2) * sx, 9) + 0.0, round((j - (count_y - 1) / 2) * sy, 9) + 0.0]
            for j in range(count_y) for i in range(count_x)]


def bolt_circle(n: int, radius: float) -> list[list[float]]:
    return [[round(radius * math.cos(2 * math.pi * k / n), 9) + 0.0,
             round(radius * math.sin(2 * math.pi * k / n), 9) + 0.0] for k in range(n)]


def placement_of(pts) -> str:
    return ", ".join(f"({x:g}, {y:g})" for x, y in pts) + " mm"


class CadPart:
    """A part as parameters; `plan()` the `cad_*` calls that build it, `text()` its description."""

    def __init__(self, kind: str, name: str, **p: Any):
        self.kind, self.name, self.p = kind, name, dict(p)

    def with_(self, **changes: Any) -> CadPart:
        return CadPart(self.kind, self.name, **{**self.p, **changes})

    def plan(self) -> list[dict[str, Any]]:
        p, n = self.p, self.name
        if self.kind == "plate":
            return [call("cad_box", name=n, length=p["L"], width=p["W"], height=p["T"]),
                    call("cad_hole", name=n, diameter=p["d"], positions=grid_points(2, 2, p["sx"], p["sy"]))]
        if self.kind == "block":
            return [call("cad_box", name=n, length=p["L"], width=p["W"], height=p["T"]),
                    call("cad_fillet", name=n, edges="|Z", radius=p["r"]),
                    call("cad_hole", name=n, diameter=p["d"], positions=grid_points(p["nx"], 1, p["sx"], 1))]
        if self.kind == "flange":
            return [call("cad_cylinder", name=n, radius=p["D"] / 2, height=p["T"]),
                    call("cad_hole", name=n, diameter=p["bore"], positions=[[0.0, 0.0]]),
                    call("cad_pattern", kind="circle", count=p["n"], radius=p["R"]),
                    call("cad_hole", name=n, diameter=p["db"], positions=bolt_circle(p["n"], p["R"]))]
        if self.kind == "mount":
            return [call("cad_box", name=n, length=p["L"], width=p["W"], height=p["T"]),
                    call("cad_fillet", name=n, edges="|Z", radius=p["r"]),
                    call("cad_chamfer", name=n, edges=">Z", length=1),
                    call("cad_pattern", kind="grid", count_x=2, count_y=2,
                         spacing_x=p["L"] - 20, spacing_y=p["W"] - 20),
                    call("cad_hole", name=n, diameter=p["d"], positions=grid_points(2, 2, p["L"] - 20, p["W"] - 20)),
                    call("cad_hole", name=n, diameter=p["bore"], positions=[[0.0, 0.0]],
                         counterbore_diameter=p["cb"], counterbore_depth=p["cbd"]),
                    call("cad_pattern", kind="circle", count=p["n"], radius=p["R"]),
                    call("cad_hole", name=n, diameter=p["db"], positions=bolt_circle(p["n"], p["R"]))]
        raise ValueError(self.kind)

    def text(self) -> str:
        p, n = self.p, self.name
        if self.kind == "plate":
            return (f"'{n}': a plate {p['L']:g} x {p['W']:g} x {p['T']:g} mm (centred in XY, bottom on "
                    f"Z=0) with four {p['d']:g} mm through holes at (±{p['sx'] / 2:g}, ±{p['sy'] / 2:g}) mm")
        if self.kind == "block":
            return (f"'{n}': a block {p['L']:g} x {p['W']:g} x {p['T']:g} mm (centred in XY, bottom on "
                    f"Z=0), vertical edges filleted r={p['r']:g} mm, {p['nx']} through holes "
                    f"{p['d']:g} mm across at {placement_of(grid_points(p['nx'], 1, p['sx'], 1))}")
        if self.kind == "flange":
            return (f"'{n}': a round flange {p['D']:g} mm across and {p['T']:g} mm thick (on the Z axis, "
                    f"bottom on Z=0) with a {p['bore']:g} mm centre bore and {p['n']} holes {p['db']:g} mm "
                    f"across on a {2 * p['R']:g} mm bolt circle, the first on +X")
        if self.kind == "mount":
            return (f"'{n}': a mounting plate {p['L']:g} x {p['W']:g} x {p['T']:g} mm (centred in XY, "
                    f"bottom on Z=0), vertical edges filleted r={p['r']:g} mm then the top edges "
                    f"chamfered 1 mm, four {p['d']:g} mm holes at (±{(p['L'] - 20) / 2:g}, "
                    f"±{(p['W'] - 20) / 2:g}) mm, a {p['bore']:g} mm centre hole counterbored "
                    f"{p['cb']:g} mm across and {p['cbd']:g} mm deep, and {p['n']} holes {p['db']:g} mm "
                    f"across on a {2 * p['R']:g} mm bolt circle (first on +X)")
        raise ValueError(self.kind)

    def holes(self) -> list[tuple[float, int]]:
        p = self.p
        return {"plate": [(p.get("d"), 4)], "block": [(p.get("d"), p.get("nx"))],
                "flange": [(p.get("bore"), 1), (p.get("db"), p.get("n"))],
                "mount": [(p.get("d"), 4), (p.get("bore"), 1), (p.get("db"), p.get("n"))]}[self.kind]


def place_at(name: str, loc) -> list[dict[str, Any]]:
    return [call("transform", name=name, location=list(loc))] if any(loc) else []
