"""Dimensioned CAD parts: each as a reference CadQuery script, a text spec and a tool plan.

Every part is generated from a seeded `random.Random`; units are millimetres. The reference
script (`result = ...`) is what the checker builds in-process and what `cadquery_script`
oracles run; structured plans use the runtime's cad_* tools and are written to produce the
same solid (the tests prove oracle IoU = 1). Volumes are analytic, as a second check.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from training.tasks.spec import call

FACE_WP = 'workplane(centerOption="ProjectedOrigin", origin=(0, 0, 0))'


@dataclass
class Part:
    name: str
    kind: str
    text: str  # the dimensioned description given in prompts
    script: str
    size: list[float]  # bounding box x, y, z
    volume: float | None
    holes: list[tuple[float, int]] = field(default_factory=list)  # (diameter, count)
    plan: list[dict[str, Any]] | None = None  # structured-tool oracle, when one exists
    params: dict[str, Any] = field(default_factory=dict)  # dimensions other parts build on

    def script_plan(self) -> list[dict[str, Any]]:
        return [call("cadquery_script", name=self.name, code=self.script)]

    def constraints(self, with_volume: bool = True) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [
            {
                "kind": "part",
                "object": self.name,
                "size": self.size,
                "volume": round(self.volume, 4) if with_volume and self.volume else None,
                "tol_rel": 0.01,
            }
        ]
        out += [
            {"kind": "holes", "object": self.name, "diameter": d, "count": n} for d, n in self.holes
        ]
        return out


def _pts(points) -> str:
    return "[" + ", ".join(f"({x:g}, {y:g})" for x, y in points) + "]"


def plate(rng: random.Random, name: str = "Plate") -> Part:
    length, width = rng.choice((60, 80, 100, 120)), rng.choice((40, 50, 60))
    t, d = rng.choice((4, 5, 6, 8)), rng.choice((4, 5, 6, 8))
    nx, ny = rng.choice(((2, 1), (2, 2), (3, 2)))
    sx, sy = length - 4 * d, width - 4 * d
    pts = [
        [
            round((i - (nx - 1) / 2) * sx / max(nx - 1, 1), 3),
            round((j - (ny - 1) / 2) * sy / max(ny - 1, 1), 3),
        ]
        for j in range(ny)
        for i in range(nx)
    ]
    if ny == 1:
        pts = [[p[0], 0.0] for p in pts]
    script = (
        "import cadquery as cq\n"
        f"result = (cq.Workplane('XY').box({length}, {width}, {t}, centered=(True, True, False))\n"
        f"    .faces('>Z').{FACE_WP}\n"
        f"    .pushPoints({_pts(pts)}).hole({d}))\n"
    )
    where = ", ".join(f"({x:g}, {y:g})" for x, y in pts) + " mm"
    text = (
        f"a plate '{name}' {length} x {width} x {t} mm (x, y, z), centred on the origin in XY with its "
        f"bottom on Z=0, with {len(pts)} through holes {d} mm in diameter at {where}"
    )
    plan = [
        call("cad_box", name=name, length=length, width=width, height=t),
        call("cad_hole", name=name, diameter=d, positions=pts),
    ]
    volume = length * width * t - len(pts) * math.pi * (d / 2) ** 2 * t
    return Part(name, "plate", text, script, [length, width, t], volume, [(d, len(pts))], plan)


def shaft(rng: random.Random, name: str = "Shaft") -> Part:
    r1 = rng.choice((12, 15, 18))
    r2, r3 = r1 - rng.choice((3, 4)), r1 - rng.choice((6, 7))
    l1, l2, l3 = rng.choice((10, 15, 20)), rng.choice((20, 30, 40)), rng.choice((15, 25))
    script = (
        "import cadquery as cq\n"
        f"result = (cq.Workplane('XY').circle({r1}).extrude({l1})\n"
        f"    .faces('>Z').workplane().circle({r2}).extrude({l2})\n"
        f"    .faces('>Z').workplane().circle({r3}).extrude({l3}))\n"
    )
    total = l1 + l2 + l3
    text = (
        f"a stepped shaft '{name}' along Z from Z=0, centred on the Z axis: {2 * r1} mm diameter for "
        f"{l1} mm, then {2 * r2} mm for {l2} mm, then {2 * r3} mm for {l3} mm (total {total} mm)"
    )
    profile = [
        [0, 0],
        [r1, 0],
        [r1, l1],
        [r2, l1],
        [r2, l1 + l2],
        [r3, l1 + l2],
        [r3, total],
        [0, total],
    ]
    plan = [call("cad_revolve", name=name, points=profile)]
    volume = math.pi * (r1**2 * l1 + r2**2 * l2 + r3**2 * l3)
    return Part(name, "shaft", text, script, [2 * r1, 2 * r1, total], volume, [], plan)


def flange(rng: random.Random, name: str = "Flange") -> Part:
    dia, t = rng.choice((60, 70, 80, 90)), rng.choice((8, 10, 12))
    bore = rng.choice((16, 20, 24))
    n, db = rng.choice((4, 6, 8)), rng.choice((5, 6))
    radius = round((dia / 2 + bore / 2) / 2, 3)
    text = (
        f"a round flange '{name}' {dia} mm across and {t} mm thick (centred on the Z axis, bottom on "
        f"Z=0) with a {bore} mm centre bore and {n} bolt holes {db} mm in diameter on a {2 * radius:g} mm "
        f"bolt circle, the first on the +X axis"
    )
    return _bored_disc(name, "flange", text, dia, t, bore, n, db, radius)


def _bored_disc(name: str, kind: str, text: str, dia: float, t: float, bore: float, n: int,
                hole: float, radius: float) -> Part:  # fmt: skip
    """A disc `dia` x `t` on Z=0 with a centre `bore` and `n` holes of `hole` mm on a circle of
    `radius` (the first on +X): the flange, and the cap that fits over a boss."""
    pts = [
        [
            round(radius * math.cos(2 * math.pi * k / n), 6),
            round(radius * math.sin(2 * math.pi * k / n), 6),
        ]
        for k in range(n)
    ]
    script = (
        "import cadquery as cq\n"
        f"result = (cq.Workplane('XY').circle({dia / 2}).extrude({t})\n"
        f"    .faces('>Z').{FACE_WP}.hole({bore})\n"
        f"    .faces('>Z').{FACE_WP}.pushPoints({_pts(pts)}).hole({hole}))\n"
    )
    plan = [
        call("cad_cylinder", name=name, radius=dia / 2, height=t),
        call("cad_hole", name=name, diameter=bore, positions=[[0, 0]]),
        call("cad_pattern", kind="circle", count=n, radius=radius),
        call("cad_hole", name=name, diameter=hole, positions=pts),
    ]
    volume = math.pi * t * ((dia / 2) ** 2 - (bore / 2) ** 2 - n * (hole / 2) ** 2)
    return Part(name, kind, text, script, [dia, dia, t], volume, [(bore, 1), (hole, n)], plan)


def bracket(rng: random.Random, name: str = "Bracket") -> Part:
    a, h = rng.choice((40, 50, 60)), rng.choice((30, 40, 50))
    t, w = rng.choice((5, 6, 8)), rng.choice((24, 30, 36))
    r, dh = rng.choice((4, 5, 6)), rng.choice((5, 6.5))
    hx = round(t + (a - t) / 2, 3)
    pts = [(hx, -w / 4), (hx, w / 4)]
    script = (
        "import cadquery as cq\n"
        f"body = (cq.Workplane('XZ').polyline([(0, 0), ({a}, 0), ({a}, {t}), ({t}, {t}), ({t}, {h}), (0, {h})])\n"
        f"    .close().extrude({w / 2}, both=True))\n"
        f"body = body.edges('|Y').edges(cq.selectors.NearestToPointSelector(({t}, 0, {t}))).fillet({r})\n"
        f"holes = cq.Workplane('XY').pushPoints({_pts(pts)}).circle({dh / 2}).extrude({t})\n"
        "result = body.cut(holes)\n"
    )
    text = (
        f"an L-bracket '{name}': a base leg {a} mm long along +X and an upright {h} mm tall along +Z, "
        f"both {t} mm thick and {w} mm wide (centred on Y=0, outer corner at the origin), the inside "
        f"corner filleted with radius {r} mm, and two {dh} mm through holes in the base at "
        f"({hx:g}, {-w / 4:g}) mm and ({hx:g}, {w / 4:g}) mm"
    )
    volume = (
        (a * t + (h - t) * t) * w + (1 - math.pi / 4) * r**2 * w - 2 * math.pi * (dh / 2) ** 2 * t
    )
    return Part(name, "bracket", text, script, [a, w, h], volume, [(dh, 2)], None)


def shelled_box(rng: random.Random, name: str = "Tray") -> Part:
    length, width, height = (
        rng.choice((50, 60, 80)),
        rng.choice((30, 40, 50)),
        rng.choice((20, 25, 30)),
    )
    t = rng.choice((2, 3, 4))
    script = (
        "import cadquery as cq\n"
        f"result = (cq.Workplane('XY').box({length}, {width}, {height}, centered=(True, True, False))\n"
        f"    .faces('>Z').shell(-{t}))\n"
    )
    text = (
        f"an open-topped box '{name}' {length} x {width} x {height} mm outside (centred in XY, bottom on "
        f"Z=0) with walls and floor {t} mm thick"
    )
    plan = [
        call("cad_box", name=name, length=length, width=width, height=height),
        call("cad_shell", name=name, faces=">Z", thickness=t),
    ]
    volume = length * width * height - (length - 2 * t) * (width - 2 * t) * (height - t)
    return Part(name, "shelled_box", text, script, [length, width, height], volume, [], plan)


def mounting_plate(rng: random.Random, name: str = "Mount") -> Part:
    """Eight structured steps: box, fillet, corner holes, counterbored bore, bolt circle, chamfer."""
    length, width, t = rng.choice((100, 120)), rng.choice((70, 80)), rng.choice((10, 12))
    rf, d = rng.choice((7, 9)), 6
    bore, cb, cbd = 10, 16, 4
    n, db, radius = rng.choice((4, 6)), 4, rng.choice((16, 18))
    sx, sy = length - 20, width - 20
    corners = [[-sx / 2, -sy / 2], [sx / 2, -sy / 2], [-sx / 2, sy / 2], [sx / 2, sy / 2]]
    bolts = [
        [
            round(radius * math.cos(2 * math.pi * k / n), 9),
            round(radius * math.sin(2 * math.pi * k / n), 9),
        ]
        for k in range(n)
    ]
    step = "shape = cq.Workplane('XY').add(shape)"
    script = (
        "import cadquery as cq\n"
        f"shape = cq.Workplane().box({length}, {width}, {t}, centered=(True, True, False)).val()\n"
        f"{step}.edges('|Z').fillet({rf}).val()\n"
        f"{step}.faces('>Z').{FACE_WP}.pushPoints({_pts(corners)}).hole({d}).val()\n"
        f"{step}.faces('>Z').{FACE_WP}.pushPoints([(0, 0)]).cboreHole({bore}, {cb}, {cbd}).val()\n"
        f"{step}.faces('>Z').{FACE_WP}.pushPoints({_pts(bolts)}).hole({db}).val()\n"
        f"{step}.edges('<Z').chamfer(1).val()\n"
        "result = shape\n"
    )
    text = (
        f"a mounting plate '{name}' {length} x {width} x {t} mm (centred in XY, bottom on Z=0) with its "
        f"four vertical corner edges filleted r={rf} mm, four {d} mm through holes at (±{sx / 2:g}, "
        f"±{sy / 2:g}) mm, a {bore} mm centre hole counterbored {cb} mm across and {cbd} mm deep, {n} "
        f"holes {db} mm in diameter on a {2 * radius} mm bolt circle (the first on +X), and the bottom edges "
        f"chamfered 1 mm"
    )
    plan = [
        call("cad_box", name=name, length=length, width=width, height=t),
        call("cad_fillet", name=name, edges="|Z", radius=rf),
        call("cad_pattern", kind="grid", count_x=2, count_y=2, spacing_x=sx, spacing_y=sy),
        call("cad_hole", name=name, diameter=d, positions=corners),
        call(
            "cad_hole",
            name=name,
            diameter=bore,
            positions=[[0, 0]],
            counterbore_diameter=cb,
            counterbore_depth=cbd,
        ),
        call("cad_pattern", kind="circle", count=n, radius=radius),
        call("cad_hole", name=name, diameter=db, positions=bolts),
        call("cad_chamfer", name=name, edges="<Z", length=1),
    ]
    holes = [(d, 4), (bore, 1), (cb, 1), (db, n)]
    return Part(name, "mounting_plate", text, script, [length, width, t], None, holes, plan)


SIMPLE = (plate, shaft)
MEDIUM = (flange, bracket, shelled_box)


def bossed_plate(rng: random.Random, name: str = "Housing", pad: bool = False) -> Part:
    """A plate with a counterbored boss (levels 4-5 of the CAD families). Ten structured steps;
    with `pad` a raised pad under the boss and four holes through it (thirteen). Each later
    feature sits on an earlier one: the boss on the plate (or pad), the bolt circle in the boss
    (drilled last, after the chamfers)."""
    length, width = rng.choice((120, 140)), rng.choice((90, 100))
    t, rf = rng.choice((8, 10)), rng.choice((7, 9))  # fillets 14, 18: no hole diameter
    boss_r, boss_h = rng.choice((20, 22)), rng.choice((10, 12))
    bore, cb, cbd = 12, 20, 4
    n, db, radius = rng.choice((3, 4, 6)), 4, 15
    d = rng.choice((5, 6))
    sx, sy = length - 20, width - 20
    corners = [[-sx / 2, -sy / 2], [sx / 2, -sy / 2], [-sx / 2, sy / 2], [sx / 2, sy / 2]]
    bolts = [
        [
            round(radius * math.cos(2 * math.pi * k / n), 9),
            round(radius * math.sin(2 * math.pi * k / n), 9),
        ]
        for k in range(n)
    ]
    step = "shape = cq.Workplane('XY').add(shape)"
    top = f"{step}.faces('>Z').{FACE_WP}"
    z_boss = t
    lines = [
        "import cadquery as cq",
        f"shape = cq.Workplane().box({length}, {width}, {t}, centered=(True, True, False)).val()",
        f"{step}.edges('|Z').fillet({rf}).val()",
    ]
    plan = [
        call("cad_box", name=name, length=length, width=width, height=t),
        call("cad_fillet", name=name, edges="|Z", radius=rf),
    ]
    pad_text = ""
    holes = [(d, 4), (bore, 1), (cb, 1), (db, n)]
    if pad:
        pl, pw, ph = length - 40, width - 40, rng.choice((5, 6))
        dp = 8
        px, py = (pl - 16) / 2, (pw - 16) / 2
        pads = [[-px, -py], [px, -py], [-px, py], [px, py]]
        lines.append(
            f"shape = shape.fuse(cq.Workplane('XY', origin=(0, 0, {t})).rect({pl}, {pw})"
            f".extrude({ph}).val()).clean()"
        )
        plan.append(
            call("cad_sketch_extrude", name=name, profile={"kind": "rect", "width": pl,
                 "height": pw}, distance=ph, at_z=t)  # fmt: skip
        )
        z_boss = t + ph
        pad_text = (
            f" a raised pad {pl} x {pw} x {ph} mm centred on top of the plate, with four {dp} mm "
            f"through holes at (±{px:g}, ±{py:g}) mm;"
        )
        holes.append((dp, 4))
    lines += [
        f"shape = shape.fuse(cq.Workplane('XY', origin=(0, 0, {z_boss})).circle({boss_r})"
        f".extrude({boss_h}).val()).clean()",
        f"{top}.pushPoints([(0, 0)]).cboreHole({bore}, {cb}, {cbd}).val()",
        f"{top}.pushPoints({_pts(corners)}).hole({d}).val()",
    ]
    plan += [
        call("cad_sketch_extrude", name=name, profile={"kind": "circle", "radius": boss_r},
             distance=boss_h, at_z=z_boss),  # fmt: skip
        call(
            "cad_hole", name=name, diameter=bore, positions=[[0, 0]],
            counterbore_diameter=cb, counterbore_depth=cbd,
        ),  # fmt: skip
        call("cad_pattern", kind="grid", count_x=2, count_y=2, spacing_x=sx, spacing_y=sy),
        call("cad_hole", name=name, diameter=d, positions=corners),
    ]
    if pad:
        lines.append(f"{top}.pushPoints({_pts(pads)}).hole({dp}).val()")
        plan += [
            call("cad_pattern", kind="grid", count_x=2, count_y=2, spacing_x=2 * px,
                 spacing_y=2 * py),  # fmt: skip
            call("cad_hole", name=name, diameter=dp, positions=pads),
        ]
    # The bolt holes come last (sharp-edged): a wrong last step must show in the checks.
    lines += [
        f"{step}.edges('<Z').chamfer(1).val()",
        f"{step}.faces('>Z').edges().chamfer(0.5).val()",
        f"{top}.pushPoints({_pts(bolts)}).hole({db}).val()",
        "result = shape",
    ]
    plan += [
        call("cad_chamfer", name=name, edges="<Z", length=1),
        call("cad_chamfer", name=name, edges=">Z", length=0.5),
        call("cad_pattern", kind="circle", count=n, radius=radius),
        call("cad_hole", name=name, diameter=db, positions=bolts),
    ]
    text = (
        f"a housing plate '{name}' {length} x {width} x {t} mm (centred in XY, bottom on Z=0) with "
        f"its four vertical corner edges filleted r={rf} mm, four {d} mm through holes at "
        f"(±{sx / 2:g}, ±{sy / 2:g}) mm;{pad_text} a round boss {2 * boss_r} mm across and "
        f"{boss_h} mm tall centred on top{' of the pad' if pad else ''}, with a {bore} mm centre "
        f"hole through everything counterbored {cb} mm across and {cbd} mm deep from the boss "
        f"top; then every bottom edge (the holes' too) chamfered 1 mm and the boss's top edges "
        f"0.5 mm; last, {n} sharp-edged holes {db} mm in diameter through everything on a "
        f"{2 * radius} mm bolt circle (the first on +X)"
    )
    script = "\n".join(lines) + "\n"
    kind = "padded_housing" if pad else "housing"
    size = [length, width, z_boss + boss_h]
    return Part(name, kind, text, script, size, None, holes, plan, {"boss_diameter": 2 * boss_r})


def cap(rng: random.Random, fits: float, name: str = "Cap") -> Part:
    """A ring that slides over a boss `fits` mm across: a cylinder, its bore, a bolt circle."""
    dia, t = fits + rng.choice((30, 40)), rng.choice((6, 8))
    n, dh = rng.choice((4, 6)), rng.choice((5, 6))
    radius = round((dia / 2 + fits / 2) / 2, 3)
    text = (
        f"a ring '{name}' {dia} mm across and {t} mm thick (centred on the Z axis, bottom on Z=0) "
        f"whose bore fits the boss exactly ({fits} mm), with {n} holes {dh} mm in diameter on a "
        f"{2 * radius:g} mm circle, the first on +X"
    )
    return _bored_disc(name, "cap", text, dia, t, fits, n, dh, radius)
