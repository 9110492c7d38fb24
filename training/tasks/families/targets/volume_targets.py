"""The `volume_targets` family (domain targets): Size CAD parts (boxes, cans, drilled plates,
bossed flanges) to hit a target volume.
"""

from __future__ import annotations

import math
import random

from training.tasks.recipes.phrases import CAD, LEADS, N
from training.tasks.recipes.repair import REPAIR_WEIGHTS, rounded
from training.tasks.recipes.scene import counted
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap

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
    return text, [call("cad_box", name=name, length=L, width=W, height=rounded(H))], V, [L, W, H], []


def _can(rng, name):
    D = rng.randrange(40, 120, 10)
    V = rng.choice((250_000, 330_000, 500_000, 1_000_000)) if D >= 70 else \
        1000 * round(math.pi * (D / 2) ** 2 * rng.uniform(20, 60) / 1000)
    H = V / (math.pi * (D / 2) ** 2)
    text = f"a cylinder '{name}' {D:g} mm across whose height makes it hold {_v(V)}"
    return text, [call("cad_cylinder", name=name, radius=D / 2, height=rounded(H))], V, [D, D, H], []


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
    plan = [call("cad_box", name=name, length=L, width=W, height=rounded(H)),
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
                 distance=rounded(h), at_z=T),
            call("cad_hole", name=name, diameter=d, positions=[[0.0, 0.0]])]
    return text, plan, V, [L, W, T + h], [(d, 1)]


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
        constraints.append({"kind": "part", "object": name, "size": [rounded(s) for s in size],
                            "volume": rounded(V, 3), "tol_rel": VOLUME_TOL})
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


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(rf"whose height gives (?P<v>{N}) cm³",
         "with its height set so the volume is {v} cm³", "tall enough for a volume of {v} cm³",
         "with the height that makes {v} cm³", "whose height makes the volume {v} cm³",
         "whose height gives {v} cm³",
         unseen=("high enough to hold {v} cm³ of material",)),
    swap(r"\(within 1 %\)", "(to within 1 %)", "(1 % either way)", "(1 % tolerance)", "(within 1 %)",
         "(within 1 %)", unseen=("(no more than 1 % off)",)),
    *LEADS,
    *CAD,
))


FAMILY = Family(
    name="volume_targets",
    description="Size CAD parts (boxes, cans, drilled plates, bossed flanges) to hit a target volume.",
    domain="targets",
    levels=(1, 2, 3, 4, 5),
    weights=REPAIR_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("cad", extra=("mass_properties",)),
    wordings=WORDINGS,
    make=volume_targets,
)
