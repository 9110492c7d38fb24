"""Repair and target families (#31): fix a prepared scene or part, or hit a measured target.

repair: `overlap_repair` (parts floating or sunk into their supports), `mesh_repair` (an
imported mesh with holes, flipped faces, unwelded seams, debris), `unit_repair` (parts
imported in the wrong units), `boolean_repair` (a drilled plate whose cuts went wrong).
targets: `volume_targets` (CAD parts sized to a volume), `mass_targets` (held out: parts
sized to a mass, and a counterweight placed so the centre of mass lands over a pivot).
The scene is in metres, CAD parts in millimetres; each prompt speaks the unit of its tools.
"""

from __future__ import annotations

import math
import random
from typing import Any

from training.tasks.base import TaskSpec, call, family
from training.tasks.config import RELATION_WEIGHTS
from training.tasks.scene_families import counted, fmt, placed

REPAIR_WEIGHTS = RELATION_WEIGHTS
NAMES = (
    "Crate", "Drum", "Block", "Tin", "Brick", "Box", "Can", "Case", "Cube", "Jar", "Vase",
    "Lamp", "Clock", "Radio", "Book", "Bowl", "Kettle", "Bin", "Chest", "Pot",
)  # fmt: skip


def _r(x: float, nd: int = 4) -> float:
    return round(float(x), nd) + 0.0


def _cm(x: float) -> float:
    return round(round(x * 100) / 100, 2)


def _item(name: str, kind: str, dims, loc) -> dict[str, Any]:
    return {"name": name, "kind": kind, "dimensions": [_r(d) for d in dims],
            "location": [_r(v) for v in loc], "rotation_deg": [0.0, 0.0, 0.0]}


def _add(it: dict[str, Any], loc=None) -> dict[str, Any]:
    return call("add_primitive", kind=it["kind"], name=it["name"], dimensions=it["dimensions"],
                location=list(loc if loc is not None else it["location"]))


# ================================================================ overlap_repair

GAP_TOL = 0.005  # metres: "touching" means a gap or overlap of at most 5 mm


def _off(rng: random.Random) -> float:
    """A visible vertical mistake: floating (+) or sunk (-) by 5-25 cm."""
    return _cm(rng.choice((-1, 1)) * rng.uniform(0.05, 0.25))


def _box(rng: random.Random, name: str, lo: float = 0.15, hi: float = 0.5) -> dict[str, Any]:
    kind = rng.choice(("cube", "cube", "cylinder"))
    if kind == "cylinder":
        d = _cm(rng.uniform(lo, hi))
        dims = [d, d, _cm(rng.uniform(lo, hi))]
    else:
        dims = [_cm(rng.uniform(lo, hi)) for _ in range(3)]
    return _item(name, kind, dims, (0, 0, 0))


@family(
    "overlap_repair",
    "Move floating or sunken parts so each rests on its support, touching and not intersecting.",
    levels=(1, 2, 3, 4, 5),
    domain="repair",
    weights=REPAIR_WEIGHTS,
)
def overlap_repair(level: int, rng: random.Random) -> TaskSpec:
    names = iter(rng.sample(NAMES, len(NAMES)))
    start: list[dict[str, Any]] = []
    fixed: list[dict[str, Any]] = []  # supports the task leaves alone
    moved: list[tuple[dict[str, Any], str, str]] = []  # (final item, support, mistake)
    slid: list[tuple[dict[str, Any], str]] = []  # (final item, the neighbour it overlapped)

    def on_ground(x: float, y: float) -> None:
        it = _box(rng, next(names))
        it["location"] = [x, y, _r(it["dimensions"][2] / 2)]
        moved.append((it, "the floor", "ground"))

    def stack(x: float, y: float, n: int) -> None:
        below = None
        for k in range(n):
            it = _box(rng, next(names), 0.2 + 0.1 * (n - k), 0.3 + 0.1 * (n - k))
            z0 = 0.0 if below is None else below["location"][2] + below["dimensions"][2] / 2
            it["location"] = [x, y, _r(z0 + it["dimensions"][2] / 2)]
            moved.append((it, "the floor" if below is None else below["name"], "stack"))
            below = it

    def shelf(y: float, n: int, overlap: bool) -> None:
        h = _cm(rng.uniform(0.8, 1.4))
        width = 0.7 * n + 0.4
        board = _item(f"Shelf{len(fixed) + 1}", "cube", (width, 0.4, 0.04), (0, y, h))
        fixed.append(board)
        top = h + 0.02
        xs = [round(-width / 2 + 0.55 + 0.7 * k, 2) for k in range(n)]
        for k, x in enumerate(xs):
            it = _box(rng, next(names), 0.12, 0.3)
            it["dimensions"][1] = min(it["dimensions"][1], 0.3)
            if it["kind"] == "cylinder":
                it["dimensions"][0] = it["dimensions"][1]
            it["location"] = [x, y, _r(top + it["dimensions"][2] / 2)]
            if overlap and k == n - 1:  # pushed into its left neighbour: slide it back out
                left = moved[-1][0]
                it["location"][0] = _r(left["location"][0] + left["dimensions"][0] / 2
                                       + it["dimensions"][0] / 2 + _cm(rng.uniform(0.1, 0.2)))
                slid.append((it, left["name"]))
            else:
                moved.append((it, board["name"], "shelf"))

    if level == 1:
        on_ground(_cm(rng.uniform(-1, 1)), _cm(rng.uniform(-1, 1)))
    elif level == 2:
        on_ground(-1.0, 0.0)
        on_ground(1.0, _cm(rng.uniform(-0.5, 0.5)))
    elif level == 3:
        shelf(0.0, 3, overlap=True)
    elif level == 4:
        stack(-1.5, -1.5, 3)
        stack(1.5, -1.5, 3)
        on_ground(0.0, -1.5)
    else:
        stack(-2.0, -2.0, 3)
        stack(0.0, -2.0, 3)
        stack(2.0, -2.0, 3)
        shelf(1.0, 4, overlap=True)
        on_ground(3.5, 1.0)
        on_ground(-3.5, 1.0)
    for b in fixed:
        start.append(_add(b))
    oracle, texts, constraints = [], [], []
    for it, support, _why in moved:
        wrong = list(it["location"])
        wrong[2] = _r(wrong[2] + _off(rng))
        start.append(_add(it, wrong))
        oracle.append(call("transform", name=it["name"], location=it["location"]))
        constraints += placed(it, kind_check=False)
        if support == "the floor":
            constraints.append({"kind": "on_ground", "object": it["name"], "tol": GAP_TOL})
        else:
            constraints.append({"kind": "on_top", "upper": it["name"], "lower": support,
                                "tol": GAP_TOL})
    for it, left in slid:
        wrong = list(it["location"])
        shift = _cm(rng.uniform(0.05, 0.1))
        # it overlaps its neighbour by `shift` and floats or sinks as well
        lx = next(m for m, _, _ in moved if m["name"] == left)
        final_x = _r(lx["location"][0] + lx["dimensions"][0] / 2 + it["dimensions"][0] / 2)
        wrong[0] = _r(final_x - shift)
        wrong[2] = _r(wrong[2] + _off(rng))
        it["location"][0] = final_x
        start.append(_add(it, wrong))
        oracle.append(call("transform", name=it["name"], location=it["location"]))
        constraints += placed(it, kind_check=False)
        constraints += [
            {"kind": "on_top", "upper": it["name"], "lower": fixed[-1]["name"], "tol": GAP_TOL},
            {"kind": "touching", "a": it["name"], "b": left, "tol": GAP_TOL},
        ]
        texts.append(f"'{it['name']}' also cuts into '{left}': slide it along x, away from "
                     f"'{left}', until the two just touch")
    for b in fixed:
        constraints += placed(b, kind_check=False, guard=True)
    everything = [m[0]["name"] for m in moved] + [s[0]["name"] for s in slid]
    constraints.append({"kind": "no_overlap", "objects": everything + [b["name"] for b in fixed],
                        "tol": GAP_TOL})
    # A stack is fixed from the bottom up: each box's height depends on the one below.
    if level == 1:
        it = moved[0][0]
        prompt = (f"'{it['name']}' is floating above the floor or sunk into it. Move it so it "
                  "rests on the floor (z = 0), keeping its x and y.")
    else:
        supports = sorted({s for _, s, _ in moved})
        prompt = (
            f"In this scene some of the objects ({', '.join(repr(n) for n in everything)}) "
            "float above what they should stand on or sink into it. Move every one of them so "
            f"it rests on its support ({', '.join(supports)}: a "
            "stacked box on the one below it, a shelf item on its shelf), touching it and not "
            "intersecting, keeping each object's x and y"
        )
        if fixed:
            prompt += f"; the shelves ({', '.join(b['name'] for b in fixed)}) are right, leave them"
        prompt += ". " + ("; ".join(texts) + "." if texts else "")
        prompt = prompt.strip()
    return TaskSpec(
        prompt=prompt,
        parameters={"moved": [m[0]["name"] for m in moved], "slid": [s[0]["name"] for s in slid],
                    "supports": [b["name"] for b in fixed]},
        oracle=oracle,
        constraints=constraints,
        start=start,
    )


# ================================================================ mesh_repair

DEFECTS = ("unwelded", "debris", "holes", "flipped")
DEFECT_WORDS = {
    "unwelded": "unwelded seams (duplicate vertices)",
    "debris": "a loose fragment",
    "holes": "holes",
    "flipped": "faces with flipped normals",
}
# The repair each defect needs, in the order that works (weld before filling or re-winding).
DEFECT_OPS = {"unwelded": "merge_by_distance", "debris": "keep_largest", "holes": "fill_holes",
              "flipped": "recalculate_normals"}
DEFECT_FACTS = {"unwelded": ["welded", "closed"], "debris": ["one_piece"], "holes": ["closed"],
                "flipped": ["consistent", "outward"]}
MESH_NAMES = ("Scan", "Bracket", "Housing", "Knob", "Figure", "Pillar", "Casting", "Token")


def _prism(rng: random.Random) -> tuple[list[tuple[float, float]], float, str]:
    """A closed outline (counter-clockwise, metres) and a height: a box, an n-gon or an L."""
    shape = rng.choice(("box", "ngon", "ell"))
    a, b = _cm(rng.uniform(0.3, 0.8)), _cm(rng.uniform(0.3, 0.8))
    h = _cm(rng.uniform(0.2, 0.6))
    if shape == "box":
        pts = [(-a / 2, -b / 2), (a / 2, -b / 2), (a / 2, b / 2), (-a / 2, b / 2)]
    elif shape == "ngon":
        n = rng.choice((6, 8, 10))
        pts = [(a / 2 * math.cos(2 * math.pi * k / n), a / 2 * math.sin(2 * math.pi * k / n))
               for k in range(n)]
    else:
        c = _cm(min(a, b) * 0.5)
        pts = [(-a / 2, -b / 2), (a / 2, -b / 2), (a / 2, -b / 2 + c), (-a / 2 + c, -b / 2 + c),
               (-a / 2 + c, b / 2), (-a / 2, b / 2)]
    return [(_r(x), _r(y)) for x, y in pts], h, shape


def broken_mesh(rng: random.Random, pts, h: float, at, defects) -> tuple[list, list]:
    """Vertices (Blender world, metres) and faces (0-based) of a prism with `defects`."""
    n = len(pts)
    x0, y0 = at
    verts = [(x0 + x, y0 + y, 0.0) for x, y in pts] + [(x0 + x, y0 + y, h) for x, y in pts]
    faces = [list(range(n - 1, -1, -1)), list(range(n, 2 * n))]
    faces += [[k, (k + 1) % n, n + (k + 1) % n, n + k] for k in range(n)]
    if "holes" in defects:  # one or two side walls missing (never neighbours)
        k = rng.randrange(n)
        gone = {2 + k} | ({2 + (k + n // 2) % n} if n >= 6 and rng.random() < 0.5 else set())
        faces = [f for i, f in enumerate(faces) if i not in gone]
    if "flipped" in defects:  # a few faces wound backwards
        for i in rng.sample(range(len(faces)), max(1, len(faces) // 3)):
            faces[i] = faces[i][::-1]
    if "unwelded" in defects:  # every face on its own copies of its corners
        soup, out = [], []
        for f in faces:
            out.append(list(range(len(soup), len(soup) + len(f))))
            soup += [verts[v] for v in f]
        verts, faces = soup, out
    if "debris" in defects:  # a small closed cube beside the body
        s, cx = 0.05, x0 + max(x for x, _ in pts) + 0.15
        base = len(verts)
        verts = verts + [(cx + dx * s, y0 + dy * s, dz * s) for dz in (0, 1) for dy in (0, 1)
                         for dx in (0, 1)]
        cube = [[0, 2, 3, 1], [4, 5, 7, 6], [0, 1, 5, 4], [2, 6, 7, 3], [0, 4, 6, 2], [1, 3, 7, 5]]
        faces = faces + [[base + i for i in f] for f in cube]
    return verts, faces


def obj_text(objects: list[tuple[str, list, list]]) -> bytes:
    """An OBJ file holding named objects, Z up (as the scene is)."""
    lines, base = ["# scanned parts"], 1
    for name, verts, faces in objects:
        lines.append(f"o {name}")
        lines += [f"v {x:.6f} {y:.6f} {z:.6f}" for x, y, z in verts]
        lines += ["f " + " ".join(str(base + i) for i in f) for f in faces]
        base += len(verts)
    return ("\n".join(lines) + "\n").encode()


@family(
    "mesh_repair",
    "Make imported meshes watertight: weld seams, fill holes, fix normals, delete loose parts.",
    levels=(1, 2, 3, 4, 5),
    domain="repair",
    weights=REPAIR_WEIGHTS,
)
def mesh_repair(level: int, rng: random.Random) -> TaskSpec:
    n_mesh, n_def = {1: (1, 1), 2: (1, 2), 3: (2, 2), 4: (2, 3), 5: (4, 4)}[level]
    names = rng.sample(MESH_NAMES, n_mesh)
    objects, oracle, constraints, found, words = [], [], [], [], []
    for i, name in enumerate(names):
        defects = sorted(rng.sample(DEFECTS, n_def), key=DEFECTS.index)
        pts, h, _ = _prism(rng)
        at = (_r(-1.5 * (n_mesh - 1) + 3.0 * i), 0.0)
        verts, faces = broken_mesh(rng, pts, h, at, defects)
        objects.append((name, verts, faces))
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        body = {"name": name, "kind": "cube", "rotation_deg": [0.0, 0.0, 0.0],
                "dimensions": [_r(max(xs) - min(xs)), _r(max(ys) - min(ys)), h],
                "location": [_r(at[0] + (max(xs) + min(xs)) / 2),
                             _r(at[1] + (max(ys) + min(ys)) / 2), _r(h / 2)]}
        if level >= 4:  # the prompt does not say what is wrong: look first
            oracle.append(call("mesh_check", name=name))
        oracle += [call("mesh_repair", name=name, operation=DEFECT_OPS[d]) for d in defects]
        facts = ["manifold"] + [f for d in defects for f in DEFECT_FACTS[d]]
        constraints += [{"kind": "mesh_health", "object": name, "require": [f]}
                        for f in dict.fromkeys(facts)]
        constraints += placed(body, kind_check=False, guard=True)
        words.append(" and ".join(DEFECT_WORDS[d] for d in defects))
        found.append(f"'{name}' ({', '.join(DEFECT_WORDS[d] for d in defects)})")
    path = "scan.obj" if n_mesh == 1 else "scans.obj"
    if level == 1:
        prompt = (f"The mesh '{names[0]}' imported from {path} has "
                  f"{words[0]}. Repair it so it is watertight and "
                  "manifold, with outward normals, without moving or resizing it.")
    else:
        which = "; ".join(found) if level <= 3 else ", ".join(f"'{n}'" for n in names)
        prompt = (f"These meshes were imported from {path} for 3D printing and are broken: "
                  f"{which}. Repair each so it is one watertight, manifold piece with outward "
                  "normals, keeping its size and place.")
        if level >= 4:
            prompt += " Check each mesh to find out what is wrong with it."
    return TaskSpec(
        prompt=prompt,
        parameters={"meshes": names, "file": path},
        oracle=oracle,
        constraints=constraints,
        files={path: obj_text(objects)},
        # the importer turns Y-up files to Z-up on the object; this file is Z-up already
        start=[call("import_file", path=path)]
        + [call("transform", name=n, rotation_deg=[0.0, 0.0, 0.0]) for n in names],
    )


# ================================================================ unit_repair

MISTAKES = {
    # factor the part came in at, and how a person says it
    1000.0: "1000 times too big (millimetres read as metres)",
    1 / 25.4: "25.4 times too small (inches read as millimetres)",
    25.4: "25.4 times too big (millimetres read as inches)",
    0.001: "1000 times too small (metres read as millimetres)",
}
PART_NAMES = ("Panel", "Shelf", "Leg", "Knob", "Door", "Hinge", "Rail", "Foot", "Plinth",
              "Drawer", "Handle", "Top", "Back", "Side", "Base", "Lid", "Cap", "Peg")


@family(
    "unit_repair",
    "Bring parts imported in the wrong units (1000x, inches as mm) back to their declared size.",
    levels=(1, 2, 3, 4, 5),
    domain="repair",
    weights=REPAIR_WEIGHTS,
)
def unit_repair(level: int, rng: random.Random) -> TaskSpec:
    n = {1: 1, 2: 2, 3: 4, 4: 8, 5: 16}[level]
    positions_scaled = level >= 3
    names = rng.sample(PART_NAMES, n)
    cells = rng.sample([(x, y) for x in range(-3, 4) for y in range(-2, 3)], n)
    start, oracle, constraints, listed = [], [], [], []
    factors = list(MISTAKES)
    for k, (name, (cx, cy)) in enumerate(zip(names, cells, strict=True)):
        kind = rng.choice(("cube", "cube", "cylinder"))
        dims = [_cm(rng.uniform(0.1, 0.8)) for _ in range(3)]
        if kind == "cylinder":
            dims[1] = dims[0]
        it = _item(name, kind, dims, (cx * 1.0, cy * 1.0, dims[2] / 2))
        f = 1000.0 if level == 1 else (factors[k % 4] if k < 4 else rng.choice(factors))
        loc = [v * f for v in it["location"]] if positions_scaled else it["location"]
        start.append(call("add_primitive", kind=kind, name=name,
                          dimensions=[d * f for d in dims], location=[_r(v, 6) for v in loc]))
        args: dict[str, Any] = {"name": name, "scale": [1 / f] * 3}
        if positions_scaled:
            args["location"] = it["location"]
        oracle.append(call("transform", **args))
        constraints += placed(it, kind_check=False)
        listed.append(f"'{name}' {fmt(dims)}")
    if level == 1:
        prompt = (f"'{names[0]}' was imported {MISTAKES[1000.0]}. Scale it to its real size, "
                  f"{fmt(constraints[1]['value'])}, keeping it centred where it is.")
    else:
        prompt = (
            "These parts were imported with unit mistakes: each is 1000 or 25.4 times too big "
            "or too small. Bring each to its declared size: " + "; ".join(listed) + ". "
        )
        prompt += ("Their positions were scaled by the same mistake about the origin: put "
                   "each part back where it belongs too." if positions_scaled
                   else "Keep each part centred where it is.")
    return TaskSpec(
        prompt=prompt,
        parameters={"parts": names},
        oracle=oracle,
        constraints=constraints,
        start=start,
    )


# ================================================================ boolean_repair

FAULTS = ("short", "misplaced", "leftover", "wrong_op")
FAULT_CALLS = {"short": 1, "misplaced": 2, "leftover": 1, "wrong_op": 2}


@family(
    "boolean_repair",
    "Fix a drilled CAD plate whose booleans went wrong: blind, misplaced, leftover, unioned cutters.",
    levels=(1, 2, 3, 4, 5),
    domain="repair",
    weights=REPAIR_WEIGHTS,
)
def boolean_repair(level: int, rng: random.Random) -> TaskSpec:
    if level == 1:
        faults = [rng.choice(("short", "leftover"))]
    elif level == 2:
        faults = [rng.choice(("misplaced", "wrong_op"))]
    elif level == 3:
        faults = ["short", "leftover", rng.choice(("misplaced", "wrong_op"))]
    elif level == 4:
        faults = ["short", "misplaced", "leftover", "wrong_op"]
    else:
        faults = ["short"] * 3 + ["misplaced"] * 4 + ["leftover"] * 2 + ["wrong_op"]
    n = len(faults)
    cols = 5 if n > 4 else max(2, n)
    rows = math.ceil(n / cols)
    pitch = 20
    L = pitch * cols + 20
    W = pitch * max(rows, 2) + 20 + 20
    T = rng.choice((6, 8, 10, 12))
    d = rng.choice((5, 6, 8))
    cells = [(_r(-pitch * (cols - 1) / 2 + pitch * (k % cols)),
              _r(-pitch * (max(rows, 2) - 1) / 2 + pitch * (k // cols))) for k in range(n)]
    rng.shuffle(faults)
    name = rng.choice(("Plate", "Bracket", "Flange", "Cover", "Base"))
    start = [call("cad_box", name=name, length=L, width=W, height=T)]
    oracle: list[dict[str, Any]] = []
    late: list[dict[str, Any]] = []  # the wrong union comes last, after its snapshot
    first: list[dict[str, Any]] = []  # restoring the snapshot must come first
    texts, filled, cutters = [], [], []
    for k, ((x, y), fault) in enumerate(zip(cells, faults, strict=True)):
        cut = f"Drill{k + 1}"
        here = [x / 1000, y / 1000, -0.001]

        def cylinder(cname: str, at) -> list[dict[str, Any]]:
            return [call("cad_cylinder", name=cname, radius=d / 2, height=T + 2),
                    call("transform", name=cname, location=[_r(v, 6) for v in at])]

        if fault == "short":
            start.append(call("cad_hole", name=name, diameter=d, depth=_r(T * 0.4),
                              positions=[[x, y]]))
            oracle.append(call("cad_hole", name=name, diameter=d, positions=[[x, y]]))
            texts.append(f"the hole at ({x:g}, {y:g}) mm does not go through")
        elif fault == "misplaced":
            dx = rng.choice((-1, 1)) * 6.0
            wrong = [(x + dx) / 1000, y / 1000, -0.001]
            start += cylinder(cut, wrong)
            filled.append([(x + dx * 1.5) / 1000, y / 1000, T / 2000])
            oracle += [call("transform", name=cut, location=[_r(v, 6) for v in here]),
                       call("boolean", target=name, cutter=cut, operation="difference")]
            cutters.append(cut)
            texts.append(f"the cutter '{cut}' sits at {_at_m(wrong)}, off its hole at "
                         f"{_at_m(here)}, and was never cut")
        elif fault == "leftover":
            start += cylinder(cut, here)
            start += [call("duplicate", name=cut, new_name=f"{cut}_copy"),
                      call("boolean", target=name, cutter=cut, operation="difference")]
            oracle.append(call("delete", name=f"{cut}_copy"))
            cutters.append(f"{cut}_copy")
            texts.append(f"a leftover cutter '{cut}_copy' still fills the hole at {_at_m(here)}")
        else:
            start += cylinder(cut, here)
            late = [call("snapshot", name="before_cut"),
                    call("boolean", target=name, cutter=cut, operation="union")]
            first = [call("restore", name="before_cut"),
                     call("boolean", target=name, cutter=cut, operation="difference")]
            cutters.append(cut)
            texts.append(f"'{cut}' at {_at_m(here)} was joined to the part instead of "
                         "cut from it (a snapshot 'before_cut' was taken just before)")
    start += late
    oracle = first + oracle
    hole_area = math.pi * (d / 2) ** 2
    volume = L * W * T - n * hole_area * T
    empty = [[x / 1000, y / 1000, T * f / 1000] for x, y in cells for f in (0.2, 0.8)]
    constraints = [
        {"kind": "part", "object": name, "size": [L, W, T], "volume": _r(volume, 3),
         "tol_rel": 0.002},
        {"kind": "holes", "object": name, "diameter": d, "count": n},
        {"kind": "occupancy", "object": name, "empty": empty, "filled": filled},
        {"kind": "count", "equal": 1},
    ] + [{"kind": "absent", "object": c} for c in cutters]
    prompt = (
        f"'{name}' is a {L:g} x {W:g} x {T:g} mm plate that should have {counted(n, 'hole')} "
        f"{d:g} mm across, all through, one at each place named below, and nothing else. "
        "Its booleans went wrong: " + "; ".join(texts)
        + ". Fix it so the part matches, with no cutters left over."
        " (The scene is in metres, the part in millimetres; the part's origin is the scene's.)"
    )
    return TaskSpec(
        prompt=prompt,
        parameters={"part": name, "faults": faults, "holes": cells, "diameter": d},
        oracle=oracle,
        constraints=constraints,
        start=start,
    )


def _at_m(loc) -> str:
    """A cutter's XY place in the scene, in metres, as the transform tool takes it."""
    x, y = (_r(v, 6) for v in loc[:2])
    return f"({x:g}, {y:g}) m"


# ================================================================ volume_targets

VOLUME_TOL = 0.01
PART_WORDS = ("Block", "Puck", "Flange", "Spacer", "Mount", "Base", "Boss", "Cap", "Slug", "Stop")


def _v(vol_mm3: float) -> str:
    cm3 = vol_mm3 / 1000
    return "1 litre" if abs(cm3 - 1000) < 1e-9 else f"{cm3:g} cm³"


def _block(rng, name):
    L, W = rng.randrange(30, 80, 5), rng.randrange(20, 60, 5)
    V = 1000 * round(L * W * rng.uniform(15, 40) / 1000)
    H = V / (L * W)
    text = f"a box '{name}' {L:g} x {W:g} mm in plan whose height gives {_v(V)}"
    return text, [call("cad_box", name=name, length=L, width=W, height=_r(H))], V, [L, W, H], []


def _can(rng, name):
    D = rng.randrange(40, 120, 10)
    V = rng.choice((250_000, 330_000, 500_000, 1_000_000)) if D >= 70 else \
        1000 * round(math.pi * (D / 2) ** 2 * rng.uniform(20, 60) / 1000)
    H = V / (math.pi * (D / 2) ** 2)
    text = f"a cylinder '{name}' {D:g} mm across whose height makes it hold {_v(V)}"
    return text, [call("cad_cylinder", name=name, radius=D / 2, height=_r(H))], V, [D, D, H], []


def _drilled(rng, name):
    L, W = rng.randrange(40, 90, 5), rng.randrange(30, 60, 5)
    d, k = rng.choice((6, 8, 10)), rng.choice((2, 4))
    pos = [[-L / 4, 0], [L / 4, 0]] if k == 2 else \
        [[sx * L / 4, sy * W / 4] for sx in (-1, 1) for sy in (-1, 1)]
    area = L * W - k * math.pi * (d / 2) ** 2
    V = 1000 * round(area * rng.uniform(8, 25) / 1000)
    H = V / area
    text = (f"a plate '{name}' {L:g} x {W:g} mm in plan with {counted(k, 'through hole')} "
            f"{d:g} mm across at " + ", ".join(f"({x:g}, {y:g})" for x, y in pos)
            + f" mm, its thickness chosen so its volume is {_v(V)}")
    plan = [call("cad_box", name=name, length=L, width=W, height=_r(H)),
            call("cad_hole", name=name, diameter=d, positions=pos)]
    return text, plan, V, [L, W, H], [(d, k)]


def _bossed(rng, name):
    L = W = rng.randrange(40, 80, 5)
    T = rng.choice((5, 6, 8))
    R = rng.randrange(8, int(L / 2) - 4, 2)
    d = rng.choice((4, 6, 8))
    h0 = rng.uniform(10, 30)
    V = 1000 * round((L * W * T + math.pi * R * R * h0 - math.pi * (d / 2) ** 2 * (T + h0)) / 1000)
    h = (V - L * W * T + math.pi * (d / 2) ** 2 * T) / (math.pi * (R * R - (d / 2) ** 2))
    text = (f"a part '{name}': a {L:g} x {W:g} x {T:g} mm plate with a round boss {2 * R:g} mm "
            f"across centred on top and a {d:g} mm hole through boss and plate; choose the boss "
            f"height so the volume is {_v(V)}")
    plan = [call("cad_box", name=name, length=L, width=W, height=T),
            call("cad_sketch_extrude", name=name, profile={"kind": "circle", "radius": R},
                 distance=_r(h), at_z=T),
            call("cad_hole", name=name, diameter=d, positions=[[0.0, 0.0]])]
    return text, plan, V, [L, W, T + h], [(d, 1)]


@family(
    "volume_targets",
    "Size CAD parts (boxes, cans, drilled plates, bossed flanges) to hit a target volume.",
    levels=(1, 2, 3, 4, 5),
    domain="targets",
    weights=REPAIR_WEIGHTS,
)
def volume_targets(level: int, rng: random.Random) -> TaskSpec:
    kinds = {
        1: [_block],
        2: [_can, _block] if rng.random() < 0.5 else [_drilled],
        3: [_bossed, rng.choice((_block, _can))],
        4: [_bossed, _drilled, rng.choice((_block, _can))],
        5: [_bossed] * 3 + [_drilled] * 3 + [rng.choice((_block, _can))],
    }[level]
    names = rng.sample(PART_WORDS, len(kinds))
    texts, oracle, constraints, targets = [], [], [], {}
    for make, name in zip(kinds, names, strict=True):
        text, plan, V, size, holes = make(rng, name)
        texts.append(text)
        oracle += plan
        targets[name] = V
        constraints.append({"kind": "part", "object": name, "size": [_r(s) for s in size],
                            "volume": _r(V, 3), "tol_rel": VOLUME_TOL})
        constraints += [{"kind": "holes", "object": name, "diameter": dd, "count": k}
                        for dd, k in holes]
    lead = rng.choice(("Model", "Make", "Create"))
    prompt = f"{lead} " + "; ".join(texts) + " (within 1 %). Lengths in millimetres."
    return TaskSpec(
        prompt=prompt,
        parameters={"volumes_mm3": targets},
        oracle=oracle,
        constraints=constraints,
    )


# ================================================================ mass_targets (held out)

MATERIALS = {  # kg/m³ and the colour its parts are painted
    "steel": (7850, "#8C8C96"), "aluminium": (2700, "#D0D4D8"), "brass": (8500, "#C8A040"),
    "oak": (700, "#A07040"), "lead": (11340, "#50505A"), "concrete": (2400, "#A8A8A0"),
    "PLA plastic": (1240, "#3060C0"),
}
MASS_TOL = 0.02
WEIGHT_NAMES = ("Weight", "Bob", "Ingot", "Slab", "Puck", "Brick", "Tile", "Bar", "Nugget")


def _weight(rng, name, material, x, y, z0) -> tuple[dict[str, Any], float]:
    rho = MATERIALS[material][0]
    a, b = _cm(rng.uniform(0.06, 0.15)), _cm(rng.uniform(0.06, 0.15))
    m = round(rho * a * b * rng.uniform(0.04, 0.12), 1)
    h = m / (rho * a * b)
    return _item(name, "cube", (a, b, h), (x, y, z0 + h / 2)), m


@family(
    "mass_targets",
    "Size parts of given materials to a mass and place a counterweight so the centre of mass "
    "lands over a pivot.",
    levels=(1, 2, 3, 4, 5),
    domain="targets",
    held_out=True,
    weights=REPAIR_WEIGHTS,
)
def mass_targets(level: int, rng: random.Random) -> TaskSpec:
    n_w = {1: 1, 2: 2, 3: 2, 4: 3, 5: 7}[level]
    paint = level >= 4
    names = rng.sample(WEIGHT_NAMES, n_w)
    start, oracle, constraints, texts = [], [], [], []
    used: set[str] = set()
    masses: dict[str, tuple[float, float]] = {}  # name: (kg, x)
    if level <= 2:
        z0, beam_len = 0.0, 0.0
        xs = [_r(_cm(rng.uniform(-1, -0.5)) + 0.8 * k) for k in range(n_w)]
    else:
        beam_len = _cm(rng.uniform(2.8, 3.2) if level == 5 else rng.uniform(1.2, 2.0))
        beam = _item("Beam", "cube", (beam_len, 0.16, 0.04), (0, 0, 0.5))
        start.append(_add(beam))
        used.add("oak")
        constraints += placed(beam, kind_check=False, guard=True)
        z0 = 0.52
        # the weights sit on the left half; the counterweight balances them on the right
        step = min(0.3, (beam_len / 2 - 0.3) / max(1, n_w - 1))
        xs = [_r(-beam_len / 2 + 0.12 + k * step) for k in range(n_w)]
    densities: dict[str, float] = {"Beam": MATERIALS["oak"][0]} if level >= 3 else {}
    for name, x in zip(names, xs, strict=True):
        mat = rng.choice(list(MATERIALS))
        used.add(mat)
        it, m = _weight(rng, name, mat, x, 0.0, z0)
        rho, colour = MATERIALS[mat]
        oracle.append(_add(it))
        densities[name] = rho
        masses[name] = (m, x)
        constraints += [
            {"kind": "mass", "objects": [name], "density": rho, "value": m, "tol_rel": MASS_TOL},
            {"kind": "position", "object": name, "value": it["location"], "tol": 0.01},
        ]
        where = "on the floor" if level <= 2 else "standing on 'Beam'"
        constraints.append({"kind": "on_ground", "object": name, "tol": GAP_TOL} if level <= 2
                           else {"kind": "on_top", "upper": name, "lower": "Beam", "tol": GAP_TOL})
        d = it["dimensions"]
        texts.append(f"a {mat} box '{name}' of {m:g} kg, {d[0]:g} x {d[1]:g} m in plan, {where}, "
                     f"centred at x = {x:g} m, y = 0")
        if paint:
            oracle.append(call("set_material", name=name, color=colour))
            constraints.append({"kind": "material", "object": name, "color": colour})
    if level >= 3:
        # the counterweight: a box of a given plan and mass, at the x that balances the rest
        mat = rng.choice(("steel", "lead", "brass"))
        used.add(mat)
        rho, colour = MATERIALS[mat]
        moment = sum(m * x for m, x in masses.values())  # the beam is centred: no moment
        want_x = rng.uniform(0.3, beam_len / 2 - 0.15)
        m = max(0.1, round(-moment / want_x, 1))
        a, b = _cm(rng.uniform(0.08, 0.15)), _cm(rng.uniform(0.08, 0.15))
        h = m / (rho * a * b)
        cw = _item("Counterweight", "cube", (a, b, h), (-moment / m, 0.0, z0 + h / 2))
        oracle.append(_add(cw))
        densities["Counterweight"] = rho
        constraints += [
            {"kind": "mass", "objects": ["Counterweight"], "density": rho, "value": m,
             "tol_rel": MASS_TOL},
            {"kind": "on_top", "upper": "Counterweight", "lower": "Beam", "tol": GAP_TOL},
            {"kind": "centre_of_mass", "densities": dict(densities), "value": [0.0, 0.0, 0.0],
             "tol": 0.01, "axes": "xy"},
        ]
        if paint:
            oracle.append(call("set_material", name="Counterweight", color=colour))
            constraints.append({"kind": "material", "object": "Counterweight", "color": colour})
        texts.append(
            f"then a {mat} box 'Counterweight' of {m:g} kg, {a:g} x {b:g} m in plan, on 'Beam' "
            "at y = 0, placed along x so the centre of mass of the beam and everything on it "
            "lies over the pivot at x = 0 (within 1 cm)"
        )
    if level >= 3:  # weigh everything and find the centre of mass before finishing
        oracle.append(call("mass_properties", names=list(densities)))
    intro = ("'Beam' is an oak plank resting on a pivot at the origin. Add " if level >= 3
             else "Add ")
    dens = ", ".join(f"{k} {MATERIALS[k][0]:g}" for k in MATERIALS if k in used)
    prompt = intro + "; ".join(texts) + f". Densities (kg/m³): {dens}."
    if paint:
        prompt += " Paint each part its material's colour: " + ", ".join(
            f"{k} {MATERIALS[k][1]}" for k in MATERIALS if k in used and k != "oak") + "."
    return TaskSpec(
        prompt=prompt,
        parameters={"densities": densities, "masses_kg": {k: v[0] for k, v in masses.items()}},
        oracle=oracle,
        constraints=constraints,
        start=start,
    )


# ================================================================ print_walls

WALL_TOL = 0.05
SHELL_NAMES = ("Cup", "Pot", "Tray", "Bin", "Case", "Vessel", "Holder", "Caddy", "Planter")


def _cup(rng: random.Random, name: str, fillet: bool, build: bool = True):
    """A box (optionally with rounded upright edges) or a cylinder, hollowed from the top."""
    t = rng.choice((1.6, 2.0, 2.4, 3.0))
    H = rng.randrange(25, 60, 5)
    if not fillet and rng.random() < 0.4:
        D = rng.randrange(30, 70, 5)
        R = D / 2
        make = call("cad_cylinder", name=name, radius=R, height=H)
        vol = math.pi * (R * R * H - (R - t) ** 2 * (H - t))
        size, what = [D, D, H], f"a cylinder '{name}' {D:g} mm across and {H:g} mm tall"
        wall = [(R - t / 2) / 1000, 0.0, H / 2000]
    else:
        L, W = rng.randrange(40, 90, 5), rng.randrange(30, 60, 5)
        r = rng.choice((6, 8, 10)) if fillet else 0
        k = 4 - math.pi
        vol = (L * W - k * r * r) * H - ((L - 2 * t) * (W - 2 * t) - k * (r - t) ** 2 * (r > 0)) * (H - t)
        make = call("cad_box", name=name, length=L, width=W, height=H)
        size = [L, W, H]
        what = f"a box '{name}' {L:g} x {W:g} x {H:g} mm" + (
            f" with its upright edges rounded to {r:g} mm" if fillet else "")
        wall = [(L / 2 - t / 2) / 1000, 0.0, H / 2000]
    plan = [make] if build else []
    if fillet:
        plan.append(call("cad_fillet", name=name, edges="|Z", radius=r))
    plan.append(call("cad_shell", name=name, faces=">Z", thickness=t))
    constraints = [
        {"kind": "part", "object": name, "size": size, "volume": _r(vol, 3), "tol_rel": 0.005},
        {"kind": "wall_thickness", "object": name, "value": t / 1000, "tol_rel": WALL_TOL},
        {"kind": "occupancy", "object": name, "empty": [[0.0, 0.0, H * 0.6 / 1000]],
         "filled": [wall]},
    ]
    return what, t, make, plan, constraints


@family(
    "print_walls",
    "Hollow CAD parts for 3D printing to a wall thickness, measured through the material.",
    levels=(1, 2, 3, 4, 5),
    domain="targets",
    weights=REPAIR_WEIGHTS,
)
def print_walls(level: int, rng: random.Random) -> TaskSpec:
    names = iter(rng.sample(SHELL_NAMES, len(SHELL_NAMES)))
    start, oracle, constraints, texts = [], [], [], []
    if level == 1:
        what, t, make, plan, cons = _cup(rng, next(names), fillet=False, build=False)
        start.append(make)
        oracle += plan
        constraints += cons
        name = make["args"]["name"]
        prompt = (f"'{name}' is a solid part. Hollow it for 3D printing, open at the top, with "
                  f"walls and floor {t:g} mm thick, keeping its outside size. Lengths in mm.")
        return TaskSpec(prompt=prompt, parameters={"parts": [name]}, oracle=oracle,
                        constraints=constraints, start=start)
    if level >= 3:  # a part shelled too thin, with a snapshot of it still solid
        what, t, make, plan, cons = _cup(rng, next(names), fillet=False, build=False)
        name = make["args"]["name"]
        thin = rng.choice((0.4, 0.6, 0.8))
        start += [make, call("snapshot", name="solid"),
                  call("cad_shell", name=name, faces=">Z", thickness=thin)]
        oracle += [call("restore", name="solid"), *plan]
        constraints += cons
        texts.append(f"'{name}' was hollowed with {thin:g} mm walls, too thin to print: redo it "
                     f"with {t:g} mm walls (a snapshot 'solid' holds it before hollowing)")
    n_new = {2: 1, 3: 1, 4: 2, 5: 5}[level]
    for _ in range(n_new):
        what, t, make, plan, cons = _cup(rng, next(names), fillet=level >= 3)
        oracle += plan
        constraints += cons
        texts.append(f"make {what}, hollowed from the top with {t:g} mm walls and floor")
    prompt = ("For 3D printing (lengths in mm, parts open at the top, outside sizes as given, "
              "walls measured through the material): " + "; ".join(texts) + ".")
    return TaskSpec(
        prompt=prompt,
        parameters={"parts": [c["object"] for c in constraints if c["kind"] == "part"]},
        oracle=oracle,
        constraints=constraints,
        start=start,
    )
