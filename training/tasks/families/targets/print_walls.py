"""The `print_walls` family (domain targets): Hollow CAD parts for 3D printing to a wall thickness,
measured through the material.
"""

from __future__ import annotations

import math
import random

from training.tasks.recipes.phrases import CAD, N
from training.tasks.recipes.repair import REPAIR_WEIGHTS, rounded
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap

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
        {"kind": "part", "object": name, "size": size, "volume": rounded(vol, 3), "tol_rel": 0.005},
        {"kind": "wall_thickness", "object": name, "value": t / 1000, "tol_rel": WALL_TOL},
        {"kind": "occupancy", "object": name, "empty": [[0.0, 0.0, H * 0.6 / 1000]],
         "filled": [wall]},
    ]
    return what, t, make, plan, constraints


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


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(rf"hollowed from the top with (?P<w>{N}) mm walls and floor",
         "hollowed from the top, walls and floor {w} mm", "shelled from the top with {w} mm walls and floor",
         "hollowed out from the top with {w} mm walls and floor",
         "open at the top with {w} mm walls and floor", "hollowed from the top with {w} mm walls and floor",
         unseen=("emptied from the top, leaving {w} mm of wall and floor",)),
    swap(rf"too thin to print: redo it with (?P<w>{N}) mm walls",
         "too thin to print, so redo it with {w} mm walls",
         "too thin to print; hollow it again with {w} mm walls",
         "which won't print: redo it with {w} mm walls",
         "too thin to print: make the walls {w} mm instead",
         "too thin to print: redo it with {w} mm walls",
         unseen=("far too flimsy to print; give it {w} mm walls instead",)),
    swap(rf"with its upright edges rounded to (?P<r>{N}) mm",
         "its vertical edges filleted to {r} mm", "with {r} mm rounds on the upright edges",
         "with the upright edges rounded to {r} mm", "with rounded upright edges ({r} mm)",
         "with its upright edges rounded to {r} mm",
         unseen=("with its vertical corners softened to {r} mm",)),
    *CAD,
))


FAMILY = Family(
    name="print_walls",
    description="Hollow CAD parts for 3D printing to a wall thickness, measured through the material.",
    domain="targets",
    levels=(1, 2, 3, 4, 5),
    weights=REPAIR_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("cad", "history"),
    wordings=WORDINGS,
    make=print_walls,
)
