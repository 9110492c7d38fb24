"""The `sweeps_lofts` family (domain parts): Sweep profiles along paths and loft between sections:
rods, handles, mugs, duct transitions, hollow and flanged pipes, a reducer.
"""

from __future__ import annotations

import random

from training.tasks.config import CAD_WEIGHTS
from training.tasks.recipes.cad_plan import (
    lead,
    spec,
)
from training.tasks.recipes.phrases import CAD, LEADS, N
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


def _pipe_bend(rng: random.Random, name: str):
    r = rng.choice((4, 5, 6))
    h, dx = rng.choice((30, 40, 50)), rng.choice((30, 40))
    path = [[0, 0, 0], [0, 0, h], [dx, 0, h]]
    words = (f"a bent rod '{name}': a {2 * r} mm circle swept along the path (0, 0, 0), "
             f"(0, 0, {h}), ({dx}, 0, {h}) mm (the bend rounded by the sweep)")
    return [call("cad_sweep", name=name, path=path, radius=r)], words


def _handle(rng: random.Random, name: str, x0: float = 0):
    r, span, reach = rng.choice((4, 5)), rng.choice((40, 50)), rng.choice((20, 25))
    z0 = rng.choice((10, 15))
    path = [[x0, 0, z0], [x0 + reach, 0, z0 + span // 2], [x0, 0, z0 + span]]
    words = (f"a handle '{name}': a {2 * r} mm circle swept along the arc through "
             f"({x0}, 0, {z0}), ({x0 + reach}, 0, {z0 + span // 2}) and ({x0}, 0, {z0 + span}) mm")
    return [call("cad_sweep", name=name, path=path, radius=r, path_kind="arc")], words


def _transition(rng: random.Random, name: str):
    w, d = rng.choice((50, 60, 70)), rng.choice((30, 40))
    r, h = rng.choice((12, 15, 18)), rng.choice((40, 50, 60))
    sections = [{"kind": "rect", "z": 0, "width": w, "height": d},
                {"kind": "circle", "z": h, "radius": r}]
    words = (f"a duct transition '{name}': a loft from a {w} x {d} mm rectangle at Z=0 to a "
             f"circle {2 * r} mm across at Z={h} mm, both centred on the Z axis")
    return [call("cad_loft", name=name, sections=sections)], words


def _mug(rng: random.Random, name: str, hollow: bool):
    r, h, t = rng.choice((30, 35, 40)), rng.choice((70, 80, 90)), rng.choice((3, 4))
    rh, z0, reach = rng.choice((4, 5)), rng.choice((15, 20)), rng.choice((20, 25))
    span = h - 2 * z0
    x0 = r - 1
    path = [[x0, 0, z0], [x0 + reach, 0, z0 + span // 2], [x0, 0, z0 + span]]
    plan = [call("cad_cylinder", name=name, radius=r, height=h)]
    words = f"a mug '{name}': a cylinder {2 * r} mm across and {h} mm tall standing on Z=0"
    if hollow:
        plan.append(call("cad_shell", name=name, faces=">Z", thickness=t))
        words += f", open at the top with walls and floor {t} mm thick"
    plan.append(call("cad_sweep", name=name, path=path, radius=rh, path_kind="arc"))
    words += (f", and a handle joined to it: a {2 * rh} mm circle swept along the arc through "
              f"({x0}, 0, {z0}), ({x0 + reach}, 0, {z0 + span // 2}) and ({x0}, 0, {z0 + span}) mm")
    return plan, words


def _jog(rng: random.Random):
    ro = rng.choice((8, 10, 12))
    ri = ro - rng.choice((2, 3))
    h1, dx, h2 = rng.choice((30, 40)), rng.choice((40, 50, 60)), rng.choice((30, 40))
    return ro, ri, h1, dx, h2


def _hollow_pipe(rng: random.Random, name: str):
    ro, ri, h1, dx, h2 = _jog(rng)
    path = [[0, 0, 0], [0, 0, h1], [dx, 0, h1], [dx, 0, h1 + h2]]
    bore_path = [[0, 0, -1], [0, 0, h1], [dx, 0, h1], [dx, 0, h1 + h2 + 1]]
    bore = f"{name}_bore"
    plan = [
        call("cad_sweep", name=name, path=path, radius=ro),
        call("cad_sweep", name=bore, path=bore_path, radius=ri),
        call("boolean", target=name, cutter=bore, operation="difference"),
    ]
    words = (f"a hollow pipe '{name}' {2 * ro} mm outside and {2 * ri} mm inside, its centreline "
             f"through (0, 0, 0), (0, 0, {h1}), ({dx}, 0, {h1}), ({dx}, 0, {h1 + h2}) mm, open at "
             "both ends")
    return plan, words


def _flanged_pipe(rng: random.Random, name: str, bolt_holes: bool):
    ro, ri, h1, dx, h2 = _jog(rng)
    rf, tf = ro + rng.choice((10, 12)), rng.choice((5, 6))
    top = h1 + h2
    path = [[0, 0, 0], [0, 0, h1], [dx, 0, h1], [dx, 0, top]]
    bore_path = [[0, 0, -1], [0, 0, h1], [dx, 0, h1], [dx, 0, top + 1]]
    bore = f"{name}_bore"
    plan = [
        call("cad_sweep", name=name, path=path, radius=ro),
        call("cad_sketch_extrude", name=name, profile={"kind": "circle", "radius": rf},
             distance=tf),
        call("cad_sweep", name=name, path=[[dx, 0, top - tf], [dx, 0, top]], radius=rf),
        call("cad_sweep", name=bore, path=bore_path, radius=ri),
        call("boolean", target=name, cutter=bore, operation="difference"),
    ]
    words = (f"a flanged pipe '{name}' {2 * ro} mm outside and {2 * ri} mm inside, its centreline "
             f"through (0, 0, 0), (0, 0, {h1}), ({dx}, 0, {h1}), ({dx}, 0, {top}) mm, with a "
             f"round flange {2 * rf} mm across and {tf} mm thick at each end (flush with the "
             "pipe's ends), the bore running through both")
    info = {"dx": dx, "top": top, "rf": rf, "tf": tf, "ro": ro, "ri": ri}
    if bolt_holes:
        rb, dh, n = ro + (rf - ro) // 2 + 1, rng.choice((4, 5)), 4
        ring = [[rb, 0], [0, rb], [-rb, 0], [0, -rb]]
        plan += [
            call("cad_pattern", kind="circle", count=n, radius=rb),
            call("cad_hole", name=name, diameter=dh, positions=ring, face="<Z", depth=tf),
            call("cad_pattern", kind="circle", count=n, radius=rb),
            call("cad_hole", name=name, diameter=dh, positions=[[dx + x, y] for x, y in ring],
                 face=">Z", depth=tf),
        ]
        words += (f"; each flange has {n} bolt holes {dh} mm across on a {2 * rb} mm circle "
                  "around the pipe's axis, the first towards +X")
        info.update(rb=rb, dh=dh, n=n, ring=ring)
    return plan, words, info


def sweeps_lofts(level: int, rng: random.Random) -> TaskSpec:
    name = rng.choice(("Pipe", "Duct", "Run"))
    holes: dict[str, list] = {}
    if level == 1:
        plan, words = rng.choice((_pipe_bend, _handle, _transition))(rng, name)
    elif level == 2:
        name = rng.choice(("Mug", "Cup"))
        plan, words = _mug(rng, name, hollow=False)
    elif level == 3:
        if rng.random() < 0.5:
            name = rng.choice(("Mug", "Cup"))
            plan, words = _mug(rng, name, hollow=True)
        else:
            plan, words = _hollow_pipe(rng, name)
    elif level == 4:
        plan, words, _ = _flanged_pipe(rng, name, bolt_holes=False)
    else:
        plan, words, p = _flanged_pipe(rng, name, bolt_holes=True)
        red = "Reducer"
        hr, r2 = rng.choice((20, 25, 30)), p["ri"] - 1 + rng.choice((3, 4))
        z0, dx = p["top"], p["dx"]
        ri2 = r2 - 3
        plan += [
            call("cad_loft", name=red, sections=[
                {"kind": "circle", "z": z0, "radius": p["ro"], "x": dx},
                {"kind": "circle", "z": z0 + hr, "radius": r2, "x": dx}]),
            call("cad_sweep", name=red, path=[[dx, 0, z0], [dx, 0, z0 + p["tf"]]], radius=p["rf"]),
            call("cad_sweep", name=f"{red}_bore", path=[[dx, 0, z0 - 1], [dx, 0, z0 + hr + 1]],
                 radius=ri2),
            call("boolean", target=red, cutter=f"{red}_bore", operation="difference"),
            call("cad_hole", name=red, diameter=p["dh"], face="<Z", depth=p["tf"],
                 positions=[[dx + x, -y] for x, y in p["ring"]]),
            call("cad_chamfer", name=red, edges=">Z", length=0.5),
        ]
        words += (f". On the top flange stands a second part '{red}': a matching flange (the "
                  f"same size, bolt holes lined up with the pipe's) under a loft from "
                  f"{2 * p['ro']} mm across at Z={z0} mm to {2 * r2} mm across at Z={z0 + hr} mm, "
                  f"bored {2 * ri2} mm right through, its top edges chamfered 0.5 mm")
        holes = {name: [(p["dh"], 2 * p["n"])], red: [(p["dh"], p["n"])]}
        prompt = f"{lead(rng)} {words}."
        return spec(prompt, plan, [name, red], {"level": level}, holes=holes)
    prompt = f"{lead(rng)} {words}."
    return spec(prompt, plan, [name], {"level": level}, holes=holes)


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"its centreline through", "its centre line passing through",
         "following a centreline through", "with its centreline through",
         "its axis running through", "its centreline through",
         unseen=("whose centreline runs through",)),
    swap(rf"(?P<o>{N}) mm outside and (?P<i>{N}) mm inside",
         "{o} mm OD and {i} mm ID", "{o} mm outer and {i} mm inner diameter",
         "with {o} mm outside and {i} mm inside diameters", "{o} mm outside, {i} mm inside",
         "{o} mm outside and {i} mm inside",
         unseen=("{o} mm across outside, {i} mm across inside",)),
    swap(r"open at both ends", "open at both ends", "with both ends open", "open-ended",
         "open at each end", "open at both ends", unseen=("with no caps on its ends",)),
    *LEADS,
    *CAD,
))


FAMILY = Family(
    name="sweeps_lofts",
    description="Sweep profiles along paths and loft between sections: rods, handles, mugs, duct "
    "transitions, hollow and flanged pipes, a reducer.",
    domain="parts",
    levels=(1, 2, 3, 4, 5),
    weights=CAD_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("cad", extra=("boolean", "cad_sweep", "cad_loft")),
    wordings=WORDINGS,
    make=sweeps_lofts,
)
