"""The `mass_targets` family (domain targets): Size parts of given materials to a mass and place a
counterweight so the centre of mass lands over a pivot.
"""

from __future__ import annotations

import random
from typing import Any

from training.tasks.recipes.phrases import LEADS, NAME, N
from training.tasks.recipes.repair import GAP_TOL, REPAIR_WEIGHTS, add_box, box_item, rounded, to_cm
from training.tasks.recipes.scene import placed
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap

# ================================================================ mass_targets (held out)

MATERIALS = {  # kg/m³ and the colour its parts are painted
    "steel": (7850, "#8C8C96"), "aluminium": (2700, "#D0D4D8"), "brass": (8500, "#C8A040"),
    "oak": (700, "#A07040"), "lead": (11340, "#50505A"), "concrete": (2400, "#A8A8A0"),
    "PLA plastic": (1240, "#3060C0"),
}


MASS_TOL = 0.02


WEIGHT_NAMES = ("Weight", "Bob", "Ingot", "Slab", "Puck", "Brick", "Tile", "Bar", "Nugget")


def _weight(rng, name, material, x, y, z0) -> tuple[dict[str, Any], float]:
    rho = MATERIALS[material][0]
    a, b = to_cm(rng.uniform(0.06, 0.15)), to_cm(rng.uniform(0.06, 0.15))
    m = round(rho * a * b * rng.uniform(0.04, 0.12), 1)
    h = m / (rho * a * b)
    return box_item(name, "cube", (a, b, h), (x, y, z0 + h / 2)), m


def mass_targets(level: int, rng: random.Random) -> TaskSpec:
    n_w = {1: 1, 2: 2, 3: 2, 4: 3, 5: 7}[level]
    paint = level >= 4
    names = rng.sample(WEIGHT_NAMES, n_w)
    start, oracle, constraints, texts = [], [], [], []
    used: set[str] = set()
    masses: dict[str, tuple[float, float]] = {}  # name: (kg, x)
    if level <= 2:
        z0, beam_len = 0.0, 0.0
        xs = [rounded(to_cm(rng.uniform(-1, -0.5)) + 0.8 * k) for k in range(n_w)]
    else:
        beam_len = to_cm(rng.uniform(2.8, 3.2) if level == 5 else rng.uniform(1.2, 2.0))
        beam = box_item("Beam", "cube", (beam_len, 0.16, 0.04), (0, 0, 0.5))
        start.append(add_box(beam))
        used.add("oak")
        constraints += placed(beam, kind_check=False, guard=True)
        z0 = 0.52
        # the weights sit on the left half; the counterweight balances them on the right
        step = min(0.3, (beam_len / 2 - 0.3) / max(1, n_w - 1))
        xs = [rounded(-beam_len / 2 + 0.12 + k * step) for k in range(n_w)]
    densities: dict[str, float] = {"Beam": MATERIALS["oak"][0]} if level >= 3 else {}
    for name, x in zip(names, xs, strict=True):
        mat = rng.choice(list(MATERIALS))
        used.add(mat)
        it, m = _weight(rng, name, mat, x, 0.0, z0)
        rho, colour = MATERIALS[mat]
        oracle.append(add_box(it))
        densities[name] = rho
        masses[name] = (m, x)
        constraints += [
            {"kind": "mass", "objects": [name], "density": rho, "value": m, "tol_rel": MASS_TOL},
            {"kind": "position", "object": name, "value": it["location"], "tol": 0.01},
        ]
        where = "on the floor" if level <= 2 else "standing on 'Beam'"
        constraints.append({"kind": "on_ground", "object": name, "tol": GAP_TOL} if level <= 2
                           else {"kind": "on_top", "upper": name, "lower": "Beam", "tol": GAP_TOL})
        d = it["dimensions"]
        texts.append(f"a {mat} box '{name}' of {m:g} kg, {d[0]:g} x {d[1]:g} m in plan, {where}, "
                     f"centred at x = {x:g} m, y = 0")
        if paint:
            oracle.append(call("set_material", name=name, color=colour))
            constraints.append({"kind": "material", "object": name, "color": colour})
    if level >= 3:
        # the counterweight: a box of a given plan and mass, at the x that balances the rest
        mat = rng.choice(("steel", "lead", "brass"))
        used.add(mat)
        rho, colour = MATERIALS[mat]
        moment = sum(m * x for m, x in masses.values())  # the beam is centred: no moment
        want_x = rng.uniform(0.3, beam_len / 2 - 0.15)
        m = max(0.1, round(-moment / want_x, 1))
        a, b = to_cm(rng.uniform(0.08, 0.15)), to_cm(rng.uniform(0.08, 0.15))
        h = m / (rho * a * b)
        cw = box_item("Counterweight", "cube", (a, b, h), (-moment / m, 0.0, z0 + h / 2))
        oracle.append(add_box(cw))
        densities["Counterweight"] = rho
        constraints += [
            {"kind": "mass", "objects": ["Counterweight"], "density": rho, "value": m,
             "tol_rel": MASS_TOL},
            {"kind": "on_top", "upper": "Counterweight", "lower": "Beam", "tol": GAP_TOL},
            {"kind": "centre_of_mass", "densities": dict(densities), "value": [0.0, 0.0, 0.0],
             "tol": 0.01, "axes": "xy"},
        ]
        if paint:
            oracle.append(call("set_material", name="Counterweight", color=colour))
            constraints.append({"kind": "material", "object": "Counterweight", "color": colour})
        texts.append(
            f"then a {mat} box 'Counterweight' of {m:g} kg, {a:g} x {b:g} m in plan, on 'Beam' "
            "at y = 0, placed along x so the centre of mass of the beam and everything on it "
            "lies over the pivot at x = 0 (within 1 cm)"
        )
    if level >= 3:  # weigh everything and find the centre of mass before finishing
        oracle.append(call("mass_properties", names=list(densities)))
    intro = ("'Beam' is an oak plank resting on a pivot at the origin. Add " if level >= 3
             else "Add ")
    dens = ", ".join(f"{k} {MATERIALS[k][0]:g}" for k in MATERIALS if k in used)
    prompt = intro + "; ".join(texts) + f". Densities (kg/m³): {dens}."
    if paint:
        prompt += " Paint each part its material's colour: " + ", ".join(
            f"{k} {MATERIALS[k][1]}" for k in MATERIALS if k in used and k != "oak") + "."
    return TaskSpec(
        prompt=prompt,
        parameters={"densities": densities, "masses_kg": {k: v[0] for k, v in masses.items()}},
        oracle=oracle,
        constraints=constraints,
        start=start,
    )


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(rf"an? (?P<mat>steel|oak|concrete|brass|aluminium) box (?P<n>{NAME}) of (?P<kg>{N}) kg",
         "a {kg} kg {mat} box {n}", "a {mat} box {n} weighing {kg} kg", "a box {n} of {mat}, {kg} kg",
         "a {mat} block {n} with a mass of {kg} kg", "a {mat} box {n} of {kg} kg",
         unseen=("{n}, a box made of {mat} that weighs {kg} kg",)),
    swap(r"Densities \(kg/m³\): ", "Densities in kg/m³: ", "Use these densities (kg/m³): ",
         "Material densities (kg/m³): ", "Densities (kg/m³): ", "Densities (kg/m³): ",
         unseen=("Take the densities (kg/m³) as: ",)),
    swap(r"lies over the pivot", "lies over the pivot", "is right above the pivot",
         "sits over the pivot", "falls over the pivot", "lies over the pivot",
         unseen=("balances over the pivot",)),
    *LEADS,
))


FAMILY = Family(
    name="mass_targets",
    description="Size parts of given materials to a mass and place a counterweight so the centre of mass "
    "lands over a pivot.",
    domain="targets",
    levels=(1, 2, 3, 4, 5),
    weights=REPAIR_WEIGHTS,
    held_out=True,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("scene", extra=("mass_properties",)),
    wordings=WORDINGS,
    make=mass_targets,
)
