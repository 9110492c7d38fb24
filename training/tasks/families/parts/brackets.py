"""The `brackets` family (domain parts): Sheet-metal-like L, U and Z brackets: a profile of a
thickness, bends rounded as fillets, holes through flanges, gussets, several brackets.
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.config import CAD_WEIGHTS
from training.tasks.recipes.cad_plan import (
    distance_from,
    fmt,
    join_parts,
    lead,
    pts_text,
    spec,
)
from training.tasks.recipes.phrases import CAD, LEADS, N
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


def numbers(plan: list[dict[str, Any]]) -> list[float]:
    """Every number in a plan's CAD arguments (millimetres)."""
    out: list[float] = []

    def walk(v: Any) -> None:
        if isinstance(v, bool):
            return
        if isinstance(v, (int, float)):
            out.append(float(v))
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for c in plan:
        if c["tool"].startswith("cad_"):
            walk({k: v for k, v in c["args"].items() if k != "text"})
    return out



INNER = "|Z and not (<X or >X or <Y or >Y)"  # bends' inside edges: at no extreme of the profile


OUTER = {
    "L": "|Z and <X and <Y",
    "U": "|Z and <Y",
    "Z": "|Z and ((<Y and not <X) or (>Y and not >X))",
}


def _bracket(kind: str, level: int, rng: random.Random, name: str):
    a, h = rng.choice((40, 50, 60)), rng.choice((30, 40, 50))
    t, w = rng.choice((3, 4, 5)), rng.choice((24, 32, 40))
    ri = rng.choice((2, 3))
    dh = rng.choice((4, 5, 6))
    zc = w // 2
    if kind == "L":
        profile = [[0, 0], [a, 0], [a, t], [t, t], [t, h], [0, h]]
        shape = (f"an L-bracket '{name}': a base flange {a} mm long along +X and an upright "
                 f"{h} mm tall along +Y")
        base_holes = [[(t + a) // 2, zc - w // 4], [(t + a) // 2, zc + w // 4]]
        side = ("<X", [[-((t + h) // 2), zc]], "in the upright", [(0, (t + h) // 2, zc)])
        gussets = [[[t, t], [t + 12, t], [t, t + 12]]]
    elif kind == "U":
        profile = [[0, 0], [a, 0], [a, h], [a - t, h], [a - t, t], [t, t], [t, h], [0, h]]
        shape = (f"a U-channel '{name}': a base {a} mm wide along +X with two walls {h} mm tall "
                 "along +Y")
        base_holes = [[a // 2, zc - w // 4], [a // 2, zc + w // 4]]
        side = ("<X", [[-((t + h) // 2), zc]], "through both walls", [(0, (t + h) // 2, zc)])
        gussets = [[[t, t], [t + 10, t], [t, t + 10]], [[a - t, t], [a - t - 10, t], [a - t, t + 10]]]
    else:
        profile = [[-a, 0], [t, 0], [t, h - t], [a, h - t], [a, h], [0, h], [0, t], [-a, t]]
        shape = (f"a Z-bracket '{name}': a lower flange reaching {a} mm along -X, a web {h} mm "
                 f"tall along +Y and an upper flange reaching {a} mm along +X")
        base_holes = [[-(a // 2), zc - w // 4], [-(a // 2), zc + w // 4]]
        side = (">Y", [[-((t + a) // 2), zc]], "in the upper flange", [((t + a) // 2, h, zc)])
        gussets = [[[0, t], [-10, t], [0, t + 10]], [[t, h - t], [t + 10, h - t], [t, h - t - 10]]]
    plan = [call("cad_sketch_extrude", name=name, profile={"kind": "polygon", "points": profile},
                 distance=w)]
    words = [f"{shape}, sheet {t} mm thick, drawn as a profile in the XY plane from the "
             f"points {pts_text([tuple(p) for p in profile])} and extruded {w} mm along +Z "
             "from Z=0"]
    holes: list[tuple[float, int]] = []
    if level >= 2:
        plan.append(call("cad_fillet", name=name, edges=INNER, radius=ri))
        words.append(f"the inside of each bend rounded r={ri} mm")
    if level >= 3:
        plan.append(call("cad_fillet", name=name, edges=OUTER[kind], radius=ri + t))
        plan.append(call("cad_hole", name=name, diameter=dh, positions=base_holes, face="<Y"))
        bw = ", ".join(f"(X={fmt(x)}, Z={fmt(z)})" for x, z in base_holes)
        words.append(f"the outside of each bend rounded r={ri + t} mm and two {dh} mm holes "
                     f"through the {'lower flange' if kind == 'Z' else 'base'} at {bw} mm")
        holes.append((dh, 2))
    if level >= 4:
        face, pos, where, ((sx, sy, sz),) = side
        plan.append(call("cad_hole", name=name, diameter=dh, positions=pos, face=face))
        at = f"X={fmt(sx)}, Z={fmt(sz)}" if kind == "Z" else f"Y={fmt(sy)}, Z={fmt(sz)}"
        words.append(f"a {dh} mm hole {where} centred at ({at}) mm")
        holes[-1] = (dh, 3)
        tg = 4
        for tri in gussets:
            plan.append(call("cad_sketch_extrude", name=name,
                             profile={"kind": "polygon", "points": tri}, distance=tg,
                             at_z=zc - tg // 2))
        tris = " and ".join(pts_text([tuple(p) for p in tri]) for tri in gussets)
        gw = "a triangular gusset" if len(gussets) == 1 else f"{len(gussets)} triangular gussets"
        words.append(f"{gw} {tg} mm thick from Z={zc - tg // 2} mm, with corners at {tris}")
    return plan, words, holes, {"a": a, "h": h, "w": w}


def brackets(level: int, rng: random.Random) -> TaskSpec:
    if level < 5:
        kind = rng.choice(("L", "U", "Z"))
        name = rng.choice(("Bracket", "Angle", "Clip"))
        plan, words, holes, _ = _bracket(kind, level, rng, name)
        prompt = f"{lead(rng)} {join_parts(words)}."
        return spec(prompt, plan, [name], {"bracket": kind, "level": level}, holes={name: holes})
    kinds = rng.sample(("L", "U", "Z"), 3)
    plan, texts, holes, names, end = [], [], {}, [], 0.0
    for i, kind in enumerate(kinds, 1):
        name = f"Bracket{i}"
        p, words, h, size = _bracket(kind, 4, rng, name)
        plan += p
        holes[name] = h
        names.append(name)
        text = join_parts(words)
        shift = 0.0
        if i > 1:
            shift = distance_from(numbers(plan), end + 10)
            plan.append(call("transform", name=name, location=[0.0, 0.0, shift / 1000]))
            text += f"; then move it along Z so that it starts at Z={fmt(shift)} mm"
        end = shift + size["w"]
        texts.append(f"({i}) {text}")
    prompt = "Make three brackets, in millimetres. " + ". ".join(texts) + "."
    return spec(prompt, plan, names, {"brackets": kinds, "level": level}, holes=holes)


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"drawn as a profile in the XY plane from the points",
         "its profile in the XY plane through the points", "as an XY-plane profile with the points",
         "sketched in the XY plane through the points", "a profile in the XY plane with corners",
         "drawn as a profile in the XY plane from the points",
         unseen=("outlined in the XY plane by the points",)),
    swap(rf"extruded (?P<e>{N}) mm along \+Z from Z=0",
         "extruded {e} mm in +Z from Z=0", "pulled {e} mm along +Z from Z=0",
         "extruded along +Z by {e} mm from Z=0", "extruded {e} mm up along +Z from Z=0",
         "extruded {e} mm along +Z from Z=0",
         unseen=("given a depth of {e} mm along +Z starting at Z=0",)),
    swap(rf"(?P<w>inside|outside) of each bend rounded r=(?P<r>{N}) mm",
         "{w} of each bend rounded to radius {r} mm", "{w} of every bend filleted r = {r} mm",
         "{w} of each bend with a {r} mm radius", "{w} of each bend rounded r={r} mm",
         "{w} of each bend rounded r={r} mm",
         unseen=("{w} of each bend softened to a {r} mm radius",)),
    *LEADS,
    *CAD,
))


FAMILY = Family(
    name="brackets",
    description="Sheet-metal-like L, U and Z brackets: a profile of a thickness, bends rounded as fillets, "
    "holes through flanges, gussets, several brackets.",
    domain="parts",
    levels=(1, 2, 3, 4, 5),
    weights=CAD_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("cad"),
    wordings=WORDINGS,
    make=brackets,
)
