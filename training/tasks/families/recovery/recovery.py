"""The `recovery` family (domain recovery): Recover from a failing first call: suffixed names, an
impossible fillet radius.
"""

from __future__ import annotations

import math
import random
from typing import Any

from training.tasks.recipes.phrases import MOVES, NAME, PAINT, N
from training.tasks.recipes.scene import COLOURS, add_call, fmt, placed, random_items
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


def _suffixed(rng: random.Random, n: int) -> list[dict[str, Any]]:
    items = random_items(rng, n)
    for it in items:
        it["plain"] = it["name"]
        it["name"] = f"{it['name']}.{rng.randint(1, 12):03d}"
    return items


def _naming(rng: random.Random, level: int) -> TaskSpec:
    n_obj, n_edit = (3, 1) if level == 1 else (6, 4)
    items = _suffixed(rng, n_obj)
    edited = items[:n_edit]
    oracle = [
        call("transform", name=edited[0]["plain"], location=[0.0, 0.0, 0.0]),
        call("get_scene"),
    ]
    texts, constraints = [], []
    for it in items[n_edit:]:
        constraints += placed(it, kind_check=False, guard=True)
    for it in edited:
        new = {
            **it,
            "location": [it["location"][0] + 1.0, it["location"][1] - 1.0, it["location"][2]],
        }
        texts.append(f"move '{it['plain']}' to {fmt(new['location'])}")
        oracle.append(call("transform", name=it["name"], location=new["location"]))
        constraints += placed(new, kind_check=False)
        if level == 3:
            colour = rng.choice(sorted(COLOURS))
            texts.append(f"make '{it['plain']}' {colour} ({COLOURS[colour]})")
            oracle.append(call("set_material", name=it["name"], color=COLOURS[colour]))
            constraints.append({"kind": "material", "object": it["name"], "color": COLOURS[colour]})
    prompt = rng.choice(("Please ", "In the open scene, ")) + "; ".join(texts) + "."
    return TaskSpec(
        prompt=prompt,
        parameters={"start": items, "edits": texts},
        oracle=oracle,
        constraints=constraints + [{"kind": "count", "equal": n_obj}],
        start=[add_call(it) for it in items],
    )


def _fillet(rng: random.Random) -> TaskSpec:
    length, width, t = rng.choice((60, 80)), rng.choice((20, 24, 30)), rng.choice((5, 8))
    asked = round(width * rng.uniform(0.6, 0.9))  # > width / 2: the kernel refuses it
    radius = asked / 2  # the fallback rule's answer (< width / 2)
    volume = length * width * t - 4 * (1 - math.pi / 4) * radius**2 * t
    script = (
        "import cadquery as cq\n"
        f"result = cq.Workplane().box({length}, {width}, {t}, centered=(True, True, False))"
        f".edges('|Z').fillet({radius})\n"
    )
    return TaskSpec(
        prompt=(
            f"Round the four vertical edges of the CAD part 'Plate' with a fillet of radius {asked} mm. "
            "If the kernel refuses that radius, halve it and try again until it works."
        ),
        parameters={"size": [length, width, t], "asked_radius": asked, "radius": radius},
        oracle=[  # fails; looks at the part (why: it is too narrow); halves; checks the result
            call("cad_fillet", name="Plate", edges="|Z", radius=asked),
            call("cad_query", name="Plate"),
            call("cad_fillet", name="Plate", edges="|Z", radius=radius),
            call("cad_query", name="Plate"),
        ],
        constraints=[
            {
                "kind": "part",
                "object": "Plate",
                "size": [length, width, t],
                "volume": round(volume, 4),
                "tol_rel": 0.005,
            },
            {"kind": "holes", "object": "Plate", "diameter": 2 * radius, "count": 4},
        ],
        start=[call("cad_box", name="Plate", length=length, width=width, height=t)],
        geometry={"kind": "parts", "parts": [{"name": "Plate", "script": script}]},
        geometry_min=0.99,
    )


def _naming_and_fillet(rng: random.Random, level: int) -> TaskSpec:
    """Levels 4-5: the naming trap over several objects, then the fillet a part cannot take,
    in one session. Level 5 also deletes one object and asks a radius that must be halved
    twice: three failing calls to notice, each fixed before going on."""
    n_obj, n_edit = (7, 4) if level == 4 else (8, 5)
    items = _suffixed(rng, n_obj)
    edited = items[:n_edit]
    dropped = items[n_edit] if level == 5 else None
    oracle = [
        call("transform", name=edited[0]["plain"], location=[0.0, 0.0, 0.0]),
        call("get_scene"),
    ]
    texts, constraints = [], []
    for it in items[n_edit + (level == 5):]:
        constraints += placed(it, kind_check=False, guard=True)
    for it in edited:
        new = {
            **it,
            "location": [it["location"][0] + 1.0, it["location"][1] - 1.0, it["location"][2]],
        }
        colour = rng.choice(sorted(COLOURS))
        texts.append(f"move '{it['plain']}' to {fmt(new['location'])} and make it {colour} ({COLOURS[colour]})")
        oracle.append(call("transform", name=it["name"], location=new["location"]))
        oracle.append(call("set_material", name=it["name"], color=COLOURS[colour]))
        constraints += placed(new, kind_check=False)
        constraints.append({"kind": "material", "object": it["name"], "color": COLOURS[colour]})
    if dropped is not None:
        texts.append(f"delete '{dropped['plain']}'")
        oracle.append(call("delete", name=dropped["name"]))
        constraints.append({"kind": "absent", "object": dropped["name"]})
    length, width, t = rng.choice((60, 80)), rng.choice((20, 24, 30)), rng.choice((5, 8))
    # > width / 2 (refused); level 5: half of it still is, a quarter is not.
    asked = round(width * (rng.uniform(0.6, 0.9) if level == 4 else rng.uniform(1.2, 1.8)))
    tries = [asked / 2**k for k in range(2 if level == 4 else 3)]
    radius = tries[-1]
    volume = length * width * t - 4 * (1 - math.pi / 4) * radius**2 * t
    script = (
        "import cadquery as cq\n"
        f"result = cq.Workplane().box({length}, {width}, {t}, centered=(True, True, False))"
        f".edges('|Z').fillet({radius})\n"
    )
    oracle += [call("cad_fillet", name="Plate", edges="|Z", radius=r) for r in tries]
    constraints += [
        {"kind": "part", "object": "Plate", "size": [length, width, t],
         "volume": round(volume, 4), "tol_rel": 0.005},
        {"kind": "holes", "object": "Plate", "diameter": 2 * radius, "count": 4},
    ]  # fmt: skip
    prompt = (
        rng.choice(("Please ", "In the open scene, "))
        + "; ".join(texts)
        + f". Then round the four vertical edges of the CAD part 'Plate' with a fillet of radius "
        f"{asked} mm; if the kernel refuses that radius, halve it and try again until it works."
    )
    return TaskSpec(
        prompt=prompt,
        parameters={"start": items, "edits": texts, "size": [length, width, t],
                    "asked_radius": asked, "radius": radius},  # fmt: skip
        oracle=oracle,
        constraints=constraints,
        start=[add_call(it) for it in items]
        + [call("cad_box", name="Plate", length=length, width=width, height=t)],
        geometry={"kind": "parts", "parts": [{"name": "Plate", "script": script}]},
        geometry_min=0.99,
    )


def recovery(level: int, rng: random.Random) -> TaskSpec:
    if level >= 4:
        return _naming_and_fillet(rng, level)
    return _fillet(rng) if level == 2 else _naming(rng, level)


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(rf"(?P<r>[Rr])ound the four vertical edges of the CAD part (?P<n>{NAME}) with a fillet "
         rf"of radius (?P<mm>{N}) mm",
         "{r}ound the four vertical edges of the CAD part {n}, fillet radius {mm} mm",
         "{r}ound the four upright edges of CAD part {n} with a {mm} mm fillet",
         "{r}ound the four vertical edges of the CAD part {n} to radius {mm} mm",
         "{r}ound the vertical edges (all four) of the CAD part {n}, radius {mm} mm",
         "{r}ound the four vertical edges of the CAD part {n} with a fillet of radius {mm} mm",
         unseen=("{r}ound off the four vertical edges of the CAD part {n} at a {mm} mm radius",)),
    swap(r"(?P<i>[Ii])f the kernel refuses that radius, halve it and try again until it works",
         "{i}f the kernel refuses it, halve the radius and try again until it works",
         "{i}f that radius fails, halve it and retry until it works",
         "{i}f the kernel says no, halve the radius and keep trying",
         "{i}f the kernel refuses that radius, try half of it, and so on until it works",
         "{i}f the kernel refuses that radius, halve it and try again until it works",
         unseen=("{i}f it won't take that radius, keep halving it until it does",)),
    *MOVES,
    *PAINT,
))


FAMILY = Family(
    name="recovery",
    description="Recover from a failing first call: suffixed names, an impossible fillet radius.",
    domain="recovery",
    levels=(1, 2, 3, 4, 5),
    weights={
        "constraints": 0.5,
        "recovery": 0.3,
        "validity": 0.1,
        "efficiency": 0.1,
    },
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("scene", extra=("undo", "cad_fillet", "cad_chamfer", "cad_query")),
    wordings=WORDINGS,
    make=recovery,
)
