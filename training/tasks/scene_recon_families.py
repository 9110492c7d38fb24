"""Families of issue #31: furnished rooms, stairs and shelving, camera and lights, parts
rebuilt from a drawing, and parts delivered for printing or in exchange formats.

Scenes are in metres, CAD parts in millimetres; each prompt says which. The checkers are
constraints (training/tasks/checks.py), the geometry of reference CAD parts, and
deliverable files reloaded in the verifier (`DELIVERABLE_CHECKS` below).
"""

from __future__ import annotations

import json
import math
import random
import zipfile
from typing import Any
from xml.etree import ElementTree

import numpy as np

from training.tasks import parts as P
from training.tasks import shapes
from training.tasks.base import TaskSpec, call, family
from training.tasks.config import CAD_WEIGHTS, RELATION_WEIGHTS
from training.tasks.scene_families import COLOURS, fmt

POS_TOL = 0.05
SIZE_TOL = 0.05


def _r(x: float, nd: int = 3) -> float:
    return round(float(x), nd) + 0.0


def _v(v, nd: int = 3) -> list[float]:
    return [_r(x, nd) for x in v]


def box(name: str, dims, loc, kind: str = "cube") -> dict[str, Any]:
    return {"name": name, "kind": kind, "dimensions": _v(dims), "location": _v(loc),
            "rotation_deg": [0.0, 0.0, 0.0]}


def add(it: dict[str, Any]) -> dict[str, Any]:
    return call("add_primitive", kind=it["kind"], name=it["name"], dimensions=it["dimensions"],
                location=it["location"])


def where(it: dict[str, Any], weight: float = 1.0) -> list[dict[str, Any]]:
    out = [
        {"kind": "position", "object": it["name"], "value": it["location"], "tol": POS_TOL},
        {"kind": "size", "object": it["name"], "value": it["dimensions"], "tol_rel": SIZE_TOL},
    ]
    return [{**c, "weight": weight} for c in out] if weight != 1.0 else out


def size_text(d) -> str:
    return " x ".join(f"{x:g}" for x in d) + " m"


# ================================================================ rooms


def _room(rng: random.Random) -> dict[str, Any]:
    w, d, h = rng.choice((5.0, 5.5, 6.0)), rng.choice((4.0, 4.5, 5.0)), rng.choice((2.5, 2.7))
    t = 0.1
    return {
        "w": w, "d": d, "h": h,
        "Floor": box("Floor", (w, d, t), (0, 0, -t / 2)),
        "WallN": box("WallN", (w, t, h), (0, d / 2 + t / 2, h / 2)),
        "WallS": box("WallS", (w, t, h), (0, -d / 2 - t / 2, h / 2)),
        "WallE": box("WallE", (t, d, h), (w / 2 + t / 2, 0, h / 2)),
        "WallW": box("WallW", (t, d, h), (-w / 2 - t / 2, 0, h / 2)),
    }  # fmt: skip


WALL_WORDS = {"WallN": "north (+Y)", "WallS": "south (-Y)", "WallE": "east (+X)",
              "WallW": "west (-X)"}


def _furniture(rng: random.Random, room: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every piece a room may hold, placed by its relation; with the sentence that asks for it
    and the relation constraints (positions are checked too)."""
    w, d = room["w"], room["d"]
    tl, tw = rng.choice((1.2, 1.4, 1.6)), rng.choice((0.7, 0.8))
    rl, rw = rng.choice((1.6, 1.8)), rng.choice((1.0, 1.2))
    bw = rng.choice((1.4, 1.6))
    out: dict[str, dict[str, Any]] = {}
    table = box("Table", (tl, tw, 0.75), (0, d / 2 - tw / 2, 0.375))
    out["Table"] = {"item": table, "text": f"a table 'Table' {size_text(table['dimensions'])} "
                    "against the north wall, centred on it",
                    "rel": [{"kind": "touching", "a": "Table", "b": "WallN", "tol": 0.02},
                            {"kind": "aligned", "objects": ["Table", "WallN"], "axes": "x",
                             "tol": POS_TOL}]}
    rug = box("Rug", (rl, rw, 0.02), (0, 0, 0.01))
    out["Rug"] = {"item": rug, "text": f"a rug 'Rug' {size_text(rug['dimensions'])} on the floor, "
                  "centred in the room",
                  "rel": [{"kind": "aligned", "objects": ["Rug", "Floor"], "axes": "xy",
                           "tol": POS_TOL}]}
    bed = box("Bed", (bw, 2.0, 0.5), (w / 2 - bw / 2, -d / 2 + 1.0, 0.25))
    out["Bed"] = {"item": bed, "text": f"a bed 'Bed' {size_text(bed['dimensions'])} in the "
                  "south-east corner, touching both walls",
                  "rel": [{"kind": "touching", "a": "Bed", "b": "WallS", "tol": 0.02},
                          {"kind": "touching", "a": "Bed", "b": "WallE", "tol": 0.02}]}
    ns = box("Nightstand", (0.5, 0.4, 0.5), (w / 2 - bw - 0.25, -d / 2 + 0.2, 0.25))
    out["Nightstand"] = {"item": ns, "text": f"a nightstand 'Nightstand' {size_text(ns['dimensions'])} "
                         "against the south wall, touching the west side of the bed",
                         "rel": [{"kind": "touching", "a": "Nightstand", "b": "Bed", "tol": 0.02},
                                 {"kind": "touching", "a": "Nightstand", "b": "WallS", "tol": 0.02}]}
    gap = rng.choice((0.2, 0.3, 0.5))
    wd = box("Wardrobe", (0.6, 1.2, 2.0), (-w / 2 + 0.3, -d / 2 + gap + 0.6, 1.0))
    out["Wardrobe"] = {"item": wd, "text": f"a wardrobe 'Wardrobe' {size_text(wd['dimensions'])} "
                       f"against the west wall, {gap:g} m from the south wall",
                       "rel": [{"kind": "touching", "a": "Wardrobe", "b": "WallW", "tol": 0.02},
                               {"kind": "gap", "a": "Wardrobe", "b": "WallS", "axis": "y",
                                "value": gap, "tol": 0.03}]}
    return out


def _chairs(n: int, table: dict[str, Any], table_name: str) -> tuple[list[dict[str, Any]], str, list[dict]]:
    tl = table["dimensions"][0]
    step = tl / n
    y = table["location"][1] - table["dimensions"][1] / 2 - 0.1 - 0.2
    chairs = [box(f"Chair{i + 1}", (0.4, 0.4, 0.9), (-tl / 2 + step * (i + 0.5), y, 0.45))
              for i in range(n)]
    names = [c["name"] for c in chairs]
    text = (f"{n} chairs {', '.join(repr(x) for x in names)}, each 0.4 x 0.4 x 0.9 m, in a row "
            f"along the south side of the table, 0.1 m from it, spaced {step:g} m apart and "
            "centred on the table")
    rel: list[dict] = [{"kind": "gap", "a": c, "b": table_name, "axis": "y", "value": 0.1,
                        "tol": 0.03} for c in names]
    if n > 1:
        rel.append({"kind": "evenly_spaced", "objects": names, "axis": "x", "tol": 0.03,
                    "spacing": _r(step)})
        rel.append({"kind": "symmetric", "a": names[0], "b": names[-1], "axis": "x",
                    "tol": POS_TOL})
    return chairs, text, rel


@family(
    "rooms",
    "Furnish a room: floor, walls, table, chairs, bed and rug placed by relations.",
    levels=(1, 2, 3, 4, 5),
    domain="scenes",
    weights=RELATION_WEIGHTS,
)
def rooms(level: int, rng: random.Random) -> TaskSpec:
    room = _room(rng)
    furn = _furniture(rng, room)
    w, d, h = room["w"], room["d"], room["h"]
    walls = ["WallN", "WallS", "WallE", "WallW"]
    start_names, build_names, pieces = {
        1: (["Floor", "WallN", "WallS", "WallE"], [], [rng.choice(("Table", "Rug", "Bed"))]),
        2: (["Floor", *walls], [], rng.sample(["Table", "Rug", "Bed", "Wardrobe"], 3)),
        3: (["Floor"], ["WallN", "WallW"], ["Table", "Rug"]),
        4: ([], ["Floor", *walls], ["Table", "Rug", "Bed"]),
        5: ([], ["Floor", *walls], ["Rug", "Bed", "Nightstand", "Wardrobe"]),
    }[level]
    n_chairs = {1: 0, 2: 0, 3: 2, 4: 3, 5: 3}[level]
    start = [add(room[n]) for n in start_names]
    oracle = [add(room[n]) for n in build_names]
    constraints: list[dict[str, Any]] = []
    for n in start_names:
        constraints += where(room[n], weight=0.2)
    texts = []
    if build_names:
        t = room["Floor"]["dimensions"][2]
        texts.append(
            f"a floor 'Floor' {w:g} x {d:g} m and {t:g} m thick with its top at z = 0, centred on "
            "the origin" if "Floor" in build_names else "")
        ws = [n for n in build_names if n.startswith("Wall")]
        texts.append(
            f"{'walls' if len(ws) > 1 else 'a wall'} {', '.join(repr(x) for x in ws)} "
            f"{t:g} m thick and {h:g} m high standing on z = 0 just outside the floor's "
            + ", ".join(WALL_WORDS[x].split()[0] for x in ws) + " edge"
            + ("s" if len(ws) > 1 else "") + ", each as long as that edge")
        for n in build_names:
            constraints += where(room[n])
    chosen = list(pieces)
    if n_chairs and "Table" not in chosen:
        chosen.insert(0, "Table")
    table_name = "TableTop" if level == 5 else "Table"
    for name in chosen:
        f = furn[name]
        if name == "Table" and level == 5:  # the level-5 table is a top on four legs
            oracle, constraints, text = _table_on_legs(f["item"], oracle, constraints)
            texts.append(text)
            continue
        oracle.append(add(f["item"]))
        texts.append(f["text"])
        constraints += where(f["item"]) + f["rel"]
        constraints.append({"kind": "on_top", "upper": name, "lower": "Floor", "tol": 0.02})
    if n_chairs:
        table = furn["Table"]["item"]
        chairs, text, rel = _chairs(n_chairs, table, table_name)
        oracle.append(add(chairs[0]))
        for c in chairs[1:]:
            oracle.append(call("duplicate", name=chairs[0]["name"], new_name=c["name"],
                               location=c["location"]))
        texts.append(text)
        for c in chairs:
            constraints += where(c)
        constraints += rel
    texts = [t for t in texts if t]
    intro = rng.choice((
        f"Furnish the room ({w:g} x {d:g} m, metres, +Y is north). Add ",
        f"In this {w:g} x {d:g} m room (sizes in metres, north is +Y), add ",
        f"Set up a {w:g} x {d:g} m room (metres; +Y north): ",
    ))
    if not start_names:
        intro = intro.replace("In this", "In a new").replace("Furnish the room", "Build a room")
    prompt = intro + "; ".join(texts) + ". Everything stands on the floor."
    return TaskSpec(
        prompt=prompt,
        parameters={"room": [w, d, h], "pieces": chosen, "chairs": n_chairs},
        oracle=oracle,
        constraints=constraints,
        start=start,
    )


def _table_on_legs(top_item, oracle, constraints):
    tl, tw, th = top_item["dimensions"]
    x0, y0 = top_item["location"][:2]
    top = box("TableTop", (tl, tw, 0.05), (x0, y0, th - 0.025))
    legs = []
    for i, (sx, sy) in enumerate(((-1, -1), (1, -1), (1, 1), (-1, 1))):
        legs.append(box(f"Leg{i + 1}", (0.06, 0.06, th - 0.05),
                        (x0 + sx * (tl / 2 - 0.08), y0 + sy * (tw / 2 - 0.08), (th - 0.05) / 2)))
    oracle = [*oracle, add(legs[0])]
    oracle += [call("duplicate", name="Leg1", new_name=g["name"], location=g["location"])
               for g in legs[1:]]
    oracle.append(add(top))
    for g in legs:
        constraints += where(g) + [{"kind": "gap", "a": "TableTop", "b": g["name"], "axis": "z",
                                     "value": 0.0, "tol": 0.01}]
    constraints += where(top) + [
        {"kind": "touching", "a": "TableTop", "b": "WallN", "tol": 0.02},
        {"kind": "aligned", "objects": ["TableTop", "WallN"], "axes": "x", "tol": POS_TOL},
    ]
    text = (f"a table against the north wall, centred on it: a top 'TableTop' {tl:g} x {tw:g} x "
            f"0.05 m whose upper face is {th:g} m high, on four legs 'Leg1'..'Leg4' 0.06 x 0.06 m "
            f"reaching the floor, each centred 0.08 m in from both edges of the top")
    return oracle, constraints, text


# ================================================================ stairs and shelving


def _stairs(rng: random.Random, x0: float, y0: float) -> dict[str, Any]:
    n = rng.choice((4, 5, 6, 8))
    rise, run, w = rng.choice((0.15, 0.18, 0.2)), rng.choice((0.25, 0.28, 0.3)), rng.choice((0.8, 1.0))
    step = box("Stairs", (w, run, rise), (x0, y0 + run / 2, rise / 2))
    total = box("Stairs", (w, n * run, n * rise), (x0, y0 + n * run / 2, n * rise / 2))
    filled = [_v((x0, y0 + run * (k + 0.5), rise * (k + 0.5))) for k in range(n)]
    empty = [_v((x0, y0 + run * (k + 0.5), rise * (k + 1.5))) for k in range(n - 1)]
    text = (f"a straight stair 'Stairs' of {n} steps, each {w:g} m wide, {run:g} m deep (run) "
            f"and {rise:g} m high (rise), as {n} blocks stacked each one run further along +Y and "
            f"one rise higher, the first standing on the ground with its front edge at y = {y0:g} "
            f"m, centred on x = {x0:g} m")
    plan = [add(step), call("modifier", name="Stairs", kind="array", count=n, offset=[0, 1, 1])]
    cons = where(total) + [
        {"kind": "on_ground", "object": "Stairs", "tol": 0.01},
        {"kind": "mesh_volume", "object": "Stairs", "value": _r(n * w * run * rise, 6),
         "tol_rel": 0.02},
        {"kind": "occupancy", "object": "Stairs", "filled": filled, "empty": empty},
    ]
    return {"n": n, "rise": rise, "run": run, "w": w, "x0": x0, "y0": y0, "text": text,
            "plan": plan, "constraints": cons, "total": total}


def _shelving(rng: random.Random, cx: float, y_front: float, bookcase: bool,
              east_edge: float | None = None) -> dict[str, Any]:
    n = rng.choice((3, 4, 5))
    iw, depth, t = rng.choice((0.8, 0.9, 1.0)), rng.choice((0.3, 0.35)), 0.02
    if east_edge is not None:  # its east side at this x
        cx = _r(east_edge - iw / 2 - t)
    pitch, base = rng.choice((0.3, 0.35, 0.4)), 0.1
    height = _r(base + (n - 1) * pitch + rng.choice((0.3, 0.35)))
    cy = y_front + depth / 2
    side_l = box("SideL", (t, depth, height), (cx - iw / 2 - t / 2, cy, height / 2))
    side_r = box("SideR", (t, depth, height), (cx + iw / 2 + t / 2, cy, height / 2))
    shelf = box("Shelves", (iw, depth, t), (cx, cy, base + t / 2))
    span = (n - 1) * pitch + t
    shelves = box("Shelves", (iw, depth, span), (cx, cy, base + span / 2))
    plan = [add(side_l), add(side_r), add(shelf),
            call("modifier", name="Shelves", kind="array", count=n, offset=[0, 0, _r(pitch / t, 6)])]
    cons = where(side_l) + where(side_r) + where(shelves) + [
        {"kind": "on_ground", "object": "SideL", "tol": 0.01},
        {"kind": "touching", "a": "Shelves", "b": "SideL", "tol": 0.01},
        {"kind": "touching", "a": "Shelves", "b": "SideR", "tol": 0.01},
        {"kind": "mesh_volume", "object": "Shelves", "value": _r(n * iw * depth * t, 6),
         "tol_rel": 0.02},
        {"kind": "occupancy", "object": "Shelves",
         "filled": [_v((cx, cy, base + t / 2 + k * pitch)) for k in range(n)],
         "empty": [_v((cx, cy, base + t / 2 + (k + 0.5) * pitch)) for k in range(n - 1)]},
    ]
    what = "bookcase" if bookcase else "shelving unit"
    text = (f"a {what}: two side panels 'SideL' and 'SideR' {t:g} x {depth:g} x {height:g} m "
            f"standing on the ground {iw:g} m apart (inside), centred on x = {_r(cx):g} m with "
            f"their front edges at y = {_r(y_front):g} m, and between them {n} shelves {iw:g} x "
            f"{depth:g} x {t:g} m as ONE object 'Shelves' (an array), the lowest {base:g} m above "
            f"the ground and each next one {pitch:g} m higher")
    out = {"n": n, "iw": iw, "depth": depth, "t": t, "pitch": pitch, "base": base,
           "height": height, "cx": cx, "cy": cy, "plan": plan, "constraints": cons, "text": text}
    if bookcase:
        top = box("Top", (iw + 2 * t, depth, t), (cx, cy, height + t / 2))
        back = box("Back", (iw + 2 * t, t, height + t), (cx, y_front + depth + t / 2,
                                                          (height + t) / 2))
        out["plan"] = plan + [add(top), add(back)]
        out["constraints"] = cons + where(top) + where(back) + [
            {"kind": "gap", "a": "Top", "b": "SideL", "axis": "z", "value": 0.0, "tol": 0.01},
            {"kind": "touching", "a": "Back", "b": "SideR", "tol": 0.01},
        ]
        out["text"] = text + (f"; a top board 'Top' {_r(iw + 2 * t):g} x {depth:g} x {t:g} m "
                              f"resting on the sides, and a back panel 'Back' {_r(iw + 2 * t):g} "
                              f"x {t:g} x {_r(height + t):g} m behind it, touching it, on the "
                              "ground")
    return out


@family(
    "stairs_shelving",
    "Stairs of a given rise, run and count, shelving and bookcases with evenly spaced shelves.",
    levels=(1, 2, 3, 4, 5),
    domain="scenes",
    held_out=True,
    weights=RELATION_WEIGHTS,
)
def stairs_shelving(level: int, rng: random.Random) -> TaskSpec:
    x0, y0 = rng.choice((0.0, 0.5, 1.0)), rng.choice((-1.0, -0.5, 0.0))
    texts, oracle, cons = [], [], []
    params: dict[str, Any] = {}
    if level in (1, 4, 5):
        st = _stairs(rng, x0, y0)
        texts.append(st["text"])
        oracle += st["plan"]
        cons += st["constraints"]
        params["stairs"] = {k: st[k] for k in ("n", "rise", "run", "w")}
    if level >= 4:
        n, rise, run, w = st["n"], st["rise"], st["run"], st["w"]
        ld = rng.choice((0.8, 1.0))
        landing = box("Landing", (w, ld, n * rise), (x0, y0 + n * run + ld / 2, n * rise / 2))
        oracle.append(add(landing))
        cons += where(landing) + [{"kind": "touching", "a": "Landing", "b": "Stairs", "tol": 0.01}]
        texts.append(f"a landing block 'Landing' as wide as the stairs and {ld:g} m deep, on the "
                     "ground behind the top step, touching it, its top flush with the top step")
    if level == 5:
        pw, ph = 0.05, rng.choice((0.8, 0.9))
        post = box("Posts", (pw, pw, ph), (x0 + w / 2 - pw / 2, y0 + run / 2, rise + ph / 2))
        oracle += [add(post), call("modifier", name="Posts", kind="array", count=n,
                                   offset=[0, _r(run / pw, 6), _r(rise / ph, 6)])]
        span = box("Posts", (pw, (n - 1) * run + pw, (n - 1) * rise + ph),
                   (x0 + w / 2 - pw / 2, y0 + run / 2 + (n - 1) * run / 2,
                    rise + ((n - 1) * rise + ph) / 2))
        cons += where(span) + [{"kind": "mesh_volume", "object": "Posts",
                                "value": _r(n * pw * pw * ph, 8), "tol_rel": 0.02}]
        texts.append(f"railing posts 'Posts' ({pw:g} x {pw:g} x {ph:g} m) as ONE object (an "
                     f"array), one standing on the middle of each step, flush with the stairs' "
                     "east (+X) side")
    if level >= 2:
        if level >= 4:
            # beside the stairs on their west side, 0.1 m away, fronts flush
            sh = _shelving(rng, 0.0, y0, bookcase=True, east_edge=x0 - w / 2 - 0.1)
            sh["text"] += ("; the bookcase stands 0.1 m west of the stairs (between SideR and "
                           "the stairs), its front flush with theirs")
            cons.append({"kind": "gap", "a": "SideR", "b": "Stairs", "axis": "x", "value": 0.1,
                         "tol": 0.02})
        else:
            sh = _shelving(rng, x0, y0, bookcase=level == 3)
        texts.append(sh["text"])
        oracle += sh["plan"]
        cons += sh["constraints"]
        params["shelves"] = {k: sh[k] for k in ("n", "iw", "pitch", "height")}
    if level == 5:
        bw, bd, bh = 0.04, rng.choice((0.18, 0.2)), rng.choice((0.22, 0.25))
        nb = 4
        spacing = _r(sh["iw"] / (nb + 1))
        z = sh["base"] + sh["t"] + bh / 2
        books = [box(f"Book{i + 1}", (bw, bd, bh),
                     (sh["cx"] - sh["iw"] / 2 + spacing * (i + 1), sh["cy"], z)) for i in range(nb)]
        oracle.append(add(books[0]))
        oracle += [call("duplicate", name="Book1", new_name=b["name"], location=b["location"])
                   for b in books[1:]]
        for b in books:
            cons += where(b)
        cons.append({"kind": "evenly_spaced", "objects": [b["name"] for b in books], "axis": "x",
                     "tol": 0.02, "spacing": spacing})
        texts.append(f"{nb} books 'Book1'..'Book{nb}' {bw:g} x {bd:g} x {bh:g} m standing on the "
                     f"lowest shelf, centred on its depth, {spacing:g} m apart (centre to "
                     "centre) so that the gaps at both ends equal that spacing too")
    lead = rng.choice(("Build", "Model", "Please add", "Make"))
    prompt = f"{lead} (metres; z up, +Y away from the viewer) " + "; ".join(texts) + "."
    return TaskSpec(prompt=prompt, parameters=params, oracle=oracle, constraints=cons)


# ================================================================ lighting and camera

SUBJECTS = (("Vase", "cylinder"), ("Bust", "uv_sphere"), ("Crate", "cube"), ("Lamp", "cone"),
            ("Trophy", "cylinder"), ("Globe", "uv_sphere"), ("Box", "cube"), ("Cone", "cone"))


def _subject(rng: random.Random, name: str, kind: str, x: float, y: float, z0: float = 0.0,
             d: float | None = None):
    d = d or rng.choice((0.4, 0.5, 0.6))
    h = d if kind == "uv_sphere" else rng.choice((0.6, 0.8, 1.0))
    return box(name, (d, d, h), (x, y, z0 + h / 2), kind=kind)


def _fill_of(cam, target, lens, items) -> float:
    """The share of a square frame the items' boxes span (as the `framed` check measures)."""
    p, t = np.asarray(cam, float), np.asarray(target, float)
    fwd = (t - p) / np.linalg.norm(t - p)
    right = np.cross(fwd, [0, 0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, fwd)
    half = 18.0 / lens
    pts = []
    for it in items:
        c, d = np.asarray(it["location"]), np.asarray(it["dimensions"]) / 2
        for k in range(8):
            q = c + np.where([k & 1, k & 2, k & 4], d, -d) - p
            z = np.dot(q, fwd)
            pts.append((np.dot(q, right) / z / half, np.dot(q, up) / z / half))
    xy = np.array(pts)
    return float(max(np.ptp(xy[:, 0]), np.ptp(xy[:, 1])) / 2)


def _bounds_centre(items) -> np.ndarray:
    lo = np.min([np.asarray(i["location"]) - np.asarray(i["dimensions"]) / 2 for i in items], 0)
    hi = np.max([np.asarray(i["location"]) + np.asarray(i["dimensions"]) / 2 for i in items], 0)
    return (lo + hi) / 2


VIEWS = {"front": (0, -1), "front-right": (1, -1), "right": (1, 0), "front-left": (-1, -1),
         "left": (-1, 0)}


def _camera_plan(rng, items, lens, exact: bool):
    """A camera aimed at the items' centre from a named side, at the distance that fills ~60 %."""
    side = rng.choice(sorted(VIEWS))
    el = math.radians(rng.choice((20, 30, 40)))
    hx, hy = VIEWS[side]
    horiz = np.array([hx, hy], float) / math.hypot(hx, hy)
    v = np.array([horiz[0] * math.cos(el), horiz[1] * math.cos(el), math.sin(el)])
    c = _bounds_centre(items)
    dist = 1.0
    while _fill_of(c + dist * v, c, lens, items) > 0.6:
        dist += 0.1
    loc = _v(c + dist * v)
    target = _v(c)
    view = _v(v)
    fill = [0.15, 0.95] if exact else [0.4, 0.85]
    con = {"kind": "framed", "camera": "Cam", "objects": [i["name"] for i in items],
           "fill": fill}
    if exact:
        con |= {"location": loc, "tol": 0.1}
        text = (f"a camera 'Cam' at {fmt(loc)} with a {lens:g} mm lens, aimed at {fmt(target)} "
                f"so the subject is in view")
    else:
        con |= {"view": view, "tol_deg": 10.0}
        text = (f"a camera 'Cam' with a {lens:g} mm lens (36 mm sensor, square frame) looking "
                f"from the {side} and {round(math.degrees(el))}° above (the unit direction "
                f"[{', '.join(f'{x:g}' for x in view)}] from the subjects' centre "
                f"{fmt(target)}), aimed at that centre, at a distance where they fill 40-85 % of the frame")
    return call("add_camera", name="Cam", location=loc, target=target, lens_mm=lens), con, text


def _light(name, kind, loc, target, energy, role):
    loc, target = _v(loc), _v(target)
    step = call("add_light", kind=kind, name=name, location=loc, energy=energy, target=target)
    con = {"kind": "light", "object": name, "type": kind,
           "energy": [_r(energy * 0.9), _r(energy * 1.1)], "aim": target, "tol_deg": 5.0,
           "location": loc, "tol": 0.1}
    article = "an" if role[:1] in "aeiou" else "a"
    text = f"{article} {role} {kind} light '{name}' of {energy:g} W at {fmt(loc)} aimed at {fmt(target)}"
    return step, con, text


@family(
    "lighting_camera",
    "Place a camera and lights so a described subject is framed and lit (three-point lighting).",
    levels=(1, 2, 3, 4, 5),
    domain="scenes",
    weights=RELATION_WEIGHTS,
)
def lighting_camera(level: int, rng: random.Random) -> TaskSpec:
    x, y = rng.choice((-1.0, 0.0, 1.0)), rng.choice((-0.5, 0.0, 0.5))
    picks = rng.sample(SUBJECTS, 3)
    start: list[dict] = []
    oracle: list[dict] = []
    cons: list[dict] = []
    texts: list[str] = []
    if level <= 2:
        subj = [_subject(rng, *picks[0], x, y)]
        start = [add(subj[0])]
        cons += where(subj[0], weight=0.2)
    elif level <= 4:
        z0 = 0.0
        if level == 4:
            plinth = box("Plinth", (0.8, 0.8, 0.5), (x, y, 0.25))
            oracle.append(add(plinth))
            cons += where(plinth)
            texts.append(f"a plinth 'Plinth' {size_text(plinth['dimensions'])} centred at "
                         f"({x:g}, {y:g}) m on the ground")
            z0 = 0.5
        subj = [_subject(rng, *picks[0], x, y, z0)]
        oracle.append(add(subj[0]))
        cons += where(subj[0])
        texts.append(f"the subject, a {picks[0][1].replace('uv_', '')} '{subj[0]['name']}' "
                     f"{size_text(subj[0]['dimensions'])} standing "
                     + ("on the plinth, centred" if level == 4 else f"on the ground at ({x:g}, {y:g}) m"))
    else:
        floor = box("Floor", (6, 6, 0.02), (0, 0, -0.01))
        wall = box("Backdrop", (6, 0.05, 3), (0, 3.025, 1.5))
        table = box("Table", (1.8, 0.8, 0.75), (0, 0.6, 0.375))
        oracle += [add(floor), add(wall), add(table)]
        cons += where(floor) + where(wall) + where(table)
        texts.append("a floor 'Floor' 6 x 6 x 0.02 m with its top at z = 0, a backdrop 'Backdrop' "
                     "6 x 0.05 x 3 m standing on it along y = 3 m (its front face at y = 3), and a "
                     "table 'Table' 1.8 x 0.8 x 0.75 m centred at (0, 0.6) m on the floor")
        subj = []
        colours = rng.sample(sorted(COLOURS), 3)
        for i, (name, kind) in enumerate(picks):
            # the outer two as wide: the subjects' centre is over the middle one (x = 0)
            s = _subject(rng, name, kind, -0.6 + 0.6 * i, 0.6, 0.75,
                         d=subj[0]["dimensions"][0] if i == 2 else None)
            subj.append(s)
            oracle.append(add(s))
            cons += where(s) + [{"kind": "on_top", "upper": name, "lower": "Table", "tol": 0.02}]
        for s, col in zip(subj, colours, strict=True):
            oracle.append(call("set_material", name=s["name"], color=COLOURS[col]))
            cons.append({"kind": "material", "object": s["name"], "color": COLOURS[col]})
        texts.append("on the table, centred on its depth at x = -0.6, 0 and 0.6 m: " + ", ".join(
            f"a {k.replace('uv_', '')} '{s['name']}' {size_text(s['dimensions'])} coloured {c} "
            f"({COLOURS[c]})" for s, (_, k), c in zip(subj, picks, colours, strict=True)))
    lens = rng.choice((35.0, 50.0, 85.0)) if level >= 3 else 50.0
    if level <= 2:  # a camera at a given place
        c = _bounds_centre(subj)
        side = np.array([rng.choice((-1, 1)) * 3.0, -4.0, 2.0])
        cam_loc, cam_target = _v(c + side), _v(c)
        cam_step = call("add_camera", name="Cam", location=cam_loc, target=cam_target, lens_mm=lens)
        cam_con = {"kind": "framed", "camera": "Cam", "objects": [s["name"] for s in subj],
                   "fill": [0.1, 0.95], "location": cam_loc, "tol": 0.1}
        cam_text = (f"a camera 'Cam' at {fmt(cam_loc)} with a {lens:g} mm lens aimed at the "
                    f"centre of '{subj[0]['name']}' {fmt(cam_target)}")
    else:
        cam_step, cam_con, cam_text = _camera_plan(rng, subj, lens, exact=False)
    oracle.append(cam_step)
    cons.append(cam_con)
    texts.append(cam_text)
    c = _bounds_centre(subj)
    cam = np.asarray(cam_step["args"]["location"])
    back = (cam - c)[:2] / np.linalg.norm((cam - c)[:2])  # towards the camera, horizontal
    left = np.array([-back[1], back[0]])

    def around(towards, sideways, up, dist):
        h = towards * back + sideways * left
        h = h / np.linalg.norm(h)
        return [round(c[0] + dist * h[0], 1), round(c[1] + dist * h[1], 1), round(c[2] + up, 1)]

    key_e = float(rng.choice((800, 1000, 1200)))
    roles = []
    if level >= 2:
        roles.append(("Key", "spot", around(1, 1, 2.0, 3.0), key_e, "key"))
    if level >= 3:
        roles.append(("Fill", rng.choice(("area", "spot")), around(1, -1, 1.0, 3.0), key_e / 2,
                      "fill"))
    if level >= 4:
        roles.append(("Rim", "spot", around(-1, 0.3, 2.5, 3.0), key_e * 0.75, "rim"))
    for name, kind, loc, energy, role in roles:
        step, con, text = _light(name, kind, loc, c, energy, role)
        oracle.append(step)
        cons.append(con)
        texts.append(text)
    if level == 5:
        for i, s in enumerate(subj):
            loc = [s["location"][0], round(s["location"][1] - 1.2, 1), 3.0]
            step, con, text = _light(f"Spot{i + 1}", "spot", loc, s["location"], 300.0,
                                     f"accent (for '{s['name']}')")
            oracle.append(step)
            cons.append(con)
            texts.append(text)
    lead = rng.choice(("Set up a shot", "Prepare the photo", "Light and frame the subject"))
    where_txt = (f" of '{subj[0]['name']}' (already in the scene)" if level <= 2 else "")
    prompt = (f"{lead}{where_txt} (metres, z up). Add " + "; ".join(texts) + ".")
    return TaskSpec(prompt=prompt, parameters={"subjects": [s["name"] for s in subj],
                                               "lens_mm": lens},
                    oracle=oracle, constraints=cons, start=start)


# ================================================================ drawing reconstruction

DRAWING_VIEWS = (("front (looking along +Y)", (0, -1, 0)), ("top (looking down -Z)", (0, 0, 1)),
                 ("right (looking along -X)", (1, 0, 0)))


def drawing_svg(spec: str) -> bytes:
    """An orthographic drawing sheet: three views of each part (CadQuery's SVG projection,
    hidden lines grey) and its dimension table, as one SVG."""
    from xml.sax.saxutils import escape

    from cadquery.occ_impl.exporters.svg import getSVG

    sheet = json.loads(spec)
    w, h = 300, 220
    rows = []
    y = 0
    for entry in sheet["parts"]:
        shape = shapes.build_reference(entry["script"])
        rows.append(f'<text x="10" y="{y + 24}" font-size="16">Part {escape(entry["name"])} '
                    "(millimetres, third-angle projection)</text>")
        for i, (label, direction) in enumerate(DRAWING_VIEWS):
            view = getSVG(shape, {"projectionDir": direction, "width": w, "height": h,
                                  "showAxes": False, "showHidden": True,
                                  "marginLeft": 20, "marginTop": 20})
            body = view[view.index("<svg"):]
            body = body.replace("<svg", f'<svg x="{10 + i * (w + 10)}" y="{y + 34}"', 1)
            rows.append(f'<text x="{10 + i * (w + 10)}" y="{y + 48 + h}" font-size="12">'
                        f"{escape(label)}</text>")
            rows.append(body)
        ty = y + 70 + h
        rows.append(f'<text x="10" y="{ty}" font-size="13">Dimensions:</text>')
        for k, line in enumerate(entry["table"]):
            rows.append(f'<text x="20" y="{ty + 18 * (k + 1)}" font-size="12">{escape(line)}</text>')
        y = ty + 18 * (len(entry["table"]) + 1) + 20
    total_w = 3 * (w + 10) + 10
    svg = (f'<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" '
           f'width="{total_w}" height="{y}" viewBox="0 0 {total_w} {y}">'
           f'<rect width="100%" height="100%" fill="white"/>' + "".join(rows) + "</svg>\n")
    return svg.encode()


def _table(part: P.Part) -> list[str]:
    """The drawing's dimension table: the part's dimensioned description, clause by clause."""
    text = part.text.replace(", with ", "; ").replace(", and ", "; ").replace(" and the ", "; the ")
    return [c.strip() for c in text.split(";") if c.strip()]


def _drawn_parts(level: int, rng: random.Random) -> list[P.Part]:
    if level == 1:
        return [rng.choice(P.SIMPLE)(rng)]
    if level == 2:
        return [P.flange(rng)]
    if level == 3:
        return [P.mounting_plate(rng)]
    if level == 4:
        return [P.mounting_plate(rng), P.flange(rng)]
    return [P.mounting_plate(rng), P.flange(rng), P.plate(rng), P.shaft(rng), P.shelled_box(rng)]


@family(
    "drawing_reconstruction",
    "Rebuild CAD parts from an orthographic drawing sheet with a dimension table.",
    levels=(1, 2, 3, 4, 5),
    domain="reconstruction",
    weights=CAD_WEIGHTS,
)
def drawing_reconstruction(level: int, rng: random.Random) -> TaskSpec:
    parts = _drawn_parts(level, rng)
    path = rng.choice(("drawings/sheet.svg", "drawing.svg", "docs/part_drawing.svg"))
    sheet = {"parts": [{"name": p.name, "script": p.script, "table": _table(p)} for p in parts]}
    listing = " ".join(
        f"[{p.name}] " + "; ".join(_table(p)) + "." for p in parts)
    lead = rng.choice(("Rebuild from the drawing", "Model what the drawing shows",
                       "Here is a drawing to turn into CAD"))
    prompt = (f"{lead}: {path} in the workspace has three orthographic views of "
              + ("the part" if len(parts) == 1 else f"{len(parts)} parts")
              + " and a dimension table (millimetres). Build each as an exact CAD part of the "
              f"name shown, where the table puts it. The table reads: {listing}")
    oracle = [step for p in parts for step in (p.plan or p.script_plan())]
    cons = [c for p in parts for c in p.constraints()]
    cons += [{"kind": "topology", "object": p.name, "script": p.script} for p in parts
             if p.kind == "mounting_plate"]
    return TaskSpec(
        prompt=prompt,
        parameters={"parts": [p.kind for p in parts], "drawing": path},
        oracle=oracle,
        constraints=cons,
        files={path: ("drawing_svg", json.dumps(sheet, sort_keys=True))},
        geometry={"kind": "parts", "parts": [{"name": p.name, "script": p.script} for p in parts]},
        geometry_min=0.999,
    )


shapes.FILE_MAKERS["drawing_svg"] = drawing_svg


# ================================================================ deliverable files

PRINT_NAMES = ("Clip", "Spacer", "Tag", "Foot", "Cap", "Hinge", "Knob", "Wedge", "Latch", "Shim")
PRINTERS = ((220, 220, 250), (250, 210, 220), (180, 180, 180))


def _printable(rng: random.Random, name: str) -> dict[str, Any]:
    """A small part for printing (millimetres, centred in XY, bottom on Z=0): a holed block or
    a spacer ring, with its structured plan, size and volume."""
    if rng.random() < 0.6:
        ln, w, h = rng.choice((30, 40, 50, 60)), rng.choice((20, 25, 30)), rng.choice((4, 5, 6, 8))
        d, n = rng.choice((3, 4, 5)), rng.choice((1, 2))
        pts = [[0.0, 0.0]] if n == 1 else [[-ln / 4, 0.0], [ln / 4, 0.0]]
        plan = [call("cad_box", name=name, length=ln, width=w, height=h),
                call("cad_hole", name=name, diameter=d, positions=pts)]
        where_ = "at its centre" if n == 1 else f"at x = ±{ln / 4:g} mm"
        text = (f"a block '{name}' {ln} x {w} x {h} mm with {n} through hole"
                f"{'s' if n > 1 else ''} {d} mm across {where_}")
        return {"name": name, "size": [ln, w, h], "plan": plan, "text": text,
                "volume": _r(ln * w * h - n * math.pi * (d / 2) ** 2 * h, 3)}
    od, h, bore = rng.choice((16, 20, 24, 30)), rng.choice((5, 8, 10, 12)), rng.choice((5, 6, 8))
    plan = [call("cad_cylinder", name=name, radius=od / 2, height=h),
            call("cad_hole", name=name, diameter=bore, positions=[[0, 0]])]
    text = f"a spacer ring '{name}' {od} mm across, {h} mm tall, with a {bore} mm bore"
    return {"name": name, "size": [od, od, h], "plan": plan, "text": text,
            "volume": _r(math.pi * ((od / 2) ** 2 - (bore / 2) ** 2) * h, 3)}


def _arrange(parts: list[dict[str, Any]], plate, gap: float = 10.0) -> None:
    """Rows along X from the plate's corner, `gap` between parts and from the edges."""
    x = y = gap
    row = 0.0
    for p in parts:
        ln, w = p["size"][0], p["size"][1]
        if x + ln + gap > plate[0]:
            x, y, row = gap, y + row + gap, 0.0
        p["centre"] = [_r(x + ln / 2), _r(y + w / 2)]
        x += ln + gap
        row = max(row, w)


def _moved(p: dict[str, Any], z: float = 0.0) -> dict[str, Any]:
    return call("transform", name=p["name"],
                location=[_r(p["centre"][0] / 1000, 6), _r(p["centre"][1] / 1000, 6), z])


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
    seen: dict[str, Any] = {"size": _v(facts["size"]), "volume": _r(facts["volume"], 6)}
    if want.get("centre") is not None:
        c = (facts["lo"][:2] + facts["hi"][:2]) / 2
        ok &= bool(np.all(np.abs(c - np.asarray(want["centre"], float) * scale) <= 1.0 * scale))
        seen["centre"] = _v(c)
    if want.get("z0") is not None:
        ok &= abs(float(facts["lo"][2]) - want["z0"] * scale) <= 0.05 * scale
        seen["z_min"] = _r(facts["lo"][2], 4)
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
        out["volume"] = _r(whole["volume"], 6)
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
    return out | {"reloads": True, "solids": n, "volume": _r(vol), "size": _v(hi - lo),
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
        seen[o["name"]] = {"size": _v(hi - lo), "centre": _v((lo + hi) / 2), "ok": good}
        ok &= good
    ok &= len(meshes) >= len(d["objects"])
    return out | {"reloads": True, "objects": seen, "ok": bool(ok)}


shapes.DELIVERABLE_CHECKS.update({
    "print_3mf": check_print_3mf, "mesh_file": check_mesh_file, "step_parts": check_step_parts,
    "glb_named": check_glb_named,
})
DELIVERABLE_WEIGHTS = {"completeness": 0.4, "constraints": 0.3, "validity": 0.15,
                       "efficiency": 0.1, "recovery": 0.05}


@family(
    "print_deliverables",
    "Deliver parts for 3D printing: 3MF and millimetre STL, on the build plate, inside the "
    "build volume, several parts arranged apart on one or two plates.",
    levels=(1, 2, 3, 4, 5),
    domain="deliverables",
    weights=DELIVERABLE_WEIGHTS,
)
def print_deliverables(level: int, rng: random.Random) -> TaskSpec:
    plate = list(rng.choice(PRINTERS))
    n = {1: 1, 2: 1, 3: 2, 4: 3, 5: 5}[level]
    names = rng.sample(PRINT_NAMES, n)
    parts = [_printable(rng, nm) for nm in names]
    _arrange(parts[:3], plate)
    _arrange(parts[3:], plate)
    given = level <= 3  # positions told; above, any arrangement that keeps them apart
    if given:  # the arrangement moved as one, so the parts stay apart
        shift = rng.choice((0, 20, 40))
        for p in parts:
            p["centre"] = [p["centre"][0] + shift, p["centre"][1] + 30]
    stem = names[0].lower()
    start: list[dict] = []
    oracle: list[dict] = []
    cons: list[dict] = []
    for p in parts:
        cons.append({"kind": "part", "object": p["name"], "size": p["size"],
                     "volume": p["volume"], "tol_rel": 0.01})
        d = p["plan"][1]["args"]["diameter"]
        cons.append({"kind": "holes", "object": p["name"], "diameter": d,
                     "count": len(p["plan"][1]["args"]["positions"])})
        if given:
            cons.append({"kind": "position", "object": p["name"],
                         "value": [p["centre"][0] / 1000, p["centre"][1] / 1000,
                                   p["size"][2] / 2000], "tol": 0.001})
    if level == 1:
        lift = rng.choice((0.02, 0.03, 0.05))
        start = parts[0]["plan"] + [call("transform", name=names[0], location=[0, 0, lift])]
    else:
        oracle += [s for p in parts for s in p["plan"]]
    oracle += [_moved(p) for p in parts]
    plates = [parts[:3], parts[3:]] if level == 5 else [parts]
    files = [f"print/{stem}.3mf"] if level < 5 else ["print/plate1.3mf", "print/plate2.3mf"]
    deliver = []
    for group, path in zip(plates, files, strict=True):
        oracle.append(call("export", format="3mf", path=path, objects=[p["name"] for p in group]))
        deliver.append({"path": path, "format": "3mf", "check": "print_3mf", "plate": plate,
                        "gap": 2.0, "parts": [{"name": p["name"], "size": p["size"],
                                               "volume": p["volume"], "z0": 0.0,
                                               "centre": p["centre"] if given else None}
                                              for p in group]})
    stl_parts = {1: [], 2: parts, 3: [], 4: parts, 5: [max(parts, key=lambda p: p["volume"])]}
    if stl_parts[level]:
        chosen = stl_parts[level]
        path = f"print/{stem}.stl" if len(chosen) == 1 else "print/all_parts.stl"
        if level == 5:
            path = f"print/{chosen[0]['name'].lower()}.stl"
        oracle.append(call("export", format="stl", path=path, objects=[p["name"] for p in chosen],
                           unit="mm"))
        deliver.append({"path": path, "format": "stl", "check": "mesh_file", "unit": "mm",
                        "plate": plate, "parts": [{"size": p["size"], "volume": p["volume"],
                                                   "z0": 0.0, "centre": p["centre"]}
                                                  for p in chosen]})
    bed = f"(build volume {plate[0]} x {plate[1]} x {plate[2]} mm)"  # a limit, no tool input
    intro = rng.choice((f"Get this ready for a printer {bed}",
                        f"Prepare for printing on a printer {bed}",
                        f"I want to print on a machine {bed}"))
    frame = ("The plate's corner is at the origin, the plate spanning +X and +Y at Z = 0; the "
             "scene is in metres, parts in millimetres.")

    def at(p):  # where a part's origin goes on the plate, in the scene's metres
        return f"({p['centre'][0] / 1000:g}, {p['centre'][1] / 1000:g}) m"

    if level == 1:
        p = parts[0]
        text = (f"Part '{p['name']}' floats above the plate: set it on the plate (bottom at "
                f"Z = 0) centred at {at(p)} and export it "
                f"as 3MF to {files[0]}.")
    else:
        model = "; ".join(p["text"] + (f", centred at {at(p)}" if given else "") for p in parts)
        text = (f"Model {model} (each centred in XY on its origin, bottom on Z=0), then put "
                f"{'it' if n == 1 else 'them'} on the plate (bottoms at Z = 0)")
        if not given:
            text += ", inside the build volume and at least 2 mm apart"
        if level == 5:
            text += (f". Two plates: export {', '.join(names[:3])} as 3MF to {files[0]} and "
                     f"{', '.join(names[3:])} to {files[1]} (each plate arranged on its own)")
        else:
            text += f", and export {'it' if n == 1 else 'all'} as 3MF to {files[0]}"
        if stl_parts[level]:
            what = "the largest part by volume" if level == 5 else ("it" if n == 1 else "all parts")
            text += f"; also export {what} as one STL in millimetres to {deliver[-1]['path']}"
        text += "."
    prompt = f"{intro}. {frame} {text}"
    return TaskSpec(prompt=prompt, parameters={"plate_mm": plate, "parts": names,
                                               "files": [d["path"] for d in deliver]},
                    oracle=oracle, constraints=cons, start=start, deliverables=deliver)


def _glb_object(p: P.Part, offset) -> dict[str, Any]:
    """A part centred in XY with its bottom on its origin, placed at `offset` (mm), in metres."""
    return {"name": p.name, "size": _v(np.asarray(p.size) / 1000, 6),
            "centre": _v((np.asarray(offset, float) + [0, 0, p.size[2] / 2]) / 1000, 6)}


@family(
    "format_deliverables",
    "Deliver STEP, GLB and STL files that reload with the right geometry, names and units; "
    "assemblies of several parts.",
    levels=(1, 2, 3, 4, 5),
    domain="deliverables",
    weights=DELIVERABLE_WEIGHTS,
)
def format_deliverables(level: int, rng: random.Random) -> TaskSpec:
    if level <= 3:
        parts = [rng.choice(P.SIMPLE + P.MEDIUM)(rng)]
    elif level == 4:
        parts = [P.plate(rng), rng.choice((P.flange, P.shelled_box))(rng)]
    else:
        parts = [P.plate(rng), P.flange(rng), P.shaft(rng)]
    # side by side along +X, 20 mm apart, the first at the origin
    offsets, x = [], 0.0
    for i, p in enumerate(parts):
        if i:
            x += parts[i - 1].size[0] / 2 + 20 + p.size[0] / 2
        offsets.append([x, 0.0, 0.0])
    folder = rng.choice(("out", "export", "deliver"))
    plans = [s for p in parts for s in (p.plan or p.script_plan())]
    start: list[dict] = []
    oracle: list[dict] = []
    if level == 1:
        start = plans
    else:
        oracle += plans
    oracle += [call("transform", name=p.name, location=[o[0] / 1000, 0.0, 0.0])
               for p, o in zip(parts, offsets, strict=True) if o[0]]
    cons = [c for p in parts for c in p.constraints()]
    deliver: list[dict] = []
    texts: list[str] = []
    main = parts[0]
    if len(parts) == 1:
        step_path = f"{folder}/{main.name.lower()}.step"
        deliver.append({"path": step_path, "format": "step", "script": main.script})
        texts.append(f"a STEP file of '{main.name}' at {step_path}")
    else:
        step_path = f"{folder}/assembly.step"
        lo = np.min([np.asarray(o) - [p.size[0] / 2, p.size[1] / 2, 0]
                     for p, o in zip(parts, offsets, strict=True)], 0)
        hi = np.max([np.asarray(o) + [p.size[0] / 2, p.size[1] / 2, p.size[2]]
                     for p, o in zip(parts, offsets, strict=True)], 0)
        deliver.append({"path": step_path, "format": "step", "check": "step_parts",
                        "solids": len(parts), "volume": _r(sum(p.volume for p in parts)),
                        "size": _v(hi - lo)})
        texts.append(f"one STEP file of all {len(parts)} parts at {step_path}")
    step_call = call("export", format="step", path=step_path, objects=[p.name for p in parts])
    props: list[dict[str, Any]] = []
    if level in (3, 5):
        y = -0.15 if level == 3 else -0.2
        props = [box("Crate", (0.1, 0.1, 0.1), (0.0, y, 0.05)),
                 box("Pole", (0.04, 0.04, 0.3), (0.2, y, 0.15), kind="cylinder")]
        oracle += [add(b) for b in props]
        cons += [c for b in props for c in where(b)]
    if level == 5:
        col = rng.choice(sorted(COLOURS))
        oracle.append(call("set_material", name="Crate", color=COLOURS[col]))
        cons.append({"kind": "material", "object": "Crate", "color": COLOURS[col]})
    oracle.append(step_call)
    if level >= 3:
        glb_objs = [{"name": b["name"], "size": b["dimensions"], "centre": b["location"]}
                    for b in props] if level == 3 else []
        if level >= 4:
            glb_objs += [_glb_object(p, o) for p, o in zip(parts, offsets, strict=True)]
        glb_objs += [{"name": b["name"], "size": b["dimensions"], "centre": b["location"]}
                     for b in props] if level == 5 else []
        glb_path = f"{folder}/scene.glb"
        oracle.append(call("export", format="glb", path=glb_path,
                           objects=[o["name"] for o in glb_objs]))
        deliver.append({"path": glb_path, "format": "glb", "check": "glb_named",
                        "objects": glb_objs})
        texts.append(f"a GLB at {glb_path} of " + ", ".join(f"'{o['name']}'" for o in glb_objs)
                     + " keeping their names")
    if level >= 2:
        stl_parts = parts if level < 5 else parts
        per_part = level == 5
        groups = [[p] for p in stl_parts] if per_part or len(parts) == 1 else [stl_parts]
        for g in groups:
            path = (f"{folder}/{g[0].name.lower()}.stl" if len(g) == 1
                    else f"{folder}/parts.stl")
            oracle.append(call("export", format="stl", path=path, objects=[p.name for p in g],
                               unit="mm"))
            deliver.append({"path": path, "format": "stl", "check": "mesh_file", "unit": "mm",
                            "parts": [{"size": p.size, "volume": p.volume} for p in g]})
        texts.append("an STL in millimetres of " + (
            "each part, named after it (lower case), in the same folder" if per_part else
            (f"'{main.name}' at {deliver[-1]['path']}" if len(groups[0]) == 1 else
             f"all the parts together at {deliver[-1]['path']}")))
    if level == 1:
        prompt = f"Export the CAD part '{main.name}' as a STEP file to {step_path}."
    else:
        listing = "; ".join(p.text + (f", then moved so its origin is at ({o[0] / 1000:g}, 0, 0) m"
                                      if o[0] else "") for p, o in zip(parts, offsets, strict=True))
        extra = ""
        if props:
            extra = (" Add a box 'Crate' 0.1 x 0.1 x 0.1 m centred at "
                     f"{fmt(props[0]['location'])} and a cylinder 'Pole' 0.04 x 0.04 x 0.3 m "
                     f"centred at {fmt(props[1]['location'])}"
                     + (f", and colour 'Crate' {col} ({COLOURS[col]})." if level == 5 else "."))
        lead = rng.choice(("Model", "Build", "Make"))
        prompt = (f"{lead} {listing} (CAD in millimetres, scene in metres).{extra} Then deliver "
                  + "; ".join(texts) + ".")
    return TaskSpec(prompt=prompt, parameters={"parts": [p.kind for p in parts],
                                               "files": [d["path"] for d in deliver]},
                    oracle=oracle, constraints=cons, start=start, deliverables=deliver)
