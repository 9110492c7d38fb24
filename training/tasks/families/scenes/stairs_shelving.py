"""The `stairs_shelving` family (domain scenes): Stairs of a given rise, run and count, shelving
and bookcases with evenly spaced shelves.
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.config import RELATION_WEIGHTS
from training.tasks.recipes.boxes import (
    add,
    box,
    rounded,
    rounded_all,
    where,
)
from training.tasks.recipes.phrases import LEADS
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap

# ================================================================ stairs and shelving


def _stairs(rng: random.Random, x0: float, y0: float) -> dict[str, Any]:
    n = rng.choice((4, 5, 6, 8))
    rise, run, w = rng.choice((0.15, 0.18, 0.2)), rng.choice((0.25, 0.28, 0.3)), rng.choice((0.8, 1.0))
    step = box("Stairs", (w, run, rise), (x0, y0 + run / 2, rise / 2))
    total = box("Stairs", (w, n * run, n * rise), (x0, y0 + n * run / 2, n * rise / 2))
    filled = [rounded_all((x0, y0 + run * (k + 0.5), rise * (k + 0.5))) for k in range(n)]
    empty = [rounded_all((x0, y0 + run * (k + 0.5), rise * (k + 1.5))) for k in range(n - 1)]
    text = (f"a straight stair 'Stairs' of {n} steps, each {w:g} m wide, {run:g} m deep (run) "
            f"and {rise:g} m high (rise), as {n} blocks stacked each one run further along +Y and "
            f"one rise higher, the first standing on the ground with its front edge at y = {y0:g} "
            f"m, centred on x = {x0:g} m")
    plan = [add(step), call("modifier", name="Stairs", kind="array", count=n, offset=[0, 1, 1])]
    cons = where(total) + [
        {"kind": "on_ground", "object": "Stairs", "tol": 0.01},
        {"kind": "mesh_volume", "object": "Stairs", "value": rounded(n * w * run * rise, 6),
         "tol_rel": 0.02},
        {"kind": "occupancy", "object": "Stairs", "filled": filled, "empty": empty},
    ]
    return {"n": n, "rise": rise, "run": run, "w": w, "x0": x0, "y0": y0, "text": text,
            "plan": plan, "constraints": cons, "total": total}


def _shelving(rng: random.Random, cx: float, y_front: float, bookcase: bool,
              east_edge: float | None = None) -> dict[str, Any]:
    n = rng.choice((3, 4, 5))
    iw, depth, t = rng.choice((0.8, 0.9, 1.0)), rng.choice((0.3, 0.35)), 0.02
    if east_edge is not None:  # its east side at this x
        cx = rounded(east_edge - iw / 2 - t)
    pitch, base = rng.choice((0.3, 0.35, 0.4)), 0.1
    height = rounded(base + (n - 1) * pitch + rng.choice((0.3, 0.35)))
    cy = y_front + depth / 2
    side_l = box("SideL", (t, depth, height), (cx - iw / 2 - t / 2, cy, height / 2))
    side_r = box("SideR", (t, depth, height), (cx + iw / 2 + t / 2, cy, height / 2))
    shelf = box("Shelves", (iw, depth, t), (cx, cy, base + t / 2))
    span = (n - 1) * pitch + t
    shelves = box("Shelves", (iw, depth, span), (cx, cy, base + span / 2))
    plan = [add(side_l), add(side_r), add(shelf),
            call("modifier", name="Shelves", kind="array", count=n, offset=[0, 0, rounded(pitch / t, 6)])]
    cons = where(side_l) + where(side_r) + where(shelves) + [
        {"kind": "on_ground", "object": "SideL", "tol": 0.01},
        {"kind": "touching", "a": "Shelves", "b": "SideL", "tol": 0.01},
        {"kind": "touching", "a": "Shelves", "b": "SideR", "tol": 0.01},
        {"kind": "mesh_volume", "object": "Shelves", "value": rounded(n * iw * depth * t, 6),
         "tol_rel": 0.02},
        {"kind": "occupancy", "object": "Shelves",
         "filled": [rounded_all((cx, cy, base + t / 2 + k * pitch)) for k in range(n)],
         "empty": [rounded_all((cx, cy, base + t / 2 + (k + 0.5) * pitch)) for k in range(n - 1)]},
    ]
    what = "bookcase" if bookcase else "shelving unit"
    text = (f"a {what}: two side panels 'SideL' and 'SideR' {t:g} x {depth:g} x {height:g} m "
            f"standing on the ground {iw:g} m apart (inside), centred on x = {rounded(cx):g} m with "
            f"their front edges at y = {rounded(y_front):g} m, and between them {n} shelves {iw:g} x "
            f"{depth:g} x {t:g} m as ONE object 'Shelves' (an array), the lowest {base:g} m above "
            f"the ground and each next one {pitch:g} m higher")
    out = {"n": n, "iw": iw, "depth": depth, "t": t, "pitch": pitch, "base": base,
           "height": height, "cx": cx, "cy": cy, "plan": plan, "constraints": cons, "text": text}
    if bookcase:
        top = box("Top", (iw + 2 * t, depth, t), (cx, cy, height + t / 2))
        back = box("Back", (iw + 2 * t, t, height + t), (cx, y_front + depth + t / 2,
                                                          (height + t) / 2))
        out["plan"] = plan + [add(top), add(back)]
        out["constraints"] = cons + where(top) + where(back) + [
            {"kind": "gap", "a": "Top", "b": "SideL", "axis": "z", "value": 0.0, "tol": 0.01},
            {"kind": "touching", "a": "Back", "b": "SideR", "tol": 0.01},
        ]
        out["text"] = text + (f"; a top board 'Top' {rounded(iw + 2 * t):g} x {depth:g} x {t:g} m "
                              f"resting on the sides, and a back panel 'Back' {rounded(iw + 2 * t):g} "
                              f"x {t:g} x {rounded(height + t):g} m behind it, touching it, on the "
                              "ground")
    return out


def stairs_shelving(level: int, rng: random.Random) -> TaskSpec:
    x0, y0 = rng.choice((0.0, 0.5, 1.0)), rng.choice((-1.0, -0.5, 0.0))
    texts, oracle, cons = [], [], []
    params: dict[str, Any] = {}
    if level in (1, 4, 5):
        st = _stairs(rng, x0, y0)
        texts.append(st["text"])
        oracle += st["plan"]
        cons += st["constraints"]
        params["stairs"] = {k: st[k] for k in ("n", "rise", "run", "w")}
    if level >= 4:
        n, rise, run, w = st["n"], st["rise"], st["run"], st["w"]
        ld = rng.choice((0.8, 1.0))
        landing = box("Landing", (w, ld, n * rise), (x0, y0 + n * run + ld / 2, n * rise / 2))
        oracle.append(add(landing))
        cons += where(landing) + [{"kind": "touching", "a": "Landing", "b": "Stairs", "tol": 0.01}]
        texts.append(f"a landing block 'Landing' as wide as the stairs and {ld:g} m deep, on the "
                     "ground behind the top step, touching it, its top flush with the top step")
    if level == 5:
        pw, ph = 0.05, rng.choice((0.8, 0.9))
        post = box("Posts", (pw, pw, ph), (x0 + w / 2 - pw / 2, y0 + run / 2, rise + ph / 2))
        oracle += [add(post), call("modifier", name="Posts", kind="array", count=n,
                                   offset=[0, rounded(run / pw, 6), rounded(rise / ph, 6)])]
        span = box("Posts", (pw, (n - 1) * run + pw, (n - 1) * rise + ph),
                   (x0 + w / 2 - pw / 2, y0 + run / 2 + (n - 1) * run / 2,
                    rise + ((n - 1) * rise + ph) / 2))
        cons += where(span) + [{"kind": "mesh_volume", "object": "Posts",
                                "value": rounded(n * pw * pw * ph, 8), "tol_rel": 0.02}]
        texts.append(f"railing posts 'Posts' ({pw:g} x {pw:g} x {ph:g} m) as ONE object (an "
                     f"array), one standing on the middle of each step, flush with the stairs' "
                     "east (+X) side")
    if level >= 2:
        if level >= 4:
            # beside the stairs on their west side, 0.1 m away, fronts flush
            sh = _shelving(rng, 0.0, y0, bookcase=True, east_edge=x0 - w / 2 - 0.1)
            sh["text"] += ("; the bookcase stands 0.1 m west of the stairs (between SideR and "
                           "the stairs), its front flush with theirs")
            cons.append({"kind": "gap", "a": "SideR", "b": "Stairs", "axis": "x", "value": 0.1,
                         "tol": 0.02})
        else:
            sh = _shelving(rng, x0, y0, bookcase=level == 3)
        texts.append(sh["text"])
        oracle += sh["plan"]
        cons += sh["constraints"]
        params["shelves"] = {k: sh[k] for k in ("n", "iw", "pitch", "height")}
    if level == 5:
        bw, bd, bh = 0.04, rng.choice((0.18, 0.2)), rng.choice((0.22, 0.25))
        nb = 4
        spacing = rounded(sh["iw"] / (nb + 1))
        z = sh["base"] + sh["t"] + bh / 2
        books = [box(f"Book{i + 1}", (bw, bd, bh),
                     (sh["cx"] - sh["iw"] / 2 + spacing * (i + 1), sh["cy"], z)) for i in range(nb)]
        oracle.append(add(books[0]))
        oracle += [call("duplicate", name="Book1", new_name=b["name"], location=b["location"])
                   for b in books[1:]]
        for b in books:
            cons += where(b)
        cons.append({"kind": "evenly_spaced", "objects": [b["name"] for b in books], "axis": "x",
                     "tol": 0.02, "spacing": spacing})
        texts.append(f"{nb} books 'Book1'..'Book{nb}' {bw:g} x {bd:g} x {bh:g} m standing on the "
                     f"lowest shelf, centred on its depth, {spacing:g} m apart (centre to "
                     "centre) so that the gaps at both ends equal that spacing too")
    lead = rng.choice(("Build", "Model", "Please add", "Make"))
    prompt = f"{lead} (metres; z up, +Y away from the viewer) " + "; ".join(texts) + "."
    return TaskSpec(prompt=prompt, parameters=params, oracle=oracle, constraints=cons)


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"as ONE object", "as just one object", "as one object", "as ONE object",
         "all one object", "as ONE object", unseen=("merged into one object",)),
    swap(r"each one run further along \+Y and one rise higher",
         "each one run further in +Y and one rise up",
         "each step one run further in +Y and one rise up",
         "each one run on along +Y and one rise higher",
         "each one run on along +Y and one rise up",
         "each one run further along +Y and one rise higher",
         unseen=("each moved on by one run in +Y and up by one rise",)),
    *LEADS,
))


FAMILY = Family(
    name="stairs_shelving",
    description="Stairs of a given rise, run and count, shelving and bookcases with evenly spaced shelves.",
    domain="scenes",
    levels=(1, 2, 3, 4, 5),
    weights=RELATION_WEIGHTS,
    held_out=True,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("scene", extra=("modifier", "join")),
    wordings=WORDINGS,
    make=stairs_shelving,
)
