"""The `mirror_pattern_edits` family (domain edits): Mirror a prepared half-model, pattern a
feature in a row or circle; mirror then pattern.
"""

from __future__ import annotations

import random

from training.tasks.recipes.assembly import (
    ASSEMBLY_WEIGHTS,
    POS_TOL,
    SIZE_TOL,
    add,
    circle_points,
    item,
    m,
    placed,
    r2,
    r4,
)
from training.tasks.recipes.phrases import N
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap

# ================================================================== mirror and pattern edits


def _half_model(rng: random.Random, name: str, x0: float, y0: float):
    """One of a mirrored pair of L-shaped end supports, its origin on the pair's mirror plane
    x = x0: a base slab from x0 + g to x0 + a with an upright lug at its far end. (Off the
    plane, so the mirrored whole is two closed pieces.) Start calls, and the facts."""
    a, b, c = r2(rng.uniform(0.3, 0.5)), r2(rng.uniform(0.3, 0.5)), r2(rng.uniform(0.08, 0.15))
    g = r2(rng.uniform(0.05, 0.12))
    u, h = r2(rng.uniform(0.06, 0.1)), r2(rng.uniform(0.2, 0.4))
    slab = item(name, "cube", (2 * a, b, c), (x0, y0, c / 2))
    cut = item(f"{name}Cut", "cube", (2 * a, b + 0.2, c + 0.2), (x0 - a + g, y0, c / 2))
    lug = item(f"{name}Lug", "cube", (u, b, h), (x0 + a - u / 2, y0, c + h / 2 - 0.01))
    start = [add(slab), add(cut), call("boolean", target=name, cutter=cut["name"],
                                       operation="difference"),
             add(lug), call("boolean", target=name, cutter=lug["name"], operation="union")]
    half_volume = (a - g) * b * c + u * b * (h - 0.01)
    return start, {"a": a, "b": b, "c": c, "g": g, "u": u, "h": h, "volume": half_volume,
                   "x0": x0, "y0": y0}


def _mirror_checks(name: str, f: dict, copies: int = 1, gap: float = 0.0) -> list[dict]:
    width = 2 * f["a"]
    total = copies * width + (copies - 1) * gap
    height = f["c"] + f["h"] - 0.01
    lo_x = f["x0"] - f["a"]
    size = [r4(total), f["b"], r4(height)]
    centre = [r4(lo_x + total / 2), f["y0"], r4(height / 2)]
    lugs = [[r4(lo_x + k * (width + gap) + f["u"] / 2), f["y0"], r4(f["c"] + f["h"] / 2)]
            for k in range(copies)]
    slabs = [[r4(lo_x + k * (width + gap) + (f["a"] - f["g"]) / 2), f["y0"], r4(f["c"] / 2)]
             for k in range(copies)]
    middles = [[r4(lo_x + width / 2 + k * (width + gap)), f["y0"], r4(f["c"] / 2)]
               for k in range(copies)]
    return [
        {"kind": "size", "object": name, "value": size, "tol_rel": SIZE_TOL},
        {"kind": "position", "object": name, "value": centre, "tol": POS_TOL},
        {"kind": "mesh_volume", "object": name, "value": round(2 * copies * f["volume"], 6),
         "tol_rel": 0.01},
        {"kind": "occupancy", "object": name, "filled": lugs + slabs, "empty": middles},
    ]


def _circle_pattern(rng: random.Random, n: int, turn: bool, tag: str = "Post"):
    """A post (or a radial fin when `turn`) at angle 0 on a circle; copies at 360/n steps."""
    cx, cy = r2(rng.uniform(-0.5, 0.5)), r2(rng.uniform(2.0, 2.5))
    radius = r2(rng.uniform(0.5, 0.8))
    if turn:
        dims = (r2(rng.uniform(0.2, 0.3)), 0.04, r2(rng.uniform(0.2, 0.4)))
        kind = "cube"
    else:
        d = r2(rng.uniform(0.1, 0.2))
        dims, kind = (d, d, r2(rng.uniform(0.3, 0.6))), "cylinder"
    pts = circle_points(cx, cy, radius, n)
    items = [item(f"{tag}{k + 1}", kind, dims, (x, y, dims[2] / 2),
                  (0, 0, r4(360 * k / n)) if turn else (0, 0, 0))
             for k, (x, y) in enumerate(pts)]
    start = [add(items[0])]
    oracle = []
    for it in items[1:]:
        oracle.append(call("duplicate", name=items[0]["name"], new_name=it["name"],
                           location=it["location"]))
        if turn:
            oracle.append(call("transform", name=it["name"], rotation_deg=it["rotation_deg"]))
    cons = [c for it in items for c in placed(it)]
    what = "radial fin" if turn else "post"
    x0, y0 = items[0]["location"][:2]
    text = (f"'{items[0]['name']}' is a {what} at ({x0:g}, {y0:g}) m on a {m(radius)} radius circle "
            f"whose centre is {m(radius)} from it in -x. "
            f"Pattern it into {n} around that circle, evenly spaced, copies '{tag}2'..'{tag}{n}' "
            f"counter-clockwise")
    text += " each turned to face out like the first (turned 360/n° more each)." if turn else "."
    return start, oracle, cons, text


def mirror_pattern_edits(level: int, rng: random.Random) -> TaskSpec:
    start, oracle, cons, texts = [], [], [], []
    n_halves = {1: 1, 2: 1, 3: 0, 4: 2, 5: 3}[level]
    circle = {1: 0, 2: 0, 3: rng.choice((4, 5)), 4: 3, 5: rng.choice((6, 7))}[level]
    if level == 2 and rng.random() < 0.5:
        n_halves, circle = 0, 3
    names = rng.sample(("Bracket", "Clamp", "Saddle", "Yoke", "Cradle"), max(n_halves, 1))
    objects = 0
    for i in range(n_halves):
        name = names[i]
        x0, y0 = float(-3 + 3 * i), r2(rng.uniform(-1.0, 0.0))
        s, f = _half_model(rng, name, x0, y0)
        start += s
        objects += 1
        oracle.append(call("modifier", name=name, kind="mirror", axis="X"))
        text = (f"'{name}' is the right-hand one of a pair of end supports (a base slab with a lug "
                f"at its +x end); its origin is on the pair's mirror plane x = {x0:g} m. Mirror "
                "it across that plane (X) to make the pair, one object")
        copies, gap = 1, 0.0
        if level >= 2 and not (level == 2 and circle):
            copies, gap = rng.choice((2, 3)), r2(rng.uniform(0.05, 0.15))
            if level == 4 or level == 5:
                copies = 2
            offset = round((2 * f["a"] + gap) / (2 * f["a"]), 6)
            oracle.append(call("modifier", name=name, kind="array", count=copies,
                               offset=[offset, 0, 0]))
            text += (f", then repeat the pair {copies} times along +x with {m(gap)} gaps "
                     "between repeats (an array modifier, still one object)")
        texts.append(text + ".")
        cons += _mirror_checks(name, f, copies, gap)
    if circle:
        s, o, c, t = _circle_pattern(rng, circle, turn=level == 5, tag="Fin" if level == 5 else "Post")
        start += s
        oracle += o
        cons += c
        texts.append(t)
        objects += circle
    cons.append({"kind": "count", "equal": objects})
    return TaskSpec(prompt=" ".join(texts), parameters={"halves": n_halves, "circle": circle},
                    oracle=oracle, constraints=cons, start=start)


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"Mirror it across that plane \(X\) to make the pair, one object",
         "Mirror it across that plane (X) to make the pair, as one object",
         "Make the pair by mirroring it across that plane (X), one object",
         "Mirror it in that plane (X) so the pair is one object",
         "Mirror it over that plane (X) into a pair, one object",
         "Mirror it across that plane (X) to make the pair, one object",
         unseen=("Reflect it through that plane (X) so both halves form one object",)),
    swap(rf"repeat the pair (?P<n>\d+) times along \+x with (?P<g>{N}) m gaps between repeats",
         "repeat the pair {n} times along +x with {g} m gaps between them",
         "repeat the pair {n} times in +x, gaps of {g} m between repeats",
         "array the pair {n} times along +x with {g} m gaps between repeats",
         "repeat the pair {n} times along +x, leaving {g} m gaps between repeats",
         "repeat the pair {n} times along +x with {g} m gaps between repeats",
         unseen=("repeat the pair {n} times heading in +x, {g} m of gap between neighbours",)),
    swap(r"evenly spaced", "equally spaced", "spaced evenly", "evenly spaced", "at equal spacing",
         "evenly spaced", unseen=("at even intervals",)),
    swap(r"counter-clockwise", "anticlockwise", "counterclockwise", "counter-clockwise",
         "anticlockwise", "counter-clockwise", unseen=("going anticlockwise",)),
))


FAMILY = Family(
    name="mirror_pattern_edits",
    description="Mirror a prepared half-model, pattern a feature in a row or circle; mirror then pattern.",
    domain="edits",
    levels=(1, 2, 3, 4, 5),
    weights=ASSEMBLY_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("scene", extra=("modifier", "join")),
    wordings=WORDINGS,
    make=mirror_pattern_edits,
)
