"""The `engraved_text` family (domain parts): Engrave or emboss text on plates, tags and panels
(with corner rounds, holes and labels).
"""

from __future__ import annotations

import random

from training.tasks.config import CAD_WEIGHTS
from training.tasks.recipes.cad_plan import (
    fmt,
    join_parts,
    lead,
    reference,
    spec,
)
from training.tasks.recipes.phrases import CAD, LEADS, N
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap

WORDS = ("PUMP", "FAN", "VALVE", "IN", "OUT", "A-12", "12V", "MAIN", "AUX", "TEST", "OK", "B7",
         "LINE", "GND", "ZONE 3", "NO 5")


LABELS = ("VOL", "GAIN", "BASS", "MID", "HI", "LO", "PAN", "FX", "MIX", "TONE", "AMP", "REV")


def _text_task(plan, names, main, prompt, params):
    base = reference(plan, main, skip=("cad_text",))
    feature = {"kind": "feature", "object": main, "script": reference(plan, main), "base": base,
               "min_iou": 0.9}
    return spec(prompt, plan, names, params, topology=False, extra=[feature], geometry_min=0.99)


def engraved_text(level: int, rng: random.Random) -> TaskSpec:
    name = rng.choice(("Tag", "Plate", "Sign", "Label"))
    mode = rng.choice(("engrave", "emboss"))
    verb = {"engrave": "engraved", "emboss": "embossed"}[mode]
    if level == 5:
        return _panel(rng, name.replace("Tag", "Panel").replace("Label", "Panel"))
    word = rng.choice(WORDS)
    th = rng.choice((6, 8, 10))
    ln = max(rng.choice((50, 60, 70, 80)), int(0.8 * th * len(word)) // 10 * 10 + 30)
    wd, t = rng.choice((20, 25, 30)), rng.choice((3, 4, 5))
    depth = rng.choice((0.5, 1))
    plan = [call("cad_box", name=name, length=ln, width=wd, height=t)]
    words = [f"a {ln} x {wd} x {t} mm plate '{name}' (centred in XY, bottom on Z=0)"]
    x = 0
    if level >= 2:
        rf = rng.choice((3, 4, 5))
        plan.append(call("cad_fillet", name=name, edges="|Z", radius=rf))
        words.append(f"its corners rounded r={rf} mm")
    if level >= 4:
        plan.append(call("cad_chamfer", name=name, edges=">Z", length=0.5))
        words.append("its top edges chamfered 0.5 mm")
    if level >= 3:
        dh = rng.choice((4, 5))
        hx = -(ln // 2 - 6)
        plan.append(call("cad_hole", name=name, diameter=dh, positions=[[hx, 0]]))
        words.append(f"a {dh} mm hole at ({hx}, 0) mm to hang it by")
        x = 4
    y = 0
    if level >= 4:
        th = min(th, wd // 4 + 1)
        y = round(wd / 4, 1)
    first = "engrave" if level >= 4 else mode  # raised letters would be the top face after
    plan.append(call("cad_text", name=name, text=word, height=th, depth=depth, mode=first,
                     position=[x, y]))
    words.append(f"the text '{word}' {verb if first == mode else 'engraved'} {fmt(depth)} mm on "
                 f"the top face, letters {th} mm tall, centred at ({x}, {fmt(y)}) mm")
    if level >= 4:
        word2 = rng.choice([w for w in WORDS if w != word])
        plan.append(call("cad_text", name=name, text=word2, height=th, depth=depth, mode=mode,
                         position=[x, -y]))
        words.append(f"then a second line '{word2}' {verb} the same depth, as tall, centred at "
                     f"({x}, {fmt(-y)}) mm")
    prompt = f"{lead(rng)} {join_parts(words)}."
    return _text_task(plan, [name], name, prompt, {"level": level, "mode": mode,
                                                   "size": [ln, wd, t]})


def _panel(rng: random.Random, name: str) -> TaskSpec:
    n = rng.choice((7, 8))
    sp = 22
    ln, wd, t = n * sp + 20, 50, rng.choice((4, 5))
    rf, dk, dm = rng.choice((4, 5)), rng.choice((6, 7)), 3.5
    labels = rng.sample(LABELS, n)
    knobs = [[round((i - (n - 1) / 2) * sp, 3), 6.0] for i in range(n)]
    mx, my = ln / 2 - 6, wd / 2 - 6
    corners = [[-mx, -my], [mx, -my], [-mx, my], [mx, my]]
    title = rng.choice(("MIXER", "CONTROL", "DRIVE", "SYNTH"))
    plan = [
        call("cad_box", name=name, length=ln, width=wd, height=t),
        call("cad_fillet", name=name, edges="|Z", radius=rf),
        call("cad_chamfer", name=name, edges=">Z", length=0.5),
        call("cad_pattern", kind="grid", count_x=2, count_y=2, spacing_x=2 * mx, spacing_y=2 * my),
        call("cad_hole", name=name, diameter=dm, positions=corners),
        call("cad_pattern", kind="grid", count_x=n, count_y=1, spacing_x=sp),
        call("cad_hole", name=name, diameter=dk, positions=knobs),
    ]
    for (x, _), label in zip(knobs, labels, strict=True):
        plan.append(call("cad_text", name=name, text=label, height=4, depth=0.5,
                         position=[x, -8]))
    plan.append(call("cad_text", name=name, text=title, height=6, depth=0.5, mode="emboss",
                     position=[0, 17]))
    prompt = (
        f"Make a control panel '{name}' {ln} x {wd} x {t} mm (centred in XY, bottom on Z=0) with "
        f"its corners rounded r={rf} mm and its top edges chamfered 0.5 mm, four {dm} mm mounting "
        f"holes at (±{fmt(mx)}, ±{fmt(my)}) mm, a row of {n} knob holes {dk} mm across at "
        f"Y=6 mm, {sp} mm apart and centred on X=0, under each knob hole its label engraved "
        f"0.5 mm deep with letters 4 mm tall centred at Y=-8 mm ({', '.join(labels)} from -X "
        f"to +X), and last the title '{title}' embossed 0.5 mm, 6 mm tall, centred at (0, 17) mm."
    )
    return _text_task(plan, [name], name, prompt, {"level": 5, "labels": labels,
                                                   "size": [ln, wd, t]})


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(rf"(?<!with )letters (?P<h>{N}) mm tall", "{h} mm high letters", "in {h} mm letters",
         "letter height {h} mm", "with {h} mm tall letters", "letters {h} mm tall",
         unseen=("a text height of {h} mm",)),
    swap(rf"(?P<how>embossed|engraved) (?P<d>{N}) mm on the top face",
         "{how} on the top face, {d} mm", "{how} by {d} mm on the top face",
         "{how} {d} mm on the top", "on the top face, {how} {d} mm",
         "{how} {d} mm on the top face",
         unseen=("{how} to {d} mm on the upper face",)),
    swap(rf"rounded r=(?P<r>{N}) mm", "rounded to radius {r} mm", "rounded r = {r} mm",
         "rounded with radius {r} mm", "rounded r={r} mm", "rounded r={r} mm",
         unseen=("rounded off at {r} mm",)),
    *LEADS,
    *CAD,
))


FAMILY = Family(
    name="engraved_text",
    description="Engrave or emboss text on plates, tags and panels (with corner rounds, holes and labels).",
    domain="parts",
    levels=(1, 2, 3, 4, 5),
    weights=CAD_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("cad", extra=("cad_text",)),
    wordings=WORDINGS,
    make=engraved_text,
)
