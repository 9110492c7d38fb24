"""The `requests` family (domain scenes): short requests as a modeller types them into the
studio's Agent dock: "add a red cube named Box at 1, 0, 0.5", "make Box1 twice as tall",
"delete Ball". Sizes left unsaid are 1 m, positions are bare numbers, names come with or
without quotes and colours are words (the palette's hex, which the goal never gives).

Level 1 is one request (one call); levels 2-5 chain 2, 4, 8 and 15 calls' worth of them (a
session's worth at level 5). A new object with a colour ("add a red cube ...") is two calls:
the object, then its material. Bare positions are metres, the studio's unit; a bracketed one
says its unit, "at (1, 0, 0.5) m".
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.config import RELATION_WEIGHTS
from training.tasks.recipes.phrases import LEADS
from training.tasks.recipes.scene import (
    COLOURS,
    NAMES,
    POS_TOL,
    SIZE_TOL,
    add_call,
    placed,
    r05,
    random_items,
)
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap

# How a person names a kind (the tool's kind, then the words for it).
KIND_SAID = {"cube": ("cube", "box"), "cylinder": ("cylinder",), "uv_sphere": ("sphere", "ball"),
             "cone": ("cone",)}  # fmt: skip
# Names people give objects in the studio, besides the generator's.
NEW_NAMES = ("Box", "Box1", "Box2", "Cube1", "Stand", "Cap", "Lamp", "Stool", "Knob", "Pole")
SAID = r"'[^']+'|[A-Z][A-Za-z0-9_]*"  # a name as a request says it: quoted or not
CALLS = {1: 1, 2: 2, 3: 4, 4: 8, 5: 15}
EDITS = ("colour", "delete", "scale", "move")
SCALES = {"twice as tall": (1, 1, 2), "half as tall": (1, 1, 0.5), "twice as wide": (2, 1, 1),
          "twice as big": (2, 2, 2), "half the size": (0.5, 0.5, 0.5)}  # fmt: skip
MOVES = {"up": (2, 1), "down": (2, -1), "along x": (0, 1), "along y": (1, 1),
         "back along x": (0, -1)}  # fmt: skip


def _a(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _num(x: float) -> str:
    return f"{x:g}"


def _named(rng: random.Random, name: str) -> str:
    return rng.choice((name, f"'{name}'"))


def _new_item(rng: random.Random, name: str, cell: tuple[int, int]) -> tuple[dict[str, Any], str]:
    """A new primitive and how the request says it: size unsaid (1 m) or said in a few words."""
    kind = rng.choice(("cube", "cube", "cylinder", "uv_sphere", "cone"))
    word = rng.choice(KIND_SAID[kind])
    size_said = rng.random() < 0.4
    dims = [1.0, 1.0, 1.0]
    size = ""
    if size_said:
        if kind == "cube":
            s = rng.choice((0.5, 1.5, 2.0))
            dims, size = [s, s, s], f", {_num(s)} m on each side,"
        elif kind == "uv_sphere":
            s = rng.choice((0.5, 1.5, 2.0))
            dims, size = [s, s, s], f", {_num(s)} m across,"
        else:
            h = rng.choice((0.5, 1.5, 2.0, 3.0))
            dims, size = [1.0, 1.0, h], f", {_num(h)} m tall,"
    on_ground = rng.random() < 0.3
    x = cell[0] * 3.0 + r05(rng.uniform(-0.5, 0.5))
    y = cell[1] * 3.0 + r05(rng.uniform(-0.5, 0.5))
    z = dims[2] / 2 if on_ground else rng.choice((dims[2] / 2, dims[2] / 2 + 1.0))
    at = (f"on the ground at {_num(x)}, {_num(y)}" if on_ground
          else rng.choice((f"at {_num(x)}, {_num(y)}, {_num(z)}", f"at ({_num(x)}, {_num(y)}, {_num(z)}) m")))
    it = {"name": name, "kind": kind, "dimensions": dims, "location": [x, y, z],
          "rotation_deg": [0.0, 0.0, 0.0]}  # fmt: skip
    return it, f"{word} named {_named(rng, name)}{size} {at}"


def _edit(rng: random.Random, it: dict[str, Any], op: str) -> tuple[str, dict, list[dict]]:
    """One request on an object of the scene: (text, oracle call, constraints)."""
    name = it["name"]
    said = _named(rng, name)
    if op == "colour":
        colour = rng.choice(sorted(COLOURS))
        text = rng.choice((f"make {said} {colour}", f"paint {said} {colour}", f"colour {said} {colour}"))
        checks = [{"kind": "material", "object": name, "color": COLOURS[colour]}]
        checks += placed(it, kind_check=False, guard=True)
        return text, call("set_material", name=name, color=COLOURS[colour]), checks
    if op == "delete":
        text = rng.choice((f"delete {said}", f"remove {said}", f"get rid of {said}"))
        return text, call("delete", name=name), [{"kind": "absent", "object": name}]
    if op == "scale":
        how = rng.choice(sorted(SCALES))
        f = SCALES[how]
        dims = [round(d * k, 4) for d, k in zip(it["dimensions"], f, strict=True)]
        # the size is what was asked; where its centre ends up is the person's to leave open
        checks = [{"kind": "size", "object": name, "value": dims, "tol_rel": SIZE_TOL}]
        return f"make {said} {how}", call("transform", name=name, scale=list(f)), checks
    how = rng.choice(sorted(MOVES))
    axis, sign = MOVES[how]
    d = rng.choice((0.5, 1.0, 2.0))
    loc = list(it["location"])
    loc[axis] = round(loc[axis] + sign * d, 4)
    text = f"move {said} {how} by {_num(d)} m" if how in ("up", "down") else f"move {said} {_num(d)} m {how}"
    checks = [{"kind": "position", "object": name, "value": loc, "tol": POS_TOL},
              {"kind": "size", "object": name, "value": it["dimensions"], "tol_rel": SIZE_TOL}]
    return text, call("transform", name=name, location=loc), checks


def requests(level: int, rng: random.Random) -> TaskSpec:
    budget = CALLS[level]
    n_start = rng.randint(1, 2) + CALLS[level] // 2
    start = random_items(rng, n_start)
    taken = {it["name"] for it in start}
    free_names = [n for n in NEW_NAMES + NAMES if n not in taken]
    rng.shuffle(free_names)
    cells = [(x, y) for x in range(-3, 4) for y in range(-3, 4)]
    used = {(round(it["location"][0] / 3), round(it["location"][1] / 3)) for it in start}
    free_cells = [c for c in cells if c not in used]
    rng.shuffle(free_cells)
    texts, oracle, constraints = [], [], []
    touched: set[str] = set()
    added = 0
    while len(oracle) < budget:
        left = budget - len(oracle)
        editable = [it for it in start if it["name"] not in touched]
        ops = ["add"] + (["add_coloured"] if left >= 2 else []) + (list(EDITS) if editable else [])
        op = rng.choice(ops)
        if op in ("add", "add_coloured"):
            it, said = _new_item(rng, free_names.pop(), free_cells.pop())
            added += 1
            oracle.append(add_call(it))
            constraints += placed(it)
            if op == "add_coloured":
                colour = rng.choice(sorted(COLOURS))
                texts.append(f"add {_a(colour)} {colour} {said}")
                oracle.append(call("set_material", name=it["name"], color=COLOURS[colour]))
                constraints.append({"kind": "material", "object": it["name"], "color": COLOURS[colour]})
            else:
                texts.append(f"add a {said}")
            continue
        it = rng.choice(editable)
        touched.add(it["name"])
        text, step, checks = _edit(rng, it, op)
        texts.append(text)
        oracle.append(step)
        constraints += checks
    for it in start:
        if it["name"] not in touched:
            constraints += placed(it, kind_check=False, guard=True)
    deleted = sum(1 for c in constraints if c["kind"] == "absent")
    constraints.append({"kind": "count", "equal": n_start + added - deleted})
    joined = texts[0] if len(texts) == 1 else ", ".join(texts[:-1]) + " and " + texts[-1]
    prompt = joined[0].upper() + joined[1:] + "."
    return TaskSpec(
        prompt=prompt,
        parameters={"start": start, "requests": texts},
        oracle=oracle,
        constraints=constraints,
        start=[add_call(it) for it in start],
    )


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases, then
# the shared ones (training/tasks/recipes/phrases.py). No swap adds or drops a number.
WORDINGS = Wordings(swaps=(
    swap(r" and (?P<v>add|make|paint|colour|delete|remove|get rid of|move) ",
         " and {v} ", ", then {v} ", "; {v} ", ", and then {v} ", " and also {v} ",
         unseen=(". After that, {v} ", ", plus {v} ")),
    swap(rf"make (?P<n>{SAID}) twice as tall",
         "make {n} twice as high", "double the height of {n}", "make {n} double its height",
         "make {n} twice the height", "make {n} twice as tall",
         unseen=("give {n} twice the height", "stretch {n} to twice its height")),
    swap(rf"(?:get rid of|remove) (?P<n>{SAID})",
         "delete {n}", "remove {n}", "throw away {n}", "take out {n}", "get rid of {n}",
         unseen=("lose {n}", "bin {n}")),
    *LEADS,
))


FAMILY = Family(
    name="requests",
    description="Short requests as typed in the studio: add, colour, resize, move, delete.",
    domain="scenes",
    levels=(1, 2, 3, 4, 5),
    weights=RELATION_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("scene"),
    wordings=WORDINGS,
    make=requests,
)
