"""The `lighting_camera` family (domain scenes): Place a camera and lights so a described subject
is framed and lit (three-point lighting).
"""

from __future__ import annotations

import math
import random

import numpy as np

from training.tasks.config import RELATION_WEIGHTS
from training.tasks.recipes.boxes import (
    add,
    box,
    rounded,
    rounded_all,
    size_text,
    where,
)
from training.tasks.recipes.phrases import LEADS, SCENE
from training.tasks.recipes.scene import COLOURS, fmt
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap

# ================================================================ lighting and camera

SUBJECTS = (("Vase", "cylinder"), ("Bust", "uv_sphere"), ("Crate", "cube"), ("Lamp", "cone"),
            ("Trophy", "cylinder"), ("Globe", "uv_sphere"), ("Box", "cube"), ("Cone", "cone"))


def _subject(rng: random.Random, name: str, kind: str, x: float, y: float, z0: float = 0.0,
             d: float | None = None):
    d = d or rng.choice((0.4, 0.5, 0.6))
    h = d if kind == "uv_sphere" else rng.choice((0.6, 0.8, 1.0))
    return box(name, (d, d, h), (x, y, z0 + h / 2), kind=kind)


def _fill_of(cam, target, lens, items) -> float:
    """The share of a square frame the items' boxes span (as the `framed` check measures)."""
    p, t = np.asarray(cam, float), np.asarray(target, float)
    fwd = (t - p) / np.linalg.norm(t - p)
    right = np.cross(fwd, [0, 0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, fwd)
    half = 18.0 / lens
    pts = []
    for it in items:
        c, d = np.asarray(it["location"]), np.asarray(it["dimensions"]) / 2
        for k in range(8):
            q = c + np.where([k & 1, k & 2, k & 4], d, -d) - p
            z = np.dot(q, fwd)
            pts.append((np.dot(q, right) / z / half, np.dot(q, up) / z / half))
    xy = np.array(pts)
    return float(max(np.ptp(xy[:, 0]), np.ptp(xy[:, 1])) / 2)


def _bounds_centre(items) -> np.ndarray:
    lo = np.min([np.asarray(i["location"]) - np.asarray(i["dimensions"]) / 2 for i in items], 0)
    hi = np.max([np.asarray(i["location"]) + np.asarray(i["dimensions"]) / 2 for i in items], 0)
    return (lo + hi) / 2


VIEWS = {"front": (0, -1), "front-right": (1, -1), "right": (1, 0), "front-left": (-1, -1),
         "left": (-1, 0)}


def _camera_plan(rng, items, lens, exact: bool):
    """A camera aimed at the items' centre from a named side, at the distance that fills ~60 %."""
    side = rng.choice(sorted(VIEWS))
    el = math.radians(rng.choice((20, 30, 40)))
    hx, hy = VIEWS[side]
    horiz = np.array([hx, hy], float) / math.hypot(hx, hy)
    v = np.array([horiz[0] * math.cos(el), horiz[1] * math.cos(el), math.sin(el)])
    c = _bounds_centre(items)
    dist = 1.0
    while _fill_of(c + dist * v, c, lens, items) > 0.6:
        dist += 0.1
    loc = rounded_all(c + dist * v)
    target = rounded_all(c)
    view = rounded_all(v)
    fill = [0.15, 0.95] if exact else [0.4, 0.85]
    con = {"kind": "framed", "camera": "Cam", "objects": [i["name"] for i in items],
           "fill": fill}
    if exact:
        con |= {"location": loc, "tol": 0.1}
        text = (f"a camera 'Cam' at {fmt(loc)} with a {lens:g} mm lens, aimed at {fmt(target)} "
                f"so the subject is in view")
    else:
        con |= {"view": view, "tol_deg": 10.0}
        text = (f"a camera 'Cam' with a {lens:g} mm lens (36 mm sensor, square frame) looking "
                f"from the {side} and {round(math.degrees(el))}° above (the unit direction "
                f"[{', '.join(f'{x:g}' for x in view)}] from the subjects' centre "
                f"{fmt(target)}), aimed at that centre, at a distance where they fill 40-85 % of the frame")
    return call("add_camera", name="Cam", location=loc, target=target, lens_mm=lens), con, text


def _light(name, kind, loc, target, energy, role):
    loc, target = rounded_all(loc), rounded_all(target)
    step = call("add_light", kind=kind, name=name, location=loc, energy=energy, target=target)
    con = {"kind": "light", "object": name, "type": kind,
           "energy": [rounded(energy * 0.9), rounded(energy * 1.1)], "aim": target, "tol_deg": 5.0,
           "location": loc, "tol": 0.1}
    article = "an" if role[:1] in "aeiou" else "a"
    text = f"{article} {role} {kind} light '{name}' of {energy:g} W at {fmt(loc)} aimed at {fmt(target)}"
    return step, con, text


def lighting_camera(level: int, rng: random.Random) -> TaskSpec:
    x, y = rng.choice((-1.0, 0.0, 1.0)), rng.choice((-0.5, 0.0, 0.5))
    picks = rng.sample(SUBJECTS, 3)
    start: list[dict] = []
    oracle: list[dict] = []
    cons: list[dict] = []
    texts: list[str] = []
    if level <= 2:
        subj = [_subject(rng, *picks[0], x, y)]
        start = [add(subj[0])]
        cons += where(subj[0], weight=0.2)
    elif level <= 4:
        z0 = 0.0
        if level == 4:
            plinth = box("Plinth", (0.8, 0.8, 0.5), (x, y, 0.25))
            oracle.append(add(plinth))
            cons += where(plinth)
            texts.append(f"a plinth 'Plinth' {size_text(plinth['dimensions'])} centred at "
                         f"({x:g}, {y:g}) m on the ground")
            z0 = 0.5
        subj = [_subject(rng, *picks[0], x, y, z0)]
        oracle.append(add(subj[0]))
        cons += where(subj[0])
        texts.append(f"the subject, a {picks[0][1].replace('uv_', '')} '{subj[0]['name']}' "
                     f"{size_text(subj[0]['dimensions'])} standing "
                     + ("on the plinth, centred" if level == 4 else f"on the ground at ({x:g}, {y:g}) m"))
    else:
        floor = box("Floor", (6, 6, 0.02), (0, 0, -0.01))
        wall = box("Backdrop", (6, 0.05, 3), (0, 3.025, 1.5))
        table = box("Table", (1.8, 0.8, 0.75), (0, 0.6, 0.375))
        oracle += [add(floor), add(wall), add(table)]
        cons += where(floor) + where(wall) + where(table)
        texts.append("a floor 'Floor' 6 x 6 x 0.02 m with its top at z = 0, a backdrop 'Backdrop' "
                     "6 x 0.05 x 3 m standing on it along y = 3 m (its front face at y = 3), and a "
                     "table 'Table' 1.8 x 0.8 x 0.75 m centred at (0, 0.6) m on the floor")
        subj = []
        colours = rng.sample(sorted(COLOURS), 3)
        for i, (name, kind) in enumerate(picks):
            # the outer two as wide: the subjects' centre is over the middle one (x = 0)
            s = _subject(rng, name, kind, -0.6 + 0.6 * i, 0.6, 0.75,
                         d=subj[0]["dimensions"][0] if i == 2 else None)
            subj.append(s)
            oracle.append(add(s))
            cons += where(s) + [{"kind": "on_top", "upper": name, "lower": "Table", "tol": 0.02}]
        for s, col in zip(subj, colours, strict=True):
            oracle.append(call("set_material", name=s["name"], color=COLOURS[col]))
            cons.append({"kind": "material", "object": s["name"], "color": COLOURS[col]})
        texts.append("on the table, centred on its depth at x = -0.6, 0 and 0.6 m: " + ", ".join(
            f"a {k.replace('uv_', '')} '{s['name']}' {size_text(s['dimensions'])} coloured {c} "
            f"({COLOURS[c]})" for s, (_, k), c in zip(subj, picks, colours, strict=True)))
    lens = rng.choice((35.0, 50.0, 85.0)) if level >= 3 else 50.0
    if level <= 2:  # a camera at a given place
        c = _bounds_centre(subj)
        side = np.array([rng.choice((-1, 1)) * 3.0, -4.0, 2.0])
        cam_loc, cam_target = rounded_all(c + side), rounded_all(c)
        cam_step = call("add_camera", name="Cam", location=cam_loc, target=cam_target, lens_mm=lens)
        cam_con = {"kind": "framed", "camera": "Cam", "objects": [s["name"] for s in subj],
                   "fill": [0.1, 0.95], "location": cam_loc, "tol": 0.1}
        cam_text = (f"a camera 'Cam' at {fmt(cam_loc)} with a {lens:g} mm lens aimed at the "
                    f"centre of '{subj[0]['name']}' {fmt(cam_target)}")
    else:
        cam_step, cam_con, cam_text = _camera_plan(rng, subj, lens, exact=False)
    oracle.append(cam_step)
    cons.append(cam_con)
    texts.append(cam_text)
    c = _bounds_centre(subj)
    cam = np.asarray(cam_step["args"]["location"])
    back = (cam - c)[:2] / np.linalg.norm((cam - c)[:2])  # towards the camera, horizontal
    left = np.array([-back[1], back[0]])

    def around(towards, sideways, up, dist):
        h = towards * back + sideways * left
        h = h / np.linalg.norm(h)
        return [round(c[0] + dist * h[0], 1), round(c[1] + dist * h[1], 1), round(c[2] + up, 1)]

    key_e = float(rng.choice((800, 1000, 1200)))
    roles = []
    if level >= 2:
        roles.append(("Key", "spot", around(1, 1, 2.0, 3.0), key_e, "key"))
    if level >= 3:
        roles.append(("Fill", rng.choice(("area", "spot")), around(1, -1, 1.0, 3.0), key_e / 2,
                      "fill"))
    if level >= 4:
        roles.append(("Rim", "spot", around(-1, 0.3, 2.5, 3.0), key_e * 0.75, "rim"))
    for name, kind, loc, energy, role in roles:
        step, con, text = _light(name, kind, loc, c, energy, role)
        oracle.append(step)
        cons.append(con)
        texts.append(text)
    if level == 5:
        for i, s in enumerate(subj):
            loc = [s["location"][0], round(s["location"][1] - 1.2, 1), 3.0]
            step, con, text = _light(f"Spot{i + 1}", "spot", loc, s["location"], 300.0,
                                     f"accent (for '{s['name']}')")
            oracle.append(step)
            cons.append(con)
            texts.append(text)
    lead = rng.choice(("Set up a shot", "Prepare the photo", "Light and frame the subject"))
    where_txt = (f" of '{subj[0]['name']}' (already in the scene)" if level <= 2 else "")
    prompt = (f"{lead}{where_txt} (metres, z up). Add " + "; ".join(texts) + ".")
    return TaskSpec(prompt=prompt, parameters={"subjects": [s["name"] for s in subj],
                                               "lens_mm": lens},
                    oracle=oracle, constraints=cons, start=start)


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"aimed at", "pointed at", "pointing at", "aimed at", "looking at", "aimed at",
         unseen=("trained on",)),
    swap(r"at a distance where they fill (?P<a>\d+)-(?P<b>\d+) % of the frame",
         "far enough that they fill {a}-{b} % of the frame",
         "at a distance where they take up {a}-{b} % of the frame",
         "placed so they fill {a} to {b} % of the frame",
         "at a distance where they fill between {a} and {b} % of the frame",
         "at a distance where they fill {a}-{b} % of the frame",
         unseen=("so the subjects cover {a}-{b} % of the picture",)),
    *SCENE,
    *LEADS,
))


FAMILY = Family(
    name="lighting_camera",
    description="Place a camera and lights so a described subject is framed and lit (three-point lighting).",
    domain="scenes",
    levels=(1, 2, 3, 4, 5),
    weights=RELATION_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("scene", "shot"),
    wordings=WORDINGS,
    make=lighting_camera,
)
