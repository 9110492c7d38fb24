"""The `materials` family (domain scenes): Give objects of a prepared scene the named colours and
finishes.
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.config import RELATION_WEIGHTS
from training.tasks.recipes.phrases import PAINT, N
from training.tasks.recipes.scene import (
    COLOURS,
    add_call,
    placed,
    random_items,
)
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap


def _materials_5(rng: random.Random) -> TaskSpec:
    """Sixteen objects painted by a rule on their heights, which only the scene tells: look
    first (get_scene), then one material per object, one of them an exception by name."""
    items = random_items(rng, 16)
    heights = sorted({it["dimensions"][2] for it in items})
    mid = len(heights) // 2
    cut = round((heights[mid - 1] + heights[mid]) / 2, 3)
    tall_c, short_c, odd_c = rng.sample(sorted(COLOURS), 3)
    tall = {"color": COLOURS[tall_c], "metallic": 1.0, "roughness": rng.choice((0.2, 0.3))}
    short = {"color": COLOURS[short_c], "metallic": 0.0, "roughness": rng.choice((0.6, 0.8))}
    odd = rng.choice(items)
    special = {"color": COLOURS[odd_c], "metallic": 0.0, "roughness": 0.5}
    prompt = (
        f"Paint every object in the scene taller than {cut:g} m {tall_c} ({tall['color']}), "
        f"metallic 1, roughness {tall['roughness']:g}, and every other object {short_c} "
        f"({short['color']}), metallic 0, roughness {short['roughness']:g}; but make "
        f"'{odd['name']}' {odd_c} ({special['color']}), metallic 0, roughness 0.5, whatever its "
        "height. Check the heights in the scene first."
    )
    oracle, constraints = [call("get_scene")], []
    for it in items:
        mat = special if it is odd else tall if it["dimensions"][2] > cut else short
        oracle.append(call("set_material", name=it["name"], **mat))
        constraints.append({"kind": "material", "object": it["name"], **mat})
        constraints += placed(it, kind_check=False, guard=True)
    return TaskSpec(
        prompt=prompt,
        parameters={"start": items, "height_cut": cut},
        oracle=oracle,
        constraints=constraints,
        start=[add_call(it) for it in items],
    )


def materials(level: int, rng: random.Random) -> TaskSpec:
    if level == 5:
        return _materials_5(rng)
    n = {1: 1, 2: 3, 3: 8, 4: 10}[level]  # at most len(COLOURS)
    items = random_items(rng, n + 1)
    colours = rng.sample(sorted(COLOURS), n)
    texts, oracle, constraints = [], [], []
    for it, colour in zip(items[:n], colours, strict=True):
        args: dict[str, Any] = {"name": it["name"], "color": COLOURS[colour]}
        text = f"make '{it['name']}' {colour} ({COLOURS[colour]})"
        if level >= 3:
            args["metallic"] = rng.choice((0.0, 1.0))
            args["roughness"] = rng.choice((0.2, 0.5, 0.8))
            text += f", metallic {args['metallic']:g}, roughness {args['roughness']:g}"
        texts.append(text)
        oracle.append(call("set_material", **args))
        constraints.append(
            {
                "kind": "material",
                "object": it["name"],
                **{k: v for k, v in args.items() if k != "name"},
            }
        )
    for it in items:
        constraints += placed(it, kind_check=False, guard=True)
    prompt = rng.choice(("Paint the scene: ", "Set materials: ", "")) + "; ".join(texts) + "."
    return TaskSpec(
        prompt=prompt[0].upper() + prompt[1:],
        parameters={"start": items, "materials": texts},
        oracle=oracle,
        constraints=constraints,
        start=[add_call(it) for it in items],
    )


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"^(?:Paint the scene: |Set materials: )",
         "Materials: ", "Paint these: ", "Colour the objects: ", "Set materials: ",
         "Paint the scene: ", unseen=("Time to paint: ", "Give these objects new materials: ")),
    swap(rf"^Paint every object in the scene taller than (?P<h>{N}) m ",
         "Paint each object taller than {h} m ", "Colour every object in the scene taller than {h} m ",
         "Paint all objects taller than {h} m ", "Paint every object in the scene over {h} m tall ",
         "Make every object taller than {h} m ",
         unseen=("Anything in the scene taller than {h} m should be painted ",
                 "Objects over {h} m tall get painted ")),
    swap(r" Check the heights in the scene first\.",
         " Look up the heights in the scene first.", " Read the heights from the scene before painting.",
         " The scene tells you the heights: check them first.", " Check each object's height first.",
         " Check the heights in the scene first.",
         unseen=(" You'll need the objects' heights from the scene.",
                 " Heights aren't given here; find them in the scene.")),
    *PAINT,
))


FAMILY = Family(
    name="materials",
    description="Give objects of a prepared scene the named colours and finishes.",
    domain="scenes",
    levels=(1, 2, 3, 4, 5),
    weights=RELATION_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("scene"),
    wordings=WORDINGS,
    make=materials,
)
