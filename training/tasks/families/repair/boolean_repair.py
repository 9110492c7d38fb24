"""The `boolean_repair` family (domain repair): Fix a drilled CAD plate whose booleans went wrong:
blind, misplaced, leftover, unioned cutters.
"""

from __future__ import annotations

import math
import random
from typing import Any

from training.tasks.recipes.repair import REPAIR_WEIGHTS, rounded
from training.tasks.recipes.scene import counted
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap

# ================================================================ boolean_repair

FAULTS = ("short", "misplaced", "leftover", "wrong_op")


FAULT_CALLS = {"short": 1, "misplaced": 2, "leftover": 1, "wrong_op": 2}


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
    cells = [(rounded(-pitch * (cols - 1) / 2 + pitch * (k % cols)),
              rounded(-pitch * (max(rows, 2) - 1) / 2 + pitch * (k // cols))) for k in range(n)]
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
                    call("transform", name=cname, location=[rounded(v, 6) for v in at])]

        if fault == "short":
            start.append(call("cad_hole", name=name, diameter=d, depth=rounded(T * 0.4),
                              positions=[[x, y]]))
            oracle.append(call("cad_hole", name=name, diameter=d, positions=[[x, y]]))
            texts.append(f"the hole at ({x:g}, {y:g}) mm does not go through")
        elif fault == "misplaced":
            dx = rng.choice((-1, 1)) * 6.0
            wrong = [(x + dx) / 1000, y / 1000, -0.001]
            start += cylinder(cut, wrong)
            filled.append([(x + dx * 1.5) / 1000, y / 1000, T / 2000])
            oracle += [call("transform", name=cut, location=[rounded(v, 6) for v in here]),
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
        {"kind": "part", "object": name, "size": [L, W, T], "volume": rounded(volume, 3),
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
    x, y = (rounded(v, 6) for v in loc[:2])
    return f"({x:g}, {y:g}) m"


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"Fix it so the part matches, with no cutters left over\.",
         "Repair it to match, leaving no cutters behind.",
         "Fix the part so it matches, and remove every cutter.",
         "Make the part match, with no leftover cutters.",
         "Fix it so the part matches and no cutter is left.",
         "Fix it so the part matches, with no cutters left over.",
         unseen=("Put the part right and clean away all the cutters.",)),
    swap(r"Its booleans went wrong: ", "The booleans failed: ", "What went wrong: ",
         "Its booleans went wrong: ", "Problems: ", "Its booleans went wrong: ",
         unseen=("Here is what the booleans did instead: ",)),
    swap(r"does not go through", "is blind (not through)", "stops short of the bottom",
         "doesn't go all the way through", "does not go through", "does not go through",
         unseen=("never breaks out of the bottom",)),
))


FAMILY = Family(
    name="boolean_repair",
    description="Fix a drilled CAD plate whose booleans went wrong: blind, misplaced, leftover, unioned cutters.",
    domain="repair",
    levels=(1, 2, 3, 4, 5),
    weights=REPAIR_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("history", extra=("boolean", "cad_box", "cad_cylinder", "cad_hole", "cad_query")),
    wordings=WORDINGS,
    make=boolean_repair,
)
