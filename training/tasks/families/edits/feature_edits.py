"""The `feature_edits` family (domain edits): Add features to a prepared CAD part: holes, pockets,
fillets, chamfers, bosses, patterns.
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.recipes.assembly import (
    EDIT_WEIGHTS,
)
from training.tasks.recipes.cad_edit import (
    CadPart,
    bolt_circle,
    cad_script,
    grid_points,
    place_at,
    placement_of,
)
from training.tasks.recipes.phrases import CAD, N
from training.tasks.recipes.scene import fmt
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


def _features(base: CadPart, level: int, rng: random.Random):
    """Feature calls on the plain block `base` (the start), in order, their descriptions and
    the holes the finished part has: level 1 one feature; later ones fillets and chamfers
    first, then a boss with a hole through its centre and holes around it, then corner holes."""
    p, n = base.p, base.name
    calls: list[dict[str, Any]] = []
    texts: list[str] = []
    holes: list[tuple[float, int]] = []
    sx, sy = p["L"] - 20, p["W"] - 20
    if level == 1:
        which = rng.choice(("hole", "fillet", "chamfer"))
        if which == "hole":
            d = rng.choice((5, 6, 8))
            pts = [[rng.choice((-1, 1)) * sx / 2, rng.choice((-1, 1)) * sy / 2]]
            calls.append(call("cad_hole", name=n, diameter=d, positions=pts))
            texts.append(f"drill a {d} mm through hole at {placement_of(pts)}")
            holes.append((d, 1))
        elif which == "fillet":
            r = rng.choice((5, 6, 8))
            calls.append(call("cad_fillet", name=n, edges="|Z", radius=r))
            texts.append(f"round its four vertical edges with r={r} mm")
        else:
            c = rng.choice((1, 1.5, 2))
            calls.append(call("cad_chamfer", name=n, edges="<Z", length=c))
            texts.append(f"chamfer its bottom edges {c:g} mm")
        return calls, texts, holes
    r = rng.choice((5, 9))  # no hole, pocket, counterbore or boss has these radii
    calls.append(call("cad_fillet", name=n, edges="|Z", radius=r))
    texts.append(f"round its four vertical edges with r={r} mm")
    if level >= 3:
        c = rng.choice((1, 1.5, 2))
        calls.append(call("cad_chamfer", name=n, edges="<Z", length=c))
        texts.append(f"chamfer its bottom edges {c:g} mm")
    if level >= 4:
        rb, hb = rng.choice((10, 12, 14)), rng.choice((5, 6, 8))
        calls.append(call("cad_sketch_extrude", name=n, profile={"kind": "circle", "radius": rb},
                          distance=hb, at_z=p["T"]))
        texts.append(f"add a round boss {2 * rb} mm across and {hb} mm tall centred on the top face")
        dc = rng.choice((6, 8))
        calls.append(call("cad_hole", name=n, diameter=dc, positions=[[0.0, 0.0]],
                          counterbore_diameter=dc + 6, counterbore_depth=3))
        texts.append(f"drill a {dc} mm hole through the boss's centre and the part, counterbored "
                     f"{dc + 6} mm across and 3 mm deep from the boss's top")
        holes += [(dc, 1), (dc + 6, 1)]
        if level >= 5:
            nb, rr, db = rng.choice((4, 6)), rb + 8, rng.choice((4, 5))
            calls += [call("cad_pattern", kind="circle", count=nb, radius=rr),
                      call("cad_hole", name=n, diameter=db, positions=bolt_circle(nb, rr))]
            texts.append(f"drill {nb} through holes {db} mm across on a {2 * rr} mm circle around "
                         "the boss, the first on +X")
            holes.append((db, nb))
    d = rng.choice((7, 9))
    if level == 2:
        calls.append(call("cad_hole", name=n, diameter=d, positions=[[0.0, 0.0]]))
        texts.append(f"drill a {d} mm through hole in the middle")
        holes.append((d, 1))
    else:
        calls += [call("cad_pattern", kind="grid", count_x=2, count_y=2, spacing_x=sx,
                       spacing_y=sy),
                  call("cad_hole", name=n, diameter=d, positions=grid_points(2, 2, sx, sy))]
        texts.append(f"drill four {d} mm through holes at (±{sx / 2:g}, ±{sy / 2:g}) mm")
        holes.append((d, 4))
    if level == 3:
        dp, depth = rng.choice((16, 20)), rng.choice((3, 4))
        calls.append(call("cad_hole", name=n, diameter=dp, depth=depth, positions=[[0.0, 0.0]]))
        texts.append(f"sink a round pocket {dp} mm across and {depth} mm deep in the middle "
                     "of the top face")
        holes.append((dp, 1))
    return calls, texts, holes


def feature_edits(level: int, rng: random.Random) -> TaskSpec:
    names = ["Block", "Plate", "Base"] if level == 5 else [rng.choice(("Block", "Plate", "Base"))]
    spots = [(0.0, 0.0, 0.0), (0.2, 0.0, 0.0), (0.4, 0.0, 0.0)]
    start, oracle, cons, listing, texts = [], [], [], [], []
    for name, loc in zip(names, spots, strict=False):
        base = CadPart("plain", name, L=rng.choice((100, 120)), W=rng.choice((70, 80)),
                       T=rng.choice((8, 10, 12)))
        first = [call("cad_box", name=name, length=base.p["L"], width=base.p["W"],
                      height=base.p["T"])]
        listing.append(f"'{name}', a plain block {base.p['L']} x {base.p['W']} x {base.p['T']} mm "
                       "(centred in XY, bottom on Z=0)" + (f" placed at {fmt(loc)}" if any(loc) else ""))
        start += first + place_at(name, loc)
        calls, words, holes = _features(base, level, rng)
        oracle += calls
        texts.append((f"on '{name}': " if len(names) > 1 else "") + ", then ".join(words))
        cons.append({"kind": "part_at", "object": name, "script": cad_script(first + calls),
                     "location_mm": [round(v * 1000, 6) for v in loc]})
        cons += [{"kind": "holes", "object": name, "diameter": d, "count": c} for d, c in holes]
    cons.append({"kind": "count", "equal": len(names)})
    lead = "Add to it, in this order: " if len(names) == 1 else "Add features, in this order, "
    prompt = ("The scene holds " + "; and ".join(listing) + ". " + lead + "; ".join(texts)
              + ". Leave the rest as it is.")
    return TaskSpec(prompt=prompt, parameters={"parts": names}, oracle=oracle,
                    constraints=cons, start=start)


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"^The scene holds ", "The scene has ", "In the scene there is ", "The scene contains ",
         "Here is ", "The scene holds ",
         unseen=("You'll find this in the scene: ", "Already in the scene: ")),
    swap(r"(?P<w>Add to it|Add features), in this order(?P<on>[:,])",
         "{w}, in this order{on}", "{w}, in order{on}", "{w} in this order{on}",
         "{w}, each after the last{on}", "{w}, in this order{on}",
         unseen=("{w}, strictly in this sequence{on}",)),
    swap(rf"round its four vertical edges with r=(?P<r>{N}) mm",
         "fillet its four vertical edges to radius {r} mm", "round the four vertical edges, r = {r} mm",
         "give its four vertical edges {r} mm fillets", "round its four vertical edges with radius {r} mm",
         "round its four vertical edges with r={r} mm",
         unseen=("soften the four upright edges with {r} mm radius fillets",)),
    swap(rf"chamfer its (?P<e>bottom|top) edges (?P<c>{N}) mm",
         "put a {c} mm chamfer on its {e} edges", "chamfer the {e} edges by {c} mm",
         "bevel its {e} edges {c} mm", "add a {c} mm chamfer to the {e} edges",
         "chamfer its {e} edges {c} mm",
         unseen=("break the {e} edges with a {c} mm chamfer",)),
    swap(r" Leave the rest as it is\.", " Leave everything else alone.", " Nothing else changes.",
         " Keep the rest as it is.", " The rest stays as it is.", " Leave the rest as it is.",
         unseen=(" Don't change anything else about it.",)),
    *CAD,
))


FAMILY = Family(
    name="feature_edits",
    description="Add features to a prepared CAD part: holes, pockets, fillets, chamfers, bosses, patterns.",
    domain="edits",
    levels=(1, 2, 3, 4, 5),
    weights=EDIT_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("cad"),
    wordings=WORDINGS,
    make=feature_edits,
)
