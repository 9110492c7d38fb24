"""CAD plans judged against a reference built from the plan itself (the part families of #31).

`reference()` writes a CadQuery script that performs each call the way the worker's handler
does (written again here, not imported: tools/worker/cad.py runs under bpy) and places the part
as the scene does. A part is then judged by exact IoU against it (placement forgiven), the
same faces by surface type (every feature there), the same exact bounding box (placement not
forgiven), its hole counts and, for text, the text alone against the reference's text.
"""

from __future__ import annotations

import math
import random
from typing import Any

from training.tasks.spec import TaskSpec

PART_IOU_MIN = 0.999  # exact solids built the same way score 1 to ~1e-9


TEXT_FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"  # the worker's (tools/worker/cad.py)



PRELUDE = f'''import os
import cadquery as cq
S, M = {{}}, {{}}
FONT = {TEXT_FONT!r}


def wp(s):
    return cq.Workplane("XY").add(s)


def one(w):
    vals = [v for v in w.vals() if isinstance(v, cq.Shape)]
    return vals[0] if len(vals) == 1 else cq.Compound.makeCompound(vals)


def fixed(shape):
    from OCP.ShapeFix import ShapeFix_Solid

    out = []
    for solid in shape.Solids():
        fix = ShapeFix_Solid(solid.wrapped)
        fix.Perform()
        out.append(cq.Shape.cast(fix.Solid()))
    return out[0] if len(out) == 1 else cq.Compound.makeCompound(out)


def bsplines(shape):  # tools/cadfix.py revolutions_as_bsplines: reloads from STEP right
    from OCP.ShapeCustom import ShapeCustom

    if not any(f.geomType() == "REVOLUTION" for f in shape.Faces()):
        return shape
    return cq.Shape.cast(ShapeCustom.ConvertToBSpline_s(shape.wrapped, False, True, False, False))


def add(n, s):
    S[n] = S[n].fuse(s).clean() if n in S else s


def world(n):
    s = S[n]
    rot, loc = M.get(n, ((0, 0, 0), (0, 0, 0)))
    for axis, deg in zip(((1, 0, 0), (0, 1, 0), (0, 0, 1)), rot):
        if deg:
            s = s.rotate((0, 0, 0), axis, deg)
    return s.translate(cq.Vector(*[c * 1000 for c in loc]))


def on_face(n, face):
    return wp(S[n]).faces(face).workplane(centerOption="ProjectedOrigin", origin=(0, 0, 0))


def sweep(n, path, profile, radius, width, height, kind):
    pts = [cq.Vector(*p) for p in path]
    if kind == "arc":
        wire = cq.Wire.assembleEdges([cq.Edge.makeThreePointArc(*pts)])
    else:
        wire = cq.Wire.makePolygon(pts)
    t = wire.tangentAt(0).normalized()
    up = cq.Vector(0, 0, 1) if abs(t.z) < 0.999 else cq.Vector(0, 1, 0)
    w = cq.Workplane(cq.Plane(origin=pts[0], xDir=up.cross(t).normalized(), normal=t))
    w = w.circle(radius) if profile == "circle" else w.rect(width, height)
    add(n, bsplines(w.sweep(cq.Workplane().add(wire), transition="round").val()))


def loft(n, sections, ruled):
    wires = []
    for s in sections:
        c = cq.Vector(s.get("x", 0), s.get("y", 0), s["z"])
        if s["kind"] == "circle":
            wires.append(cq.Wire.makeCircle(s["radius"], c, cq.Vector(0, 0, 1)))
        else:
            w, h = s["width"] / 2, s["height"] / 2
            pts = [c + cq.Vector(x, y, 0) for x, y in ((-w, -h), (w, -h), (w, h), (-w, h))]
            wires.append(cq.Wire.makePolygon(pts, close=True))
    add(n, cq.Solid.makeLoft(wires, ruled))


def text(n, txt, height, depth, mode, face, position):
    w = on_face(n, face).center(*position)
    cut = mode == "engrave"
    font = FONT if os.path.isfile(FONT) else None
    S[n] = one(w.text(txt, height, -depth if cut else depth, combine="cut" if cut else "a",
                      fontPath=font))
'''


def _step(c: dict[str, Any]) -> list[str]:
    """CadQuery lines doing what one call does in the worker."""
    t, a = c["tool"], c["args"]
    n = repr(a.get("name"))
    if t == "cad_box":
        return [f"S[{n}] = cq.Workplane().box({a['length']!r}, {a['width']!r}, {a['height']!r}, "
                "centered=(True, True, False)).val()"]
    if t == "cad_cylinder":
        return [f"S[{n}] = cq.Workplane().circle({a['radius']!r}).extrude({a['height']!r}).val()"]
    if t == "cad_sketch_extrude":
        p = a["profile"]
        w = f"cq.Workplane('XY', origin=(0, 0, {a.get('at_z', 0.0)!r}))"
        shape = {
            "rect": lambda: f".rect({p['width']!r}, {p['height']!r})",
            "circle": lambda: f".circle({p['radius']!r})",
            "slot": lambda: f".slot2D({p['width']!r}, {p['height']!r})",
            "polygon": lambda: f".polyline({[tuple(q) for q in p['points']]!r}).close()",
        }[p["kind"]]()
        return [f"add({n}, {w}{shape}.extrude({a['distance']!r}).val())"]
    if t == "cad_revolve":
        pts = [tuple(q) for q in a["points"]]
        return [f"S[{n}] = cq.Workplane('XZ').polyline({pts!r}).close().revolve("
                f"{a.get('angle_deg', 360.0)!r}, (0, 0, 0), (0, 1, 0)).val()"]
    if t == "cad_hole":
        w = f"on_face({n}, {a.get('face', '>Z')!r}).pushPoints({[tuple(q) for q in a.get('positions', [[0, 0]])]!r})"
        if a.get("counterbore_diameter"):
            op = (f".cboreHole({a['diameter']!r}, {a['counterbore_diameter']!r}, "
                  f"{a['counterbore_depth']!r}, {a.get('depth')!r})")
        else:
            op = f".hole({a['diameter']!r}, {a.get('depth')!r})"
        return [f"S[{n}] = one({w}{op})"]
    if t == "cad_fillet":
        return [f"S[{n}] = one(wp(S[{n}]).edges({a['edges']!r}).fillet({a['radius']!r}))"]
    if t == "cad_chamfer":
        return [f"S[{n}] = one(wp(S[{n}]).edges({a['edges']!r}).chamfer({a['length']!r}))"]
    if t == "cad_shell":
        return [f"S[{n}] = fixed(one(wp(S[{n}]).faces({a['faces']!r}).shell(-{a['thickness']!r})))"]
    if t == "cad_sweep":
        return [f"sweep({n}, {a['path']!r}, {a.get('profile', 'circle')!r}, {a.get('radius')!r}, "
                f"{a.get('width')!r}, {a.get('height')!r}, {a.get('path_kind', 'polyline')!r})"]
    if t == "cad_loft":
        return [f"loft({n}, {a['sections']!r}, {a.get('ruled', False)!r})"]
    if t == "cad_text":
        return [f"text({n}, {a['text']!r}, {a['height']!r}, {a['depth']!r}, "
                f"{a.get('mode', 'engrave')!r}, {a.get('face', '>Z')!r}, "
                f"{tuple(a.get('position', (0, 0)))!r})"]
    if t == "cad_mirror":
        normal = {"XY": (0, 0, 1), "YZ": (1, 0, 0), "XZ": (0, 1, 0)}[a["plane"]]
        base = tuple(a.get("distance", 0.0) * v for v in normal)
        return [f"S[{n}] = S[{n}].fuse(S[{n}].mirror({a['plane']!r}, {base!r})).clean()"]
    if t == "transform":
        rot = tuple(a.get("rotation_deg") or (0, 0, 0))
        loc = tuple(a.get("location") or (0, 0, 0))
        return [f"M[{n}] = ({rot!r}, {loc!r})"]
    if t == "boolean":
        tg, ct = repr(a["target"]), repr(a["cutter"])
        op = {"union": "fuse", "difference": "cut", "intersect": "intersect"}[a["operation"]]
        return [f"S[{tg}] = world({tg}).{op}(world({ct})).clean()", f"M.pop({tg}, None)",
                f"del S[{ct}]", f"M.pop({ct}, None)"]
    if t in ("cad_pattern", "cad_query", "get_scene", "measure", "render"):
        return []
    raise ValueError(f"no reference for {t}")


def reference(plan: list[dict[str, Any]], name: str, skip: tuple[str, ...] = ()) -> str:
    """The script whose `result` is part `name` in world space after `plan` (without `skip` tools)."""
    lines = [line for c in plan if c["tool"] not in skip for line in _step(c)]
    return PRELUDE + "\n" + "\n".join(lines) + f"\nresult = world({name!r})\n"


def judged(plan: list[dict[str, Any]], names: list[str], holes: dict[str, list] | None = None,
           topology: bool = True) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Constraints and the geometry spec for the parts `names` that `plan` builds."""
    constraints: list[dict[str, Any]] = []
    parts = []
    for n in names:
        script = reference(plan, n)
        parts.append({"name": n, "script": script})
        constraints.append({"kind": "part", "object": n})
        constraints.append({"kind": "placed", "object": n, "script": script, "tol": 0.5})
        if topology:
            constraints.append({"kind": "topology", "object": n, "script": script})
        # holes of one diameter are counted together, whatever feature made them (an
        # enclosure lid's 3 mm clearance holes and its 3 mm vents are 4 + 5 = 9 holes of 3 mm)
        counts: dict[float, int] = {}
        for d, k in (holes or {}).get(n, []):
            counts[d] = counts.get(d, 0) + k
        for d, k in counts.items():
            constraints.append({"kind": "holes", "object": n, "diameter": d, "count": k,
                                "whole": True})  # a bend's round is no hole  # fmt: skip
    return constraints, {"kind": "parts", "parts": parts}


def finishing(plan: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    """Chamfers judged on their own (a 1 mm chamfer made 1.25 mm moves a part's IoU by less
    than 1e-3): each part's chamfered material against the reference's."""
    out = []
    for n in names:
        if any(c["tool"] == "cad_chamfer" and c["args"]["name"] == n for c in plan):
            out.append({"kind": "feature", "object": n, "script": reference(plan, n),
                        "base": reference(plan, n, skip=("cad_chamfer",)), "min_iou": 0.9})
    return out


def spec(prompt: str, plan, names, params, holes=None, topology=True, extra=(),
         geometry_min=PART_IOU_MIN) -> TaskSpec:
    constraints, geometry = judged(plan, names, holes, topology)
    constraints += finishing(plan, names)
    return TaskSpec(prompt=prompt, parameters=params, oracle=plan,
                    constraints=constraints + list(extra), geometry=geometry,
                    geometry_min=geometry_min)


def fmt(v: float) -> str:
    return f"{v:g}"


def pts_text(points) -> str:
    return ", ".join(f"({fmt(x)}, {fmt(y)})" for x, y in points) + " mm"


def distance_from(pool: list[float], at_least: float) -> float:
    """A spacing the plan's numbers already give (one, twice one or the difference of two) and
    at least `at_least`: a prompt states no length its tools do not take."""
    vals = {abs(float(p)) for p in pool}
    options = vals | {2 * v for v in vals} | {abs(u - v) for u in vals for v in vals}
    fit = sorted(v for v in options if v >= at_least)
    return fit[0] if fit else float(math.ceil(at_least))


def lead(rng: random.Random) -> str:
    return rng.choice(("Model", "Build", "Make", "Create"))


def join_parts(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
