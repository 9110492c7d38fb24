"""The `dimension_edits` family (domain edits): Change one dimension of a prepared CAD part (a
hole, a length, a thickness), keep the rest.
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.recipes.assembly import (
    EDIT_WEIGHTS,
    GUARD,
)
from training.tasks.recipes.cad_edit import (
    CadPart,
    cad_script,
    place_at,
)
from training.tasks.recipes.phrases import CAD
from training.tasks.recipes.scene import fmt
from training.tasks.spec import Family, TaskSpec
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


def random_part(kind: str, name: str, rng: random.Random) -> CadPart:
    # Fillet radii stay clear of every hole radius (before and after an edit): the `holes`
    # check counts cylindrical faces of a radius, and a fillet is one.
    if kind == "plate":
        L, W = rng.choice((80, 100, 120)), rng.choice((50, 60, 70))
        d = rng.choice((5, 6, 8))
        return CadPart(kind, name, L=L, W=W, T=rng.choice((5, 6, 8)), d=d, sx=L - 4 * d, sy=W - 4 * d)
    if kind == "block":
        L = rng.choice((80, 100, 120))
        return CadPart(kind, name, L=L, W=rng.choice((40, 50)), T=rng.choice((15, 20, 25)),
                       r=rng.choice((8, 10)), d=rng.choice((6, 8, 10)), nx=rng.choice((2, 3)),
                       sx=L // 3)
    if kind == "flange":
        D = rng.choice((70, 80, 90))
        return CadPart(kind, name, D=D, T=rng.choice((8, 10, 12)), bore=rng.choice((20, 24, 28)),
                       n=rng.choice((4, 6)), db=rng.choice((5, 6)), R=round((D / 2 + 14) / 2, 3))
    if kind == "mount":
        return CadPart(kind, name, L=rng.choice((100, 120)), W=rng.choice((70, 80)),
                       T=rng.choice((10, 12)), r=rng.choice((9, 11)), d=6, bore=10, cb=16, cbd=4,
                       n=rng.choice((4, 6)), db=4, R=rng.choice((18, 20)))
    raise ValueError(kind)


def part_checks(part: CadPart, location_m=(0.0, 0.0, 0.0), weight: float = 1.0) -> list[dict]:
    """The part is exactly `part` where it should be, and has its holes."""
    loc = [round(v * 1000, 6) for v in location_m]
    out = [{"kind": "part_at", "object": part.name, "script": cad_script(part.plan()),
            "location_mm": loc}]
    out += [{"kind": "holes", "object": part.name, "diameter": d, "count": c}
            for d, c in part.holes()]
    return [{**c, "weight": weight} for c in out] if weight != 1.0 else out


# One edit per part kind: (parameter changes, what the prompt says). Each keeps the part valid.
def _edit(part: CadPart, rng: random.Random, which: str | None = None) -> tuple[CadPart, str]:
    p = part.p
    k = part.kind
    choices = {
        "plate": ["d", "T", "L"],
        "block": ["d", "T", "L"],
        "flange": ["bore", "D", "n"],
        "mount": ["T", "db", "bore"],
    }[k]
    what = which or rng.choice(choices)
    if what == "d":
        new = p["d"] + rng.choice((1, 2))
        return part.with_(d=new), f"make its {p['d']:g} mm holes {new:g} mm"
    if what == "T":
        new = p["T"] + rng.choice((-2, 2, 4))
        return part.with_(T=new), f"change its thickness from {p['T']:g} to {new:g} mm"
    if what == "L":
        new = p["L"] + rng.choice((20, -20))
        changes: dict[str, Any] = {"L": new}
        text = f"change its length (x) from {p['L']:g} to {new:g} mm"
        if k == "plate":
            changes["sx"] = new - 4 * p["d"]
            text += f", the holes moving with the ends to x = ±{(new - 4 * p['d']) / 2:g} mm"
        else:
            text += ", the holes staying where they are"
        return part.with_(**changes), text
    if what == "bore":
        new = p["bore"] + rng.choice((2, 4))
        return part.with_(bore=new), f"open its {p['bore']:g} mm centre hole to {new:g} mm"
    if what == "D":
        new = p["D"] + 10
        return part.with_(D=new), f"make it {new:g} mm across instead of {p['D']:g} mm"
    if what == "n":
        new = 8 if p["n"] != 8 else 6
        return part.with_(n=new), f"give it {new} bolt holes instead of {p['n']} (same circle)"
    if what == "db":
        new = p["db"] + 1
        return part.with_(db=new), f"make its {p['db']:g} mm bolt-circle holes {new:g} mm"
    raise ValueError(what)


def _edit_plan(old: CadPart, new: CadPart) -> list[dict[str, Any]]:
    """The fewest calls from `old` to `new`: a bigger hole is drilled over the old one; any
    other change rebuilds the part (the rebuild keeps its placement)."""
    diff = [k for k in new.p if new.p[k] != old.p[k]]
    if diff == ["d"] and new.p["d"] > old.p["d"] and old.kind in ("plate", "block"):
        return [new.plan()[-1]]
    if diff == ["bore"] and old.kind == "flange":
        return [new.plan()[1]]
    if diff == ["db"] and old.kind == "mount":
        return new.plan()[-2:]
    return new.plan()


def dimension_edits(level: int, rng: random.Random) -> TaskSpec:
    if level == 1:
        jobs = [(rng.choice(("plate", "block")), "d")]
        keep: list[str] = []
    elif level == 2:
        jobs = [("plate", rng.choice(("T", "L")))]
        keep = []
    elif level == 3:
        jobs = [(rng.choice(("block", "flange")), None)]
        keep = []
        if jobs[0][0] == "block":
            jobs = [("block", rng.choice(("T", "L")))]
        else:
            jobs = [("flange", rng.choice(("D", "n")))]
    elif level == 4:
        jobs = [("plate", rng.choice(("T", "L"))), ("flange", rng.choice(("D", "n")))]
        keep = ["block"]
    else:
        jobs = [("mount", "T"), ("flange", rng.choice(("D", "n"))),
                ("block", rng.choice(("T", "L"))), ("plate", rng.choice(("T", "L"))),
                ("cover", rng.choice(("T", "L")))]
        keep = ["disc"]
    names = {"plate": "Plate", "block": "Block", "flange": "Flange", "mount": "Mount",
             "cover": "Cover", "disc": "Disc"}
    shapes = {"cover": "plate", "disc": "flange"}  # a second plate, a second flange
    kinds = [k for k, _ in jobs] + keep
    spots = [(0.0, 0.0, 0.0), (0.2, 0.0, 0.0), (0.0, 0.2, 0.0), (0.2, 0.2, 0.0), (0.4, 0.0, 0.0),
             (0.4, 0.2, 0.0)]
    start, oracle, cons, texts, listing = [], [], [], [], []
    for i, kind in enumerate(kinds):
        part = random_part(shapes.get(kind, kind), names[kind], rng)
        loc = spots[i] if len(kinds) > 1 else (0.0, 0.0, 0.0)
        start += part.plan() + place_at(part.name, loc)
        where = f" (placed at {fmt(loc)})" if any(loc) else ""
        listing.append(part.text() + where)
        if i < len(jobs):
            new, text = _edit(part, rng, jobs[i][1])
            oracle += _edit_plan(part, new)
            cons += part_checks(new, loc)
            texts.append(f"in '{part.name}', {text}")
        else:
            cons += part_checks(part, loc, GUARD)
    cons.append({"kind": "count", "equal": len(kinds)})
    prompt = ("The scene holds " + "; ".join(listing) + ". Edit it: " + "; ".join(texts)
              + ". Keep every other dimension, feature and placement as it is.")
    return TaskSpec(prompt=prompt, parameters={"parts": kinds, "edits": texts}, oracle=oracle,
                    constraints=cons, start=start)


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"^The scene holds ", "The scene has ", "In the scene there is ", "The scene contains ",
         "Here is ", "The scene holds ",
         unseen=("You'll find this in the scene: ", "Already in the scene: ")),
    swap(r"Edit it: ", "The change: ", "Change: ", "Edit: ", "Please change it: ", "Edit it: ",
         unseen=("What needs changing: ",)),
    swap(r" Keep every other dimension, feature and placement as it is\.",
         " Everything else stays the same.", " Keep all other dimensions, features and placement.",
         " Leave every other dimension, feature and placement alone.", " Nothing else changes.",
         " Keep every other dimension, feature and placement as it is.",
         unseen=(" All other sizes, features and positions must not change.",)),
    *CAD,
))


FAMILY = Family(
    name="dimension_edits",
    description="Change one dimension of a prepared CAD part (a hole, a length, a thickness), keep the rest.",
    domain="edits",
    levels=(1, 2, 3, 4, 5),
    weights=EDIT_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("cad"),
    wordings=WORDINGS,
    make=dimension_edits,
)
