"""The `scene_editing` family (domain edits): Move, scale, turn or delete objects of a prepared
scene to meet constraints.
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.config import SCENE_WEIGHTS
from training.tasks.recipes.phrases import MOVES
from training.tasks.recipes.scene import (
    add_call,
    fmt,
    placed,
    random_items,
    scene_geometry,
    stacked_constraints,
)
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


def _edit(rng: random.Random, it: dict[str, Any], op: str) -> tuple[str, dict | None, dict]:
    """One edit of an object: (instruction, oracle call or None for delete, new item)."""
    new = {**it, "location": list(it["location"]), "dimensions": list(it["dimensions"])}
    if op == "move":
        dx, dy = rng.choice((-1.5, -1.0, 1.0, 1.5)), rng.choice((-1.0, 0.0, 1.0))
        new["location"] = [it["location"][0] + dx, it["location"][1] + dy, it["location"][2]]
        return (
            f"move '{it['name']}' to {fmt(new['location'])}",
            call("transform", name=it["name"], location=new["location"]),
            new,
        )
    if op == "scale":
        f = rng.choice((0.5, 1.5, 2.0))
        new["dimensions"] = [round(d * f, 4) for d in it["dimensions"]]
        new["location"] = [it["location"][0], it["location"][1], new["dimensions"][2] / 2]
        text = f"scale '{it['name']}' by {f:g} (uniformly) and keep it resting on the ground, i.e. centred at {fmt(new['location'])}"
        return (
            text,
            call("transform", name=it["name"], scale=[f, f, f], location=new["location"]),
            new,
        )
    if op == "rotate":
        a = float(rng.choice((20, 35, 50, 70)))
        new["rotation_deg"] = [0.0, 0.0, a]
        return (
            f"turn '{it['name']}' to {a:g}° about the Z axis",
            call("transform", name=it["name"], rotation_deg=[0, 0, a]),
            new,
        )
    return f"delete '{it['name']}'", call("delete", name=it["name"]), new


def _edit_task(rng: random.Random, items: list[dict], texts: list[str], oracle: list[dict],
               constraints: list[dict], finals: list[dict]) -> TaskSpec:  # fmt: skip
    """An editing task: the prompt lists the edits of the scene of `items`; `finals` are the
    objects as they must end up."""
    prompt = (
        rng.choice(("In this scene, ", "Edit the scene: ", "Please "))
        + "; ".join(texts)
        + ". Leave everything else as it is."
    )
    return TaskSpec(
        prompt=prompt,
        parameters={"start": items, "edits": texts},
        oracle=oracle,
        constraints=constraints,
        start=[add_call(it) for it in items],
        geometry=scene_geometry(finals),
        geometry_min=0.8,
    )


def _editing_5(rng: random.Random) -> TaskSpec:
    """Sixteen edits of fourteen boxes that build on each other: four boxes are scaled and
    turned, then another box is put on top of each (its height follows from the scaling); two
    are moved, two deleted, two left alone."""
    items = random_items(rng, 14)
    for it in items:
        it["kind"] = "cube"
    bases, tops, moved, deleted, guards = (
        items[0:4], items[4:8], items[8:10], items[10:12], items[12:14]
    )  # fmt: skip
    texts, oracle, constraints, finals = [], [], [], []
    for base, top in zip(bases, tops, strict=True):
        text, step, new = _edit(rng, base, "scale")
        texts.append(text)
        oracle.append(step)
        a = float(rng.choice((20, 35, 50, 70)))
        new["rotation_deg"] = [0.0, 0.0, a]
        texts.append(f"then turn '{base['name']}' to {a:g}° about Z")
        oracle.append(call("transform", name=base["name"], rotation_deg=[0, 0, a]))
        loc = [new["location"][0], new["location"][1], round(new["dimensions"][2] + top["dimensions"][2] / 2, 4)]
        on = {**top, "location": loc}
        texts.append(f"put '{top['name']}' on top of '{base['name']}', centred on it")
        oracle.append(call("transform", name=top["name"], location=loc))
        constraints += placed(new, kind_check=False) + placed(on, kind_check=False)
        constraints += stacked_constraints(on, new)
        finals += [new, on]
    for it in moved:
        text, step, new = _edit(rng, it, "move")
        texts.append(text)
        oracle.append(step)
        constraints += placed(new, kind_check=False)
        finals.append(new)
    for it in deleted:
        texts.append(f"delete '{it['name']}'")
        oracle.append(call("delete", name=it["name"]))
        constraints.append({"kind": "absent", "object": it["name"]})
    for it in guards:
        constraints += placed(it, kind_check=False, guard=True)
        finals.append(it)
    return _edit_task(rng, items, texts, oracle, constraints, finals)


def scene_editing(level: int, rng: random.Random) -> TaskSpec:
    if level == 5:
        return _editing_5(rng)
    n_obj, n_edit = {1: (2, 1), 2: (4, 3), 3: (9, 8), 4: (12, 10)}[level]
    items = random_items(rng, n_obj)
    for it in items:  # cubes only: a turn must be visible in geometry
        if it["kind"] != "cube":
            it["kind"] = "cube"
    edited = rng.sample(range(n_obj), n_edit)
    ops = ["move", "scale", "rotate", "delete"]
    texts, oracle, constraints, finals = [], [], [], []
    for i, it in enumerate(items):
        if i not in edited:
            constraints += placed(it, kind_check=False, guard=True)
            finals.append(it)
            continue
        op = ops[len(texts) % 4] if level >= 3 else rng.choice(ops)
        text, step, new = _edit(rng, it, op)
        texts.append(text)
        oracle.append(step)
        if op == "delete":
            constraints.append({"kind": "absent", "object": it["name"]})
        else:
            constraints += placed(new, kind_check=False)
            finals.append(new)
    return _edit_task(rng, items, texts, oracle, constraints, finals)


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"^(?:In this scene, |Edit the scene: |Please )",
         "Changes to the scene: ", "Make these edits: ", "In this scene, ", "Edit the scene: ",
         "Please ", unseen=("A few changes are needed: ", "Here's what should change: ")),
    swap(r" Leave everything else as it is\.",
         " Don't touch anything else.", " Everything else stays as it is.",
         " Nothing else should change.", " Keep the rest unchanged.",
         " Leave everything else as it is.",
         unseen=(" The rest of the scene must not move.", " Anything not mentioned stays put.")),
    *MOVES,
))


FAMILY = Family(
    name="scene_editing",
    description="Move, scale, turn or delete objects of a prepared scene to meet constraints.",
    domain="edits",
    levels=(1, 2, 3, 4, 5),
    weights=SCENE_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("scene"),
    wordings=WORDINGS,
    make=scene_editing,
)
