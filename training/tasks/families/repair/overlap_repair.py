"""The `overlap_repair` family (domain repair): Move floating or sunken parts so each rests on its
support, touching and not intersecting.
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.recipes.phrases import NAME
from training.tasks.recipes.repair import GAP_TOL, REPAIR_WEIGHTS, add_box, box_item, rounded, to_cm
from training.tasks.recipes.scene import placed
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap

NAMES = (
    "Crate", "Drum", "Block", "Tin", "Brick", "Box", "Can", "Case", "Cube", "Jar", "Vase",
    "Lamp", "Clock", "Radio", "Book", "Bowl", "Kettle", "Bin", "Chest", "Pot",
)  # fmt: skip


def _off(rng: random.Random) -> float:
    """A visible vertical mistake: floating (+) or sunk (-) by 5-25 cm."""
    return to_cm(rng.choice((-1, 1)) * rng.uniform(0.05, 0.25))


def _box(rng: random.Random, name: str, lo: float = 0.15, hi: float = 0.5) -> dict[str, Any]:
    kind = rng.choice(("cube", "cube", "cylinder"))
    if kind == "cylinder":
        d = to_cm(rng.uniform(lo, hi))
        dims = [d, d, to_cm(rng.uniform(lo, hi))]
    else:
        dims = [to_cm(rng.uniform(lo, hi)) for _ in range(3)]
    return box_item(name, kind, dims, (0, 0, 0))


def overlap_repair(level: int, rng: random.Random) -> TaskSpec:
    names = iter(rng.sample(NAMES, len(NAMES)))
    start: list[dict[str, Any]] = []
    fixed: list[dict[str, Any]] = []  # supports the task leaves alone
    moved: list[tuple[dict[str, Any], str, str]] = []  # (final item, support, mistake)
    slid: list[tuple[dict[str, Any], str]] = []  # (final item, the neighbour it overlapped)

    def on_ground(x: float, y: float) -> None:
        it = _box(rng, next(names))
        it["location"] = [x, y, rounded(it["dimensions"][2] / 2)]
        moved.append((it, "the floor", "ground"))

    def stack(x: float, y: float, n: int) -> None:
        below = None
        for k in range(n):
            it = _box(rng, next(names), 0.2 + 0.1 * (n - k), 0.3 + 0.1 * (n - k))
            z0 = 0.0 if below is None else below["location"][2] + below["dimensions"][2] / 2
            it["location"] = [x, y, rounded(z0 + it["dimensions"][2] / 2)]
            moved.append((it, "the floor" if below is None else below["name"], "stack"))
            below = it

    def shelf(y: float, n: int, overlap: bool) -> None:
        h = to_cm(rng.uniform(0.8, 1.4))
        width = 0.7 * n + 0.4
        board = box_item(f"Shelf{len(fixed) + 1}", "cube", (width, 0.4, 0.04), (0, y, h))
        fixed.append(board)
        top = h + 0.02
        xs = [round(-width / 2 + 0.55 + 0.7 * k, 2) for k in range(n)]
        for k, x in enumerate(xs):
            it = _box(rng, next(names), 0.12, 0.3)
            it["dimensions"][1] = min(it["dimensions"][1], 0.3)
            if it["kind"] == "cylinder":
                it["dimensions"][0] = it["dimensions"][1]
            it["location"] = [x, y, rounded(top + it["dimensions"][2] / 2)]
            if overlap and k == n - 1:  # pushed into its left neighbour: slide it back out
                left = moved[-1][0]
                it["location"][0] = rounded(left["location"][0] + left["dimensions"][0] / 2
                                       + it["dimensions"][0] / 2 + to_cm(rng.uniform(0.1, 0.2)))
                slid.append((it, left["name"]))
            else:
                moved.append((it, board["name"], "shelf"))

    if level == 1:
        on_ground(to_cm(rng.uniform(-1, 1)), to_cm(rng.uniform(-1, 1)))
    elif level == 2:
        on_ground(-1.0, 0.0)
        on_ground(1.0, to_cm(rng.uniform(-0.5, 0.5)))
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
        start.append(add_box(b))
    oracle, texts, constraints = [], [], []
    for it, support, _why in moved:
        wrong = list(it["location"])
        wrong[2] = rounded(wrong[2] + _off(rng))
        start.append(add_box(it, wrong))
        oracle.append(call("transform", name=it["name"], location=it["location"]))
        constraints += placed(it, kind_check=False)
        if support == "the floor":
            constraints.append({"kind": "on_ground", "object": it["name"], "tol": GAP_TOL})
        else:
            constraints.append({"kind": "on_top", "upper": it["name"], "lower": support,
                                "tol": GAP_TOL})
    for it, left in slid:
        wrong = list(it["location"])
        shift = to_cm(rng.uniform(0.05, 0.1))
        # it overlaps its neighbour by `shift` and floats or sinks as well
        lx = next(m for m, _, _ in moved if m["name"] == left)
        final_x = rounded(lx["location"][0] + lx["dimensions"][0] / 2 + it["dimensions"][0] / 2)
        wrong[0] = rounded(final_x - shift)
        wrong[2] = rounded(wrong[2] + _off(rng))
        it["location"][0] = final_x
        start.append(add_box(it, wrong))
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


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(rf"^(?P<n>{NAME}) is floating above the floor or sunk into it\.",
         "{n} is not resting on the floor: it floats or is sunk into it.",
         "{n} sits at the wrong height, above the floor or into it.",
         "{n} floats above the floor or sinks into it.",
         "{n} is hovering above the floor or sunk into it.",
         "{n} is floating above the floor or sunk into it.",
         unseen=("Something's wrong with {n}: it hovers above the floor or cuts into it.",)),
    swap(r"float above what they should stand on or sink into it",
         "hover above their supports or sink into them",
         "are floating above or sunk into what should hold them",
         "don't sit on their supports (they float or are sunk)",
         "float above or sink into what they should stand on",
         "float above what they should stand on or sink into it",
         unseen=("are not sitting on what holds them: some hover, some are buried",)),
    swap(r"keeping (?P<w>its|each object's) x and y", "without changing {w} x and y",
         "leaving {w} x and y as they are", "keeping {w} x and y", "keeping {w} x and y unchanged",
         "keeping {w} x and y", unseen=("with {w} x and y staying where they are",)),
))


FAMILY = Family(
    name="overlap_repair",
    description="Move floating or sunken parts so each rests on its support, touching and not intersecting.",
    domain="repair",
    levels=(1, 2, 3, 4, 5),
    weights=REPAIR_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("scene", extra=("boolean",)),
    wordings=WORDINGS,
    make=overlap_repair,
)
