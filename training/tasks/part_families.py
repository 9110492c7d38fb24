"""Part families (#31): turned parts, sweeps and lofts, enclosures, brackets, engraved text and
feature patterns (held out). Millimetres throughout; every oracle is a plan of cad_* calls.

The checker's reference for each part is built from the oracle plan itself: `reference()`
writes a CadQuery script that performs each call the way the worker's handler does (written
again here, not imported: tools/worker/cad.py runs under bpy) and places the part as the
scene does. A part is then judged by exact IoU against it (placement forgiven), the same
faces by surface type (every feature there), the same exact bounding box (placement not
forgiven), its hole counts and, for text, the text alone against the reference's text.
"""

from __future__ import annotations

import math
import random
from typing import Any

from training.tasks.base import TaskSpec, call, family
from training.tasks.config import CAD_WEIGHTS

PART_IOU_MIN = 0.999  # exact solids built the same way score 1 to ~1e-9
TEXT_FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"  # the worker's (tools/worker/cad.py)

# ---------------------------------------------------------------- the reference, from a plan

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


def numbers(plan: list[dict[str, Any]]) -> list[float]:
    """Every number in a plan's CAD arguments (millimetres)."""
    out: list[float] = []

    def walk(v: Any) -> None:
        if isinstance(v, bool):
            return
        if isinstance(v, (int, float)):
            out.append(float(v))
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for c in plan:
        if c["tool"].startswith("cad_"):
            walk({k: v for k, v in c["args"].items() if k != "text"})
    return out


def lead(rng: random.Random) -> str:
    return rng.choice(("Model", "Build", "Make", "Create"))


# ---------------------------------------------------------------- turned parts


def _profile(kind: str, rng: random.Random, name: str) -> dict[str, Any]:
    """A turned profile: [r, z] points, the words for it, and its plain cylindrical stretches."""
    if kind == "pin":
        rh, hh = rng.choice((7, 8, 9)), rng.choice((3, 4, 5))
        r, ln = rng.choice((3, 4, 5)), rng.choice((30, 40, 50))
        pts = [[0, 0], [rh, 0], [rh, hh], [r, hh], [r, hh + ln], [0, hh + ln]]
        words = (f"a pin '{name}': a head {2 * rh} mm across and {hh} mm tall, then a shank "
                 f"{2 * r} mm across up to Z={hh + ln} mm")
        runs = [(r, hh, hh + ln)]
    elif kind == "knob":
        rk, hk = rng.choice((15, 18, 20)), rng.choice((10, 12))
        rs, ls = rng.choice((5, 6)), rng.choice((12, 15))
        pts = [[0, 0], [rk, 0], [rk, hk], [rs, hk], [rs, hk + ls], [0, hk + ls]]
        words = (f"a knob '{name}': a disc {2 * rk} mm across and {hk} mm thick, then a stem "
                 f"{2 * rs} mm across up to Z={hk + ls} mm")
        runs = [(rk, 0, hk), (rs, hk, hk + ls)]
    elif kind == "bottle":
        r, h = rng.choice((20, 25, 30)), rng.choice((50, 60, 70))
        sh, rn, nh = rng.choice((10, 15)), rng.choice((8, 10)), rng.choice((12, 15))
        top = h + sh + nh
        pts = [[0, 0], [r, 0], [r, h], [rn, h + sh], [rn, top], [0, top]]
        words = (f"a solid bottle '{name}': a body {2 * r} mm across up to Z={h} mm, a conical "
                 f"shoulder up to Z={h + sh} mm and a neck {2 * rn} mm across up to Z={top} mm")
        runs = [(r, 0, h), (rn, h + sh, top)]
    else:  # stepped shaft
        r1 = rng.choice((12, 15, 18))
        r2, r3 = r1 - rng.choice((3, 4)), r1 - rng.choice((6, 7))
        l1, l2, l3 = rng.choice((15, 20)), rng.choice((20, 30, 40)), rng.choice((15, 25))
        z1, z2, z3 = l1, l1 + l2, l1 + l2 + l3
        pts = [[0, 0], [r1, 0], [r1, z1], [r2, z1], [r2, z2], [r3, z2], [r3, z3], [0, z3]]
        words = (f"a stepped shaft '{name}': {2 * r1} mm across up to Z={z1} mm, then {2 * r2} mm "
                 f"up to Z={z2} mm, then {2 * r3} mm up to Z={z3} mm")
        runs = [(r1, 0, z1), (r2, z1, z2), (r3, z2, z3)]
    return {"kind": kind, "points": pts, "words": words, "runs": runs,
            "rmax": max(p[0] for p in pts), "top": pts[-1][1]}


def _turned(level: int, rng: random.Random, name: str, kind: str | None = None):
    """(plan, words, holes) for one turned part of a level's features."""
    prof = _profile(kind or rng.choice(("pin", "knob", "bottle", "shaft")), rng, name)
    plan = [call("cad_revolve", name=name, points=prof["points"])]
    words = [f"{prof['words']}, turned about the Z axis from Z=0"]
    holes: list[tuple[float, int]] = []
    runs = sorted(prof["runs"], key=lambda r: r[2] - r[1], reverse=True)
    if level >= 3:
        r, z0, z1 = runs[0]
        g, dg = 2, rng.choice((1, 1.5))
        zg = z0 + (z1 - z0) // 2 - 1
        cutter = f"{name}_groove"
        plan += [
            call("cad_revolve", name=cutter, points=[[r - dg, zg], [r + 2, zg], [r + 2, zg + g],
                                                     [r - dg, zg + g]]),
            call("boolean", target=name, cutter=cutter, operation="difference"),
        ]
        words.append(f"a groove {g} mm wide from Z={zg} mm, cut down to {fmt(2 * (r - dg))} mm "
                     "across")
    if level >= 4:
        r, z0, z1 = runs[1] if len(runs) > 1 else runs[0]
        zc = z0 + (z1 - z0) // 2 + (6 if len(runs) == 1 else 0)
        dh = rng.choice((3, 4)) if r >= 5 else 2
        cutter = f"{name}_cross"
        plan += [
            call("cad_sweep", name=cutter, path=[[0, -(r + 2), zc], [0, r + 2, zc]], radius=dh / 2),
            call("boolean", target=name, cutter=cutter, operation="difference"),
        ]
        words.append(f"a {dh} mm cross hole along Y through the axis at Z={zc} mm")
        holes.append((dh, 1))
    if level >= 2:
        plan.append(call("cad_chamfer", name=name, edges=">Z", length=1))
        words.append("the top end's edge chamfered 1 mm")
    if level >= 4:
        plan.append(call("cad_chamfer", name=name, edges="<Z", length=1))
        words.append("the bottom edge chamfered 1 mm")
    return plan, words, holes, prof


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


@family(
    "turned_parts",
    "Turn parts by revolving a profile: pins, knobs, stepped shafts, bottles; then grooves, "
    "cross holes, chamfers and several parts.",
    levels=(1, 2, 3, 4, 5),
    domain="parts",
    weights=CAD_WEIGHTS,
)
def turned_parts(level: int, rng: random.Random) -> TaskSpec:
    if level < 5:
        name = rng.choice(("Pin", "Knob", "Shaft", "Spindle", "Part"))
        plan, words, holes, prof = _turned(level, rng, name)
        prompt = f"{lead(rng)} {_join(words)}."
        return spec(prompt, plan, [name], {"part": prof["kind"], "level": level},
                    holes={name: holes})
    kinds = rng.sample(("pin", "knob", "bottle", "shaft"), 2)
    a, b = "Part_A", "Part_B"
    plan_a, words_a, holes_a, prof_a = _turned(4, rng, a, kinds[0])
    plan_b, words_b, holes_b, prof_b = _turned(4, rng, b, kinds[1])
    pool = [v for p in prof_a["points"] + prof_b["points"] for v in p]
    dx = distance_from(pool, prof_a["rmax"] + prof_b["rmax"] + 10)
    plan = plan_a + plan_b + [call("transform", name=b, location=[dx / 1000, 0.0, 0.0])]
    prompt = (f"Turn two parts (mm). First {_join(words_a)}. Second {_join(words_b)}. Then move "
              f"'{b}' so its axis is at X={fmt(dx)} mm, Y=0.")
    return spec(prompt, plan, [a, b], {"parts": kinds, "level": level},
                holes={a: holes_a, b: holes_b})


# ---------------------------------------------------------------- sweeps and lofts


def _pipe_bend(rng: random.Random, name: str):
    r = rng.choice((4, 5, 6))
    h, dx = rng.choice((30, 40, 50)), rng.choice((30, 40))
    path = [[0, 0, 0], [0, 0, h], [dx, 0, h]]
    words = (f"a bent rod '{name}': a {2 * r} mm circle swept along the path (0, 0, 0), "
             f"(0, 0, {h}), ({dx}, 0, {h}) mm (the bend rounded by the sweep)")
    return [call("cad_sweep", name=name, path=path, radius=r)], words


def _handle(rng: random.Random, name: str, x0: float = 0):
    r, span, reach = rng.choice((4, 5)), rng.choice((40, 50)), rng.choice((20, 25))
    z0 = rng.choice((10, 15))
    path = [[x0, 0, z0], [x0 + reach, 0, z0 + span // 2], [x0, 0, z0 + span]]
    words = (f"a handle '{name}': a {2 * r} mm circle swept along the arc through "
             f"({x0}, 0, {z0}), ({x0 + reach}, 0, {z0 + span // 2}) and ({x0}, 0, {z0 + span}) mm")
    return [call("cad_sweep", name=name, path=path, radius=r, path_kind="arc")], words


def _transition(rng: random.Random, name: str):
    w, d = rng.choice((50, 60, 70)), rng.choice((30, 40))
    r, h = rng.choice((12, 15, 18)), rng.choice((40, 50, 60))
    sections = [{"kind": "rect", "z": 0, "width": w, "height": d},
                {"kind": "circle", "z": h, "radius": r}]
    words = (f"a duct transition '{name}': a loft from a {w} x {d} mm rectangle at Z=0 to a "
             f"circle {2 * r} mm across at Z={h} mm, both centred on the Z axis")
    return [call("cad_loft", name=name, sections=sections)], words


def _mug(rng: random.Random, name: str, hollow: bool):
    r, h, t = rng.choice((30, 35, 40)), rng.choice((70, 80, 90)), rng.choice((3, 4))
    rh, z0, reach = rng.choice((4, 5)), rng.choice((15, 20)), rng.choice((20, 25))
    span = h - 2 * z0
    x0 = r - 1
    path = [[x0, 0, z0], [x0 + reach, 0, z0 + span // 2], [x0, 0, z0 + span]]
    plan = [call("cad_cylinder", name=name, radius=r, height=h)]
    words = f"a mug '{name}': a cylinder {2 * r} mm across and {h} mm tall standing on Z=0"
    if hollow:
        plan.append(call("cad_shell", name=name, faces=">Z", thickness=t))
        words += f", open at the top with walls and floor {t} mm thick"
    plan.append(call("cad_sweep", name=name, path=path, radius=rh, path_kind="arc"))
    words += (f", and a handle joined to it: a {2 * rh} mm circle swept along the arc through "
              f"({x0}, 0, {z0}), ({x0 + reach}, 0, {z0 + span // 2}) and ({x0}, 0, {z0 + span}) mm")
    return plan, words


def _jog(rng: random.Random):
    ro = rng.choice((8, 10, 12))
    ri = ro - rng.choice((2, 3))
    h1, dx, h2 = rng.choice((30, 40)), rng.choice((40, 50, 60)), rng.choice((30, 40))
    return ro, ri, h1, dx, h2


def _hollow_pipe(rng: random.Random, name: str):
    ro, ri, h1, dx, h2 = _jog(rng)
    path = [[0, 0, 0], [0, 0, h1], [dx, 0, h1], [dx, 0, h1 + h2]]
    bore_path = [[0, 0, -1], [0, 0, h1], [dx, 0, h1], [dx, 0, h1 + h2 + 1]]
    bore = f"{name}_bore"
    plan = [
        call("cad_sweep", name=name, path=path, radius=ro),
        call("cad_sweep", name=bore, path=bore_path, radius=ri),
        call("boolean", target=name, cutter=bore, operation="difference"),
    ]
    words = (f"a hollow pipe '{name}' {2 * ro} mm outside and {2 * ri} mm inside, its centreline "
             f"through (0, 0, 0), (0, 0, {h1}), ({dx}, 0, {h1}), ({dx}, 0, {h1 + h2}) mm, open at "
             "both ends")
    return plan, words


def _flanged_pipe(rng: random.Random, name: str, bolt_holes: bool):
    ro, ri, h1, dx, h2 = _jog(rng)
    rf, tf = ro + rng.choice((10, 12)), rng.choice((5, 6))
    top = h1 + h2
    path = [[0, 0, 0], [0, 0, h1], [dx, 0, h1], [dx, 0, top]]
    bore_path = [[0, 0, -1], [0, 0, h1], [dx, 0, h1], [dx, 0, top + 1]]
    bore = f"{name}_bore"
    plan = [
        call("cad_sweep", name=name, path=path, radius=ro),
        call("cad_sketch_extrude", name=name, profile={"kind": "circle", "radius": rf},
             distance=tf),
        call("cad_sweep", name=name, path=[[dx, 0, top - tf], [dx, 0, top]], radius=rf),
        call("cad_sweep", name=bore, path=bore_path, radius=ri),
        call("boolean", target=name, cutter=bore, operation="difference"),
    ]
    words = (f"a flanged pipe '{name}' {2 * ro} mm outside and {2 * ri} mm inside, its centreline "
             f"through (0, 0, 0), (0, 0, {h1}), ({dx}, 0, {h1}), ({dx}, 0, {top}) mm, with a "
             f"round flange {2 * rf} mm across and {tf} mm thick at each end (flush with the "
             "pipe's ends), the bore running through both")
    info = {"dx": dx, "top": top, "rf": rf, "tf": tf, "ro": ro, "ri": ri}
    if bolt_holes:
        rb, dh, n = ro + (rf - ro) // 2 + 1, rng.choice((4, 5)), 4
        ring = [[rb, 0], [0, rb], [-rb, 0], [0, -rb]]
        plan += [
            call("cad_pattern", kind="circle", count=n, radius=rb),
            call("cad_hole", name=name, diameter=dh, positions=ring, face="<Z", depth=tf),
            call("cad_pattern", kind="circle", count=n, radius=rb),
            call("cad_hole", name=name, diameter=dh, positions=[[dx + x, y] for x, y in ring],
                 face=">Z", depth=tf),
        ]
        words += (f"; each flange has {n} bolt holes {dh} mm across on a {2 * rb} mm circle "
                  "around the pipe's axis, the first towards +X")
        info.update(rb=rb, dh=dh, n=n, ring=ring)
    return plan, words, info


@family(
    "sweeps_lofts",
    "Sweep profiles along paths and loft between sections: rods, handles, mugs, duct "
    "transitions, hollow and flanged pipes, a reducer.",
    levels=(1, 2, 3, 4, 5),
    domain="parts",
    weights=CAD_WEIGHTS,
)
def sweeps_lofts(level: int, rng: random.Random) -> TaskSpec:
    name = rng.choice(("Pipe", "Duct", "Run"))
    holes: dict[str, list] = {}
    if level == 1:
        plan, words = rng.choice((_pipe_bend, _handle, _transition))(rng, name)
    elif level == 2:
        name = rng.choice(("Mug", "Cup"))
        plan, words = _mug(rng, name, hollow=False)
    elif level == 3:
        if rng.random() < 0.5:
            name = rng.choice(("Mug", "Cup"))
            plan, words = _mug(rng, name, hollow=True)
        else:
            plan, words = _hollow_pipe(rng, name)
    elif level == 4:
        plan, words, _ = _flanged_pipe(rng, name, bolt_holes=False)
    else:
        plan, words, p = _flanged_pipe(rng, name, bolt_holes=True)
        red = "Reducer"
        hr, r2 = rng.choice((20, 25, 30)), p["ri"] - 1 + rng.choice((3, 4))
        z0, dx = p["top"], p["dx"]
        ri2 = r2 - 3
        plan += [
            call("cad_loft", name=red, sections=[
                {"kind": "circle", "z": z0, "radius": p["ro"], "x": dx},
                {"kind": "circle", "z": z0 + hr, "radius": r2, "x": dx}]),
            call("cad_sweep", name=red, path=[[dx, 0, z0], [dx, 0, z0 + p["tf"]]], radius=p["rf"]),
            call("cad_sweep", name=f"{red}_bore", path=[[dx, 0, z0 - 1], [dx, 0, z0 + hr + 1]],
                 radius=ri2),
            call("boolean", target=red, cutter=f"{red}_bore", operation="difference"),
            call("cad_hole", name=red, diameter=p["dh"], face="<Z", depth=p["tf"],
                 positions=[[dx + x, -y] for x, y in p["ring"]]),
            call("cad_chamfer", name=red, edges=">Z", length=0.5),
        ]
        words += (f". On the top flange stands a second part '{red}': a matching flange (the "
                  f"same size, bolt holes lined up with the pipe's) under a loft from "
                  f"{2 * p['ro']} mm across at Z={z0} mm to {2 * r2} mm across at Z={z0 + hr} mm, "
                  f"bored {2 * ri2} mm right through, its top edges chamfered 0.5 mm")
        holes = {name: [(p["dh"], 2 * p["n"])], red: [(p["dh"], p["n"])]}
        prompt = f"{lead(rng)} {words}."
        return spec(prompt, plan, [name, red], {"level": level}, holes=holes)
    prompt = f"{lead(rng)} {words}."
    return spec(prompt, plan, [name], {"level": level}, holes=holes)


# ---------------------------------------------------------------- enclosures


@family(
    "enclosures",
    "Shelled enclosures: boxes with walls, filleted corners, lids, screw bosses, screw holes "
    "and vents.",
    levels=(1, 2, 3, 4, 5),
    domain="parts",
    weights=CAD_WEIGHTS,
)
def enclosures(level: int, rng: random.Random) -> TaskSpec:
    case, lid = rng.choice((("Case", "Lid"), ("Housing", "Cover"), ("Enclosure", "Lid")))
    ln, wd, ht = rng.choice((80, 90, 100, 120)), rng.choice((50, 60, 70)), rng.choice((30, 35, 40))
    t = rng.choice((2, 3))
    rf = rng.choice((6, 8))
    tl = rng.choice((3, 4))
    filleted = level in (2, 3, 5)
    plan = [call("cad_box", name=case, length=ln, width=wd, height=ht)]
    words = [f"an enclosure '{case}' {ln} x {wd} x {ht} mm outside (centred in XY, bottom on Z=0)"]
    if filleted:
        plan.append(call("cad_fillet", name=case, edges="|Z", radius=rf))
        words.append(f"its vertical corners rounded r={rf} mm")
    plan.append(call("cad_shell", name=case, faces=">Z", thickness=t))
    words.append(f"open at the top with {t} mm walls and floor")
    names, holes = [case], {}
    if level >= 4:
        n = 2 if level == 4 else 4
        rb, hb, ds = rng.choice((4, 5)), rng.choice((10, 12, 15)), rng.choice((2.5, 3))
        bx, by = ln / 2 - t - rb - 3, wd / 2 - t - rb - 3
        spots = [[-bx, -by], [bx, by]] if n == 2 else [[-bx, -by], [bx, -by], [-bx, by], [bx, by]]
        for i, (x, y) in enumerate(spots, 1):
            boss = f"Boss{i}"
            plan += [
                call("cad_cylinder", name=boss, radius=rb, height=t + hb),
                call("transform", name=boss, location=[x / 1000, y / 1000, 0.0]),
                call("boolean", target=case, cutter=boss, operation="union"),
            ]
        if n == 4:
            plan.append(call("cad_pattern", kind="grid", count_x=2, count_y=2, spacing_x=2 * bx,
                             spacing_y=2 * by))
        plan.append(call("cad_hole", name=case, diameter=ds, positions=spots))
        words.append(f"{n} screw bosses {2 * rb} mm across rising from the floor to "
                     f"Z={t + hb} mm at {pts_text(spots)}, each with a {fmt(ds)} mm screw hole "
                     "through the boss and the floor")
        holes[case] = [(ds, n)]
    if level >= 3:
        names.append(lid)
        plan.append(call("cad_sketch_extrude", name=lid, profile={"kind": "rect", "width": ln,
                                                                   "height": wd},
                         distance=tl, at_z=ht))
        lw = f"a separate lid '{lid}' {ln} x {wd} x {tl} mm lying on the rim (from Z={ht} mm)"
        if filleted:
            plan.append(call("cad_fillet", name=lid, edges="|Z", radius=rf))
            lw += " with the same rounded corners"
        if level >= 4:
            dl = ds + 0.5
            plan.append(call("cad_hole", name=lid, diameter=dl, positions=spots))
            lw += f", with {fmt(dl)} mm clearance holes over the bosses"
            holes[lid] = [(dl, n)]
        if level == 5:
            nv, dv, sv = rng.choice((5, 6, 7)), 3, 6
            vents = [[round((i - (nv - 1) / 2) * sv, 3), 0.0] for i in range(nv)]
            plan += [
                call("cad_pattern", kind="grid", count_x=nv, count_y=1, spacing_x=sv),
                call("cad_hole", name=lid, diameter=dv, positions=vents),
            ]
            lw += (f", and a row of {nv} vent holes {dv} mm across along X through its middle, "
                   f"{sv} mm apart")
            holes[lid].append((dv, nv))
        words.append(lw)
    prompt = f"{lead(rng)} {_join(words)}."
    return spec(prompt, plan, names, {"level": level, "size": [ln, wd, ht]}, holes=holes)


# ---------------------------------------------------------------- brackets

INNER = "|Z and not (<X or >X or <Y or >Y)"  # bends' inside edges: at no extreme of the profile
OUTER = {
    "L": "|Z and <X and <Y",
    "U": "|Z and <Y",
    "Z": "|Z and ((<Y and not <X) or (>Y and not >X))",
}


def _bracket(kind: str, level: int, rng: random.Random, name: str):
    a, h = rng.choice((40, 50, 60)), rng.choice((30, 40, 50))
    t, w = rng.choice((3, 4, 5)), rng.choice((24, 32, 40))
    ri = rng.choice((2, 3))
    dh = rng.choice((4, 5, 6))
    zc = w // 2
    if kind == "L":
        profile = [[0, 0], [a, 0], [a, t], [t, t], [t, h], [0, h]]
        shape = (f"an L-bracket '{name}': a base flange {a} mm long along +X and an upright "
                 f"{h} mm tall along +Y")
        base_holes = [[(t + a) // 2, zc - w // 4], [(t + a) // 2, zc + w // 4]]
        side = ("<X", [[-((t + h) // 2), zc]], "in the upright", [(0, (t + h) // 2, zc)])
        gussets = [[[t, t], [t + 12, t], [t, t + 12]]]
    elif kind == "U":
        profile = [[0, 0], [a, 0], [a, h], [a - t, h], [a - t, t], [t, t], [t, h], [0, h]]
        shape = (f"a U-channel '{name}': a base {a} mm wide along +X with two walls {h} mm tall "
                 "along +Y")
        base_holes = [[a // 2, zc - w // 4], [a // 2, zc + w // 4]]
        side = ("<X", [[-((t + h) // 2), zc]], "through both walls", [(0, (t + h) // 2, zc)])
        gussets = [[[t, t], [t + 10, t], [t, t + 10]], [[a - t, t], [a - t - 10, t], [a - t, t + 10]]]
    else:
        profile = [[-a, 0], [t, 0], [t, h - t], [a, h - t], [a, h], [0, h], [0, t], [-a, t]]
        shape = (f"a Z-bracket '{name}': a lower flange reaching {a} mm along -X, a web {h} mm "
                 f"tall along +Y and an upper flange reaching {a} mm along +X")
        base_holes = [[-(a // 2), zc - w // 4], [-(a // 2), zc + w // 4]]
        side = (">Y", [[-((t + a) // 2), zc]], "in the upper flange", [((t + a) // 2, h, zc)])
        gussets = [[[0, t], [-10, t], [0, t + 10]], [[t, h - t], [t + 10, h - t], [t, h - t - 10]]]
    plan = [call("cad_sketch_extrude", name=name, profile={"kind": "polygon", "points": profile},
                 distance=w)]
    words = [f"{shape}, sheet {t} mm thick, drawn as a profile in the XY plane from the "
             f"points {pts_text([tuple(p) for p in profile])} and extruded {w} mm along +Z "
             "from Z=0"]
    holes: list[tuple[float, int]] = []
    if level >= 2:
        plan.append(call("cad_fillet", name=name, edges=INNER, radius=ri))
        words.append(f"the inside of each bend rounded r={ri} mm")
    if level >= 3:
        plan.append(call("cad_fillet", name=name, edges=OUTER[kind], radius=ri + t))
        plan.append(call("cad_hole", name=name, diameter=dh, positions=base_holes, face="<Y"))
        bw = ", ".join(f"(X={fmt(x)}, Z={fmt(z)})" for x, z in base_holes)
        words.append(f"the outside of each bend rounded r={ri + t} mm and two {dh} mm holes "
                     f"through the {'lower flange' if kind == 'Z' else 'base'} at {bw} mm")
        holes.append((dh, 2))
    if level >= 4:
        face, pos, where, ((sx, sy, sz),) = side
        plan.append(call("cad_hole", name=name, diameter=dh, positions=pos, face=face))
        at = f"X={fmt(sx)}, Z={fmt(sz)}" if kind == "Z" else f"Y={fmt(sy)}, Z={fmt(sz)}"
        words.append(f"a {dh} mm hole {where} centred at ({at}) mm")
        holes[-1] = (dh, 3)
        tg = 4
        for tri in gussets:
            plan.append(call("cad_sketch_extrude", name=name,
                             profile={"kind": "polygon", "points": tri}, distance=tg,
                             at_z=zc - tg // 2))
        tris = " and ".join(pts_text([tuple(p) for p in tri]) for tri in gussets)
        gw = "a triangular gusset" if len(gussets) == 1 else f"{len(gussets)} triangular gussets"
        words.append(f"{gw} {tg} mm thick from Z={zc - tg // 2} mm, with corners at {tris}")
    return plan, words, holes, {"a": a, "h": h, "w": w}


@family(
    "brackets",
    "Sheet-metal-like L, U and Z brackets: a profile of a thickness, bends rounded as fillets, "
    "holes through flanges, gussets, several brackets.",
    levels=(1, 2, 3, 4, 5),
    domain="parts",
    weights=CAD_WEIGHTS,
)
def brackets(level: int, rng: random.Random) -> TaskSpec:
    if level < 5:
        kind = rng.choice(("L", "U", "Z"))
        name = rng.choice(("Bracket", "Angle", "Clip"))
        plan, words, holes, _ = _bracket(kind, level, rng, name)
        prompt = f"{lead(rng)} {_join(words)}."
        return spec(prompt, plan, [name], {"bracket": kind, "level": level}, holes={name: holes})
    kinds = rng.sample(("L", "U", "Z"), 3)
    plan, texts, holes, names, end = [], [], {}, [], 0.0
    for i, kind in enumerate(kinds, 1):
        name = f"Bracket{i}"
        p, words, h, size = _bracket(kind, 4, rng, name)
        plan += p
        holes[name] = h
        names.append(name)
        text = _join(words)
        shift = 0.0
        if i > 1:
            shift = distance_from(numbers(plan), end + 10)
            plan.append(call("transform", name=name, location=[0.0, 0.0, shift / 1000]))
            text += f"; then move it along Z so that it starts at Z={fmt(shift)} mm"
        end = shift + size["w"]
        texts.append(f"({i}) {text}")
    prompt = "Make three brackets, in millimetres. " + ". ".join(texts) + "."
    return spec(prompt, plan, names, {"brackets": kinds, "level": level}, holes=holes)


# ---------------------------------------------------------------- engraved text

WORDS = ("PUMP", "FAN", "VALVE", "IN", "OUT", "A-12", "12V", "MAIN", "AUX", "TEST", "OK", "B7",
         "LINE", "GND", "ZONE 3", "NO 5")
LABELS = ("VOL", "GAIN", "BASS", "MID", "HI", "LO", "PAN", "FX", "MIX", "TONE", "AMP", "REV")


def _text_task(plan, names, main, prompt, params):
    base = reference(plan, main, skip=("cad_text",))
    feature = {"kind": "feature", "object": main, "script": reference(plan, main), "base": base,
               "min_iou": 0.9}
    return spec(prompt, plan, names, params, topology=False, extra=[feature], geometry_min=0.99)


@family(
    "engraved_text",
    "Engrave or emboss text on plates, tags and panels (with corner rounds, holes and labels).",
    levels=(1, 2, 3, 4, 5),
    domain="parts",
    weights=CAD_WEIGHTS,
)
def engraved_text(level: int, rng: random.Random) -> TaskSpec:
    name = rng.choice(("Tag", "Plate", "Sign", "Label"))
    mode = rng.choice(("engrave", "emboss"))
    verb = {"engrave": "engraved", "emboss": "embossed"}[mode]
    if level == 5:
        return _panel(rng, name.replace("Tag", "Panel").replace("Label", "Panel"))
    word = rng.choice(WORDS)
    th = rng.choice((6, 8, 10))
    ln = max(rng.choice((50, 60, 70, 80)), int(0.8 * th * len(word)) // 10 * 10 + 30)
    wd, t = rng.choice((20, 25, 30)), rng.choice((3, 4, 5))
    depth = rng.choice((0.5, 1))
    plan = [call("cad_box", name=name, length=ln, width=wd, height=t)]
    words = [f"a {ln} x {wd} x {t} mm plate '{name}' (centred in XY, bottom on Z=0)"]
    x = 0
    if level >= 2:
        rf = rng.choice((3, 4, 5))
        plan.append(call("cad_fillet", name=name, edges="|Z", radius=rf))
        words.append(f"its corners rounded r={rf} mm")
    if level >= 4:
        plan.append(call("cad_chamfer", name=name, edges=">Z", length=0.5))
        words.append("its top edges chamfered 0.5 mm")
    if level >= 3:
        dh = rng.choice((4, 5))
        hx = -(ln // 2 - 6)
        plan.append(call("cad_hole", name=name, diameter=dh, positions=[[hx, 0]]))
        words.append(f"a {dh} mm hole at ({hx}, 0) mm to hang it by")
        x = 4
    y = 0
    if level >= 4:
        th = min(th, wd // 4 + 1)
        y = round(wd / 4, 1)
    first = "engrave" if level >= 4 else mode  # raised letters would be the top face after
    plan.append(call("cad_text", name=name, text=word, height=th, depth=depth, mode=first,
                     position=[x, y]))
    words.append(f"the text '{word}' {verb if first == mode else 'engraved'} {fmt(depth)} mm on "
                 f"the top face, letters {th} mm tall, centred at ({x}, {fmt(y)}) mm")
    if level >= 4:
        word2 = rng.choice([w for w in WORDS if w != word])
        plan.append(call("cad_text", name=name, text=word2, height=th, depth=depth, mode=mode,
                         position=[x, -y]))
        words.append(f"then a second line '{word2}' {verb} the same depth, as tall, centred at "
                     f"({x}, {fmt(-y)}) mm")
    prompt = f"{lead(rng)} {_join(words)}."
    return _text_task(plan, [name], name, prompt, {"level": level, "mode": mode,
                                                   "size": [ln, wd, t]})


def _panel(rng: random.Random, name: str) -> TaskSpec:
    n = rng.choice((7, 8))
    sp = 22
    ln, wd, t = n * sp + 20, 50, rng.choice((4, 5))
    rf, dk, dm = rng.choice((4, 5)), rng.choice((6, 7)), 3.5
    labels = rng.sample(LABELS, n)
    knobs = [[round((i - (n - 1) / 2) * sp, 3), 6.0] for i in range(n)]
    mx, my = ln / 2 - 6, wd / 2 - 6
    corners = [[-mx, -my], [mx, -my], [-mx, my], [mx, my]]
    title = rng.choice(("MIXER", "CONTROL", "DRIVE", "SYNTH"))
    plan = [
        call("cad_box", name=name, length=ln, width=wd, height=t),
        call("cad_fillet", name=name, edges="|Z", radius=rf),
        call("cad_chamfer", name=name, edges=">Z", length=0.5),
        call("cad_pattern", kind="grid", count_x=2, count_y=2, spacing_x=2 * mx, spacing_y=2 * my),
        call("cad_hole", name=name, diameter=dm, positions=corners),
        call("cad_pattern", kind="grid", count_x=n, count_y=1, spacing_x=sp),
        call("cad_hole", name=name, diameter=dk, positions=knobs),
    ]
    for (x, _), label in zip(knobs, labels, strict=True):
        plan.append(call("cad_text", name=name, text=label, height=4, depth=0.5,
                         position=[x, -8]))
    plan.append(call("cad_text", name=name, text=title, height=6, depth=0.5, mode="emboss",
                     position=[0, 17]))
    prompt = (
        f"Make a control panel '{name}' {ln} x {wd} x {t} mm (centred in XY, bottom on Z=0) with "
        f"its corners rounded r={rf} mm and its top edges chamfered 0.5 mm, four {dm} mm mounting "
        f"holes at (±{fmt(mx)}, ±{fmt(my)}) mm, a row of {n} knob holes {dk} mm across at "
        f"Y=6 mm, {sp} mm apart and centred on X=0, under each knob hole its label engraved "
        f"0.5 mm deep with letters 4 mm tall centred at Y=-8 mm ({', '.join(labels)} from -X "
        f"to +X), and last the title '{title}' embossed 0.5 mm, 6 mm tall, centred at (0, 17) mm."
    )
    return _text_task(plan, [name], name, prompt, {"level": 5, "labels": labels,
                                                   "size": [ln, wd, t]})


# ---------------------------------------------------------------- feature patterns (held out)


def _bolt_circle(rb: float, n: int, start: float = 0.0) -> list[list[float]]:
    return [[round(rb * math.cos(math.radians(start + 360 * k / n)), 9),
             round(rb * math.sin(math.radians(start + 360 * k / n)), 9)] for k in range(n)]


def _grid(nx: int, ny: int, sx: float, sy: float) -> list[list[float]]:
    return [[round((i - (nx - 1) / 2) * sx, 9), round((j - (ny - 1) / 2) * sy, 9)]
            for j in range(ny) for i in range(nx)]


def _flange(rng: random.Random, name: str, hub: bool, rb: float | None = None):
    r, t = rng.choice((30, 35, 40)), rng.choice((8, 10))
    bore, n, db = rng.choice((12, 16, 20)), rng.choice((4, 6, 8)), rng.choice((5, 6))
    rh, hh = bore // 2 + rng.choice((6, 8)), rng.choice((8, 10))
    rb = rb or (r + (rh if hub else bore // 2)) // 2 + 1
    plan = [call("cad_cylinder", name=name, radius=r, height=t)]
    words = [f"a round flange '{name}' {2 * r} mm across and {t} mm thick (on the Z axis, "
             "bottom on Z=0)"]
    if hub:
        plan.append(call("cad_sketch_extrude", name=name, profile={"kind": "circle", "radius": rh},
                         distance=hh, at_z=t))
        words.append(f"a hub {2 * rh} mm across rising {hh} mm from its top")
        plan.append(call("cad_chamfer", name=name, edges=">Z", length=1))
        plan.append(call("cad_chamfer", name=name, edges="<Z", length=1))
        words.append("the hub's top edge and the flange's bottom edge chamfered 1 mm")
    plan.append(call("cad_hole", name=name, diameter=bore))
    pts = _bolt_circle(rb, n)
    plan += [call("cad_pattern", kind="circle", count=n, radius=rb),
             call("cad_hole", name=name, diameter=db, positions=pts)]
    words.append(f"a {bore} mm centre bore and {n} holes {db} mm across on a {fmt(2 * rb)} mm "
                 "bolt circle, the first on +X")
    return plan, words, {name: [(bore, 1), (db, n)]}, {"t": t, "rb": rb, "n": n, "db": db}


def _plate(rng: random.Random, name: str, level: int):
    ln, wd, t = rng.choice((80, 100, 120)), rng.choice((60, 70, 80)), rng.choice((6, 8, 10))
    rf, d = rng.choice((6, 8)), rng.choice((4, 5))
    nx, ny = rng.choice(((3, 2), (4, 2), (3, 3), (4, 3)))
    sx, sy = (ln - 30) // (nx - 1), (wd - 30) // (ny - 1)
    pts = _grid(nx, ny, sx, sy)
    plan = [call("cad_box", name=name, length=ln, width=wd, height=t)]
    words = [f"a plate '{name}' {ln} x {wd} x {t} mm (centred in XY, bottom on Z=0)"]
    if level >= 3:
        plan += [call("cad_fillet", name=name, edges="|Z", radius=rf),
                 call("cad_chamfer", name=name, edges=">Z", length=1)]
        words.append(f"its vertical corners filleted r={rf} mm and its top edges chamfered 1 mm")
    plan += [call("cad_pattern", kind="grid", count_x=nx, count_y=ny, spacing_x=sx, spacing_y=sy),
             call("cad_hole", name=name, diameter=d, positions=pts)]
    words.append(f"a {nx} x {ny} grid of {d} mm through holes, {sx} mm apart along X and {sy} mm "
                 "along Y, centred on the origin")
    return plan, words, {name: [(d, nx * ny)]}


@family(
    "feature_patterns",
    "Hole grids and bolt circles on plates and flanges, with filleted corners and chamfered "
    "edges, and a flange matched to a plate.",
    levels=(1, 2, 3, 4, 5),
    domain="parts",
    held_out=True,
    weights=CAD_WEIGHTS,
)
def feature_patterns(level: int, rng: random.Random) -> TaskSpec:
    if level in (1, 3):
        name = rng.choice(("Plate", "Panel", "Base"))
        plan, words, holes = _plate(rng, name, level)
        return spec(f"{lead(rng)} {_join(words)}.", plan, [name], {"level": level}, holes=holes)
    if level in (2, 4):
        name = rng.choice(("Flange", "Hub", "Disc"))
        plan, words, holes, _ = _flange(rng, name, hub=level == 4)
        return spec(f"{lead(rng)} {_join(words)}.", plan, [name], {"level": level}, holes=holes)
    plate, fl = "Plate", "Flange"
    ln, wd, t = rng.choice((120, 140)), rng.choice((90, 100)), rng.choice((8, 10))
    rf, dc, cb, cbd = rng.choice((8, 10)), 5, 22, 3
    bore = 16
    sx, sy = ln - 20, wd - 20
    corners = _grid(2, 2, sx, sy)
    nside, ds, ss = rng.choice((3, 4)), 3, 8
    side = [[x + sgn * (ln // 2 - 10), y] for sgn in (-1, 1) for x, y in _grid(1, nside, 1, ss)]
    fplan, fwords, fholes, f = _flange(rng, fl, hub=False, rb=rng.choice((24, 26)))
    rb, n, db = f["rb"], f["n"], f["db"]
    plan = [
        call("cad_box", name=plate, length=ln, width=wd, height=t),
        call("cad_fillet", name=plate, edges="|Z", radius=rf),
        call("cad_chamfer", name=plate, edges=">Z", length=1),
        call("cad_pattern", kind="grid", count_x=2, count_y=2, spacing_x=sx, spacing_y=sy),
        call("cad_hole", name=plate, diameter=dc, positions=corners),
        call("cad_hole", name=plate, diameter=bore, positions=[[0, 0]], counterbore_diameter=cb,
             counterbore_depth=cbd),
        call("cad_pattern", kind="circle", count=n, radius=rb),
        call("cad_hole", name=plate, diameter=db, positions=_bolt_circle(rb, n)),
        call("cad_pattern", kind="grid", count_x=1, count_y=nside, spacing_y=ss),
        call("cad_hole", name=plate, diameter=ds, positions=side),
    ]
    plan += fplan + [call("transform", name=fl, location=[0.0, 0.0, t / 1000])]
    prompt = (
        f"Make two parts in millimetres. A plate '{plate}' {ln} x {wd} x {t} mm (centred in XY, "
        f"bottom on Z=0) with its vertical corners filleted r={rf} mm and its top edges chamfered "
        f"1 mm, then four {dc} mm holes at (±{fmt(sx / 2)}, ±{fmt(sy / 2)}) mm, a {bore} mm "
        f"centre hole counterbored {cb} mm across and {cbd} mm deep, {n} holes {db} mm across on "
        f"a {fmt(2 * rb)} mm bolt circle (the first on +X), and at each end a column of "
        f"{ds} mm holes ({nside} of them) {ss} mm apart, one at X=-{fmt(ln // 2 - 10)} mm and one at X={fmt(ln // 2 - 10)} mm, "
        "centred on Y=0. And "
        f"{_join(fwords)}, with its bolt holes matching the plate's; then move '{fl}' up to "
        f"sit on the plate (its bottom at Z={t} mm) with the holes lined up."
    )
    holes = {plate: [(dc, 4), (db, n), (ds, 2 * nside)], **fholes}
    return spec(prompt, plan, [plate, fl], {"level": 5}, holes=holes)
