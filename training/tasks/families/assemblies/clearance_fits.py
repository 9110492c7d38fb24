"""The `clearance_fits` family (domain assemblies): Fit parts with a stated clearance or
interference: shafts and pins in bores, drawers.
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.recipes.assembly import (
    ASSEMBLY_WEIGHTS,
    GUARD,
    add,
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

# ================================================================== clearance fits


def _bore_fits(level: int, rng: random.Random) -> TaskSpec:
    a, b, h = r2(rng.uniform(0.6, 1.0)), r2(rng.uniform(0.4, 0.6)), r2(rng.uniform(0.2, 0.4))
    cx, cy = r2(rng.uniform(-1, 1)), r2(rng.uniform(-1, 1))
    housing = item("Housing", "cube", (a, b, h), (cx, cy, h / 2))
    fits = [("Shaft", "clearance", rng.choice((0.002, 0.003, 0.005)))]
    if level == 2:
        fits.append(("Pin", "interference", rng.choice((0.001, 0.002))))
    xs = [cx] if level == 1 else [r4(cx - a / 4), r4(cx + a / 4)]
    start, oracle, cons, texts = [], [], placed(housing, GUARD), []
    bores = []
    for (name, kind, c), x in zip(fits, xs, strict=True):
        d = rng.choice((0.08, 0.1, 0.12))
        bores.append((x, d))
        ds = r4(d - 2 * c if kind == "clearance" else d + 2 * c)
        length = r2(h + rng.uniform(0.1, 0.3))
        part = item(name, "cylinder", (ds, ds, length), (x, cy, length / 2))
        oracle.append(add(part))
        cons += placed(part)
        g = c if kind == "clearance" else -c
        cavity = [[r4(x - d / 2), r4(cy - d / 2), 0.0], [r4(x + d / 2), r4(cy + d / 2), h]]
        cons.append({"kind": "cavity_gap", "object": name, "cavity": cavity,
                     "faces": {f: [r4(g - 0.0005), r4(g + 0.0005)] for f in ("+x", "-x", "+y", "-y")}})
        cons.append({"kind": "on_ground", "object": name, "tol": 0.002})
        what = (f"a radial clearance of {m(c)}" if kind == "clearance"
                else f"an interference (press fit) of {m(c)} on the radius")
        texts.append(f"a round {name.lower()} '{name}' {m(length)} long standing on the ground in "
                     f"the {m(d)} bore at ({x:g}, {cy:g}) m, coaxial with it, with {what}")
    start = [add(housing)]
    for i, (x, d) in enumerate(bores):
        cut = item(f"Bore{i + 1}", "cylinder", (d, d, h + 0.1), (x, cy, h / 2))
        start += [add(cut), call("boolean", target="Housing", cutter=cut["name"],
                                 operation="difference")]
    prompt = (f"'Housing' ({m(a)} x {m(b)} x {m(h)}, on the ground) has "
              f"{'vertical through bores' if len(bores) > 1 else 'a vertical through bore'}. Put "
              + "; and ".join(texts) + ".")
    return TaskSpec(prompt=prompt, parameters={"fits": fits}, oracle=oracle, constraints=cons,
                    start=start)


def _drawers(level: int, rng: random.Random) -> TaskSpec:
    n = {3: 1, 4: 2, 5: 3}[level]
    cx, cy = r2(rng.uniform(-1, 1)), r2(rng.uniform(-1, 1))
    w = 0.03
    width, depth = r2(rng.uniform(0.6, 0.9)), r2(rng.uniform(0.5, 0.7))
    hc = r2(rng.uniform(0.18, 0.26))
    height = r4((n + 1) * w + n * hc)
    c = rng.choice((0.003, 0.005, 0.008))
    front_y = r4(cy - depth / 2)
    cabinet = item("Cabinet", "cube", (width, depth, height), (cx, cy, height / 2))
    start = [add(cabinet)]
    cons = placed(cabinet, GUARD)
    oracle: list[dict[str, Any]] = []
    cav_w, cav_d = r4(width - 2 * w), r4(depth - w)
    dw = 0.015  # drawer walls
    for i in range(n):
        z0 = r4(w + i * (hc + w))
        cut = item(f"Opening{i + 1}", "cube", (cav_w, cav_d + 0.1, hc),
                   (cx, front_y + (cav_d - 0.1) / 2, z0 + hc / 2))
        start += [add(cut), call("boolean", target="Cabinet", cutter=cut["name"],
                                 operation="difference")]
        lo = [r4(cx - cav_w / 2), front_y, z0]
        hi = [r4(cx + cav_w / 2), r4(front_y + cav_d), r4(z0 + hc)]
        dr = item(f"Drawer{i + 1}", "cube", (cav_w - 2 * c, cav_d - c, hc - c),
                  (cx, front_y + (cav_d - c) / 2, z0 + (hc - c) / 2))
        inner = item(f"Drawer{i + 1}Inside", "cube",
                     (dr["dimensions"][0] - 2 * dw, dr["dimensions"][1] - 2 * dw, hc),
                     (cx, dr["location"][1], z0 + dw + hc / 2))
        front = item(f"Front{i + 1}", "cube", (width - 0.02, 0.02, hc + w - 0.01),
                     (cx, front_y - 0.01, z0 + hc / 2))
        handle = item(f"Handle{i + 1}", "cube", (0.16, 0.03, 0.03),
                      (cx, front_y - 0.02 - 0.015, z0 + hc / 2))
        oracle += [add(dr), add(inner), call("boolean", target=dr["name"], cutter=inner["name"],
                                             operation="difference"), add(front), add(handle)]
        dd = dr["dimensions"]
        volume = dd[0] * dd[1] * dd[2] - (dd[0] - 2 * dw) * (dd[1] - 2 * dw) * (dd[2] - dw)
        band = [r4(c - 0.0005), r4(c + 0.0005)]
        cons += placed(dr) + placed(front) + placed(handle) + [
            {"kind": "cavity_gap", "object": dr["name"], "cavity": [lo, hi],
             "faces": {"+x": band, "-x": band, "+z": band, "+y": band,
                       "-z": [-0.0005, 0.0005], "-y": [-0.0005, 0.0005]}},
            {"kind": "mesh_volume", "object": dr["name"], "value": round(volume, 7),
             "tol_rel": 0.01},
            {"kind": "absent", "object": inner["name"]},
            {"kind": "flush", "a": front["name"], "face_a": "+y", "b": "Cabinet", "face_b": "-y",
             "tol": 0.002},
            {"kind": "flush", "a": handle["name"], "face_a": "+y", "b": front["name"],
             "face_b": "-y", "tol": 0.002},
        ]
    cons.append({"kind": "count", "equal": 1 + 3 * n})
    bottoms = ", ".join(f"{r4(w + i * (hc + w)):g}" for i in range(n))
    prompt = (
        f"'Cabinet' ({m(width)} wide, {m(depth)} deep, {m(height)} tall, centred at ({cx:g}, "
        f"{cy:g}) m on the ground) has {n} opening{'s' if n > 1 else ''} in its front (-y) face, "
        f"each {m(cav_w)} wide, {m(hc)} tall and {m(cav_d)} deep, bottoms at z {bottoms} m. "
        f"For each opening i, model a drawer 'Draweri': an open-topped box with {m(dw)} walls "
        f"and floor, standing on the opening's floor, its front flush with the cabinet's front "
        f"face, with a clearance of {m(c)} to the sides, the top and the back; a front panel "
        f"'Fronti' ({m(width - 0.02)} x 0.02 x {m(hc + w - 0.01)}) centred on the opening, its back "
        f"against the cabinet's front; and a handle 'Handlei' (0.16 x 0.03 x 0.03 m) centred on "
        f"the panel's front. Hollow each drawer with a boolean difference."
    )
    return TaskSpec(prompt=prompt, parameters={"drawers": n, "clearance": c}, oracle=oracle,
                    constraints=cons, start=start)


def clearance_fits(level: int, rng: random.Random) -> TaskSpec:
    return _bore_fits(level, rng) if level <= 2 else _drawers(level, rng)


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(rf"with a radial clearance of (?P<c>{N}) m",
         "leaving {c} m of clearance all round", "with {c} m radial clearance",
         "with a {c} m gap all round", "radial clearance {c} m", "with a radial clearance of {c} m",
         unseen=("with a {c} m running gap on the radius",)),
    swap(r"coaxial with it", "on the same axis", "sharing its axis", "centred in it",
         "concentric with it", "coaxial with it", unseen=("lined up on its axis",)),
    swap(r"Hollow each drawer with a boolean difference\.",
         "Hollow each drawer out with a boolean difference.",
         "Use a boolean difference to hollow each drawer.",
         "Each drawer is hollowed with a boolean difference.",
         "Hollow the drawers with boolean differences.",
         "Hollow each drawer with a boolean difference.",
         unseen=("Carve out each drawer's inside with a boolean difference.",)),
))


FAMILY = Family(
    name="clearance_fits",
    description="Fit parts with a stated clearance or interference: shafts and pins in bores, drawers.",
    domain="assemblies",
    levels=(1, 2, 3, 4, 5),
    weights=ASSEMBLY_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("assembly"),
    wordings=WORDINGS,
    make=clearance_fits,
)
