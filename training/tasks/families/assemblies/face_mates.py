"""The `face_mates` family (domain assemblies): Mate parts face to face: on top, against a side,
flush edges or centred; chains and dowels.
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.recipes.assembly import (
    ASSEMBLY_WEIGHTS,
    GUARD,
    add,
    item,
    placed,
    r2,
)
from training.tasks.recipes.phrases import NAME
from training.tasks.recipes.scene import fmt
from training.tasks.spec import Family, TaskSpec
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


def bbox(it: dict[str, Any]) -> tuple[list[float], list[float]]:
    """Box of an unrotated item."""
    lo = [it["location"][i] - it["dimensions"][i] / 2 for i in range(3)]
    hi = [it["location"][i] + it["dimensions"][i] / 2 for i in range(3)]
    return lo, hi


FACE_WORDS = {"+z": "on top of", "+x": "against the +x side of", "+y": "against the +y side of",
              "-x": "against the -x side of"}


OPPOSITE = {"+": "-", "-": "+"}


MATE_NAMES = ("Riser", "Cap", "Spacer", "Pad", "Block", "Shim", "Stop", "Cleat", "Post", "Lug",
              "Tab", "Rib", "Foot", "Boss")


def _mate(rng: random.Random, target: dict, name: str, face: str, dims: list[float]):
    """Place a box of `dims` on `face` of `target`: flush, bottoms aligned on sides, centred or
    edge-aligned across. Returns the item, the constraints, the sentence."""
    lo, hi = bbox(target)
    k = "xyz".index(face[1])
    loc = [0.0, 0.0, 0.0]
    loc[k] = hi[k] + dims[k] / 2 if face[0] == "+" else lo[k] - dims[k] / 2
    cons = [{"kind": "flush", "a": name, "face_a": OPPOSITE[face[0]] + face[1], "b": target["name"],
             "face_b": face, "tol": 0.003}]
    words = [f"{FACE_WORDS[face]} '{target['name']}' (flush)"]
    centred = []
    tangential = [i for i in range(3) if i != k]
    for i in tangential:
        ax = "xyz"[i]
        if i == 2:  # side mates: bottoms aligned
            loc[2] = lo[2] + dims[2] / 2
            cons.append({"kind": "flush", "a": name, "face_a": "-z", "b": target["name"],
                         "face_b": "-z", "tol": 0.003})
            words.append("bottoms level")
            continue
        how = rng.choice(("centre", "-", "+"))
        if how == "centre":
            loc[i] = (lo[i] + hi[i]) / 2
            cons.append({"kind": "aligned", "objects": [name, target["name"]], "axes": ax,
                         "tol": 0.003})
            centred.append(ax)
        else:
            loc[i] = lo[i] + dims[i] / 2 if how == "-" else hi[i] - dims[i] / 2
            cons.append({"kind": "flush", "a": name, "face_a": how + ax, "b": target["name"],
                         "face_b": how + ax, "tol": 0.003})
            words.append(f"its {how}{ax} face flush with the {how}{ax} face of '{target['name']}'")
    if centred:
        words.insert(1, "centred on it" + ("" if len(centred) == 2 else f" in {centred[0]}"))
    it = item(name, "cube", dims, loc)
    text = f"a box '{name}' {fmt(it['dimensions'])} " + ", ".join(words)
    return it, cons + placed(it), text


def _dowel(a: dict, b: dict, face: str, name: str) -> dict:
    """A dowel across the contact between `b` and the face `face` of `a`: centred on the
    contact patch, perpendicular to it, half in each part."""
    la, ha = bbox(a)
    lb, hb = bbox(b)
    k = "xyz".index(face[1])
    loc = [((max(la[i], lb[i]) + min(ha[i], hb[i])) / 2) for i in range(3)]
    loc[k] = ha[k] if face[0] == "+" else la[k]
    rot = {0: (0, 90, 0), 1: (90, 0, 0), 2: (0, 0, 0)}[k]
    return item(name, "cylinder", (0.04, 0.04, 0.1), loc, rot)


def face_mates(level: int, rng: random.Random) -> TaskSpec:
    n = {1: 1, 2: 2, 3: 4, 4: 6, 5: 8}[level]
    base_dims = [r2(rng.uniform(0.9, 1.4)), r2(rng.uniform(0.7, 1.1)), r2(rng.uniform(0.3, 0.5))]
    base = item("Base", "cube", base_dims,
                (r2(rng.uniform(-1, 1)), r2(rng.uniform(-1, 1)), base_dims[2] / 2))
    names = rng.sample(MATE_NAMES, n)
    placed_items, oracle, cons, texts = [base], [], placed(base, GUARD), []
    for j, name in enumerate(names):
        # L1-L2 mate onto the base; from L3 a chain, each part onto the one before.
        target = base if level <= 2 else placed_items[-1]
        face = "+z" if level == 1 else rng.choice(("+z", "+x", "+y") if level > 2 else
                                                  ("+z", "+x", "+y", "-x"))
        dims = [r2(max(0.12, target["dimensions"][i] * rng.uniform(0.6, 0.9))) for i in range(3)]
        it, c, text = _mate(rng, target, name, face, dims)
        placed_items.append(it)
        oracle.append(add(it))
        cons += c
        if level == 5:
            d = _dowel(target, it, face, f"Dowel{j + 1}")
            if j > 0:  # the first part sits on the base with no dowel: 8 parts, 7 dowels
                oracle.append(add(d))
                cons += placed(d)
                text += f", joined to '{target['name']}' by a dowel '{d['name']}'"
        texts.append(text)
    if level == 5:
        lead = ("Build the stack in order, each part onto the one before: ")
        tail = (" Each dowel is a cylinder 0.04 m across and 0.1 m long, centred on the contact "
                "patch between the two parts, across the contact face, half in each part.")
    else:
        lead, tail = ("Add " if level <= 2 else "Build in order: "), ""
    cons.append({"kind": "count", "equal": 1 + len(oracle)})
    prompt = (f"'Base' is a box {fmt(base['dimensions'])} centred at {fmt(base['location'])}. "
              + lead + "; ".join(texts) + "." + tail)
    return TaskSpec(prompt=prompt, parameters={"parts": n}, oracle=oracle, constraints=cons,
                    start=[add(base)])


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(rf"(?P<a>its [-+][xyz] face) flush with (?P<b>the [-+][xyz] face of {NAME})",
         "{a} lined up with {b}", "{a} in line with {b}", "{a} aligned with {b}",
         "{a} level with {b}", "{a} flush with {b}",
         unseen=("{a} in the same plane as {b}",)),
    swap(r"\(flush\)", "(faces touching)", "(flush, touching)", "(flush against it)",
         "(face to face)", "(flush)", unseen=("(no gap between them)",)),
    swap(r"bottoms level", "bottoms aligned", "with level bottoms", "bottom faces level",
         "bottoms flush", "bottoms level", unseen=("sharing a bottom plane",)),
    swap(r"Build in order: ", "Build, in order: ", "In this order, build: ", "Add in order: ",
         "Build these in order: ", "Build in order: ", unseen=("In sequence, add: ",)),
))


FAMILY = Family(
    name="face_mates",
    description="Mate parts face to face: on top, against a side, flush edges or centred; chains and dowels.",
    domain="assemblies",
    levels=(1, 2, 3, 4, 5),
    weights=ASSEMBLY_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("assembly"),
    wordings=WORDINGS,
    make=face_mates,
)
