"""The `rooms` family (domain scenes): Furnish a room: floor, walls, table, chairs, bed and rug
placed by relations.
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.config import RELATION_WEIGHTS
from training.tasks.recipes.boxes import (
    POS_TOL,
    add,
    box,
    rounded,
    size_text,
    where,
)
from training.tasks.recipes.phrases import LEADS
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap

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
                    "spacing": rounded(step)})
        rel.append({"kind": "symmetric", "a": names[0], "b": names[-1], "axis": "x",
                    "tol": POS_TOL})
    return chairs, text, rel


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


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"just outside the floor's", "right outside the floor's",
         "along the outside of the floor's", "just outside the floor's",
         "immediately outside the floor's", "just outside the floor's",
         unseen=("hugging the outside of the floor's",)),
    swap(r" Everything stands on the floor\.", " All of it stands on the floor.",
         " Everything rests on the floor.", " Everything sits on the floor.",
         " It all stands on the floor.", " Everything stands on the floor.",
         unseen=(" Nothing floats: it all stands on the floor.",)),
    swap(r"against the (?P<w>north|south|east|west) wall, centred on it",
         "centred against the {w} wall", "against the middle of the {w} wall",
         "up against the {w} wall, centred", "against the {w} wall, centred along it",
         "against the {w} wall, centred on it",
         unseen=("pushed to the {w} wall, in the middle of it",)),
    *LEADS,
))


FAMILY = Family(
    name="rooms",
    description="Furnish a room: floor, walls, table, chairs, bed and rug placed by relations.",
    domain="scenes",
    levels=(1, 2, 3, 4, 5),
    weights=RELATION_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("scene", extra=("parent",)),
    wordings=WORDINGS,
    make=rooms,
)
