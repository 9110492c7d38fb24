"""The `mesh_repair` family (domain repair): Make imported meshes watertight: weld seams, fill
holes, fix normals, delete loose parts.
"""

from __future__ import annotations

import math
import random

from training.tasks.recipes.repair import REPAIR_WEIGHTS, rounded, to_cm
from training.tasks.recipes.scene import placed
from training.tasks.spec import Family, TaskSpec, call
from training.tasks.toolbox import declare
from training.tasks.wording import Wordings, swap

# ================================================================ mesh_repair

DEFECTS = ("unwelded", "debris", "holes", "flipped")


DEFECT_WORDS = {
    "unwelded": "unwelded seams (duplicate vertices)",
    "debris": "a loose fragment",
    "holes": "holes",
    "flipped": "faces with flipped normals",
}


# The repair each defect needs, in the order that works (weld before filling or re-winding).
DEFECT_OPS = {"unwelded": "merge_by_distance", "debris": "keep_largest", "holes": "fill_holes",
              "flipped": "recalculate_normals"}


DEFECT_FACTS = {"unwelded": ["welded", "closed"], "debris": ["one_piece"], "holes": ["closed"],
                "flipped": ["consistent", "outward"]}


MESH_NAMES = ("Scan", "Bracket", "Housing", "Knob", "Figure", "Pillar", "Casting", "Token")


def _prism(rng: random.Random) -> tuple[list[tuple[float, float]], float, str]:
    """A closed outline (counter-clockwise, metres) and a height: a box, an n-gon or an L."""
    shape = rng.choice(("box", "ngon", "ell"))
    a, b = to_cm(rng.uniform(0.3, 0.8)), to_cm(rng.uniform(0.3, 0.8))
    h = to_cm(rng.uniform(0.2, 0.6))
    if shape == "box":
        pts = [(-a / 2, -b / 2), (a / 2, -b / 2), (a / 2, b / 2), (-a / 2, b / 2)]
    elif shape == "ngon":
        n = rng.choice((6, 8, 10))
        pts = [(a / 2 * math.cos(2 * math.pi * k / n), a / 2 * math.sin(2 * math.pi * k / n))
               for k in range(n)]
    else:
        c = to_cm(min(a, b) * 0.5)
        pts = [(-a / 2, -b / 2), (a / 2, -b / 2), (a / 2, -b / 2 + c), (-a / 2 + c, -b / 2 + c),
               (-a / 2 + c, b / 2), (-a / 2, b / 2)]
    return [(rounded(x), rounded(y)) for x, y in pts], h, shape


def broken_mesh(rng: random.Random, pts, h: float, at, defects) -> tuple[list, list]:
    """Vertices (Blender world, metres) and faces (0-based) of a prism with `defects`."""
    n = len(pts)
    x0, y0 = at
    verts = [(x0 + x, y0 + y, 0.0) for x, y in pts] + [(x0 + x, y0 + y, h) for x, y in pts]
    faces = [list(range(n - 1, -1, -1)), list(range(n, 2 * n))]
    faces += [[k, (k + 1) % n, n + (k + 1) % n, n + k] for k in range(n)]
    if "holes" in defects:  # one or two side walls missing (never neighbours)
        k = rng.randrange(n)
        gone = {2 + k} | ({2 + (k + n // 2) % n} if n >= 6 and rng.random() < 0.5 else set())
        faces = [f for i, f in enumerate(faces) if i not in gone]
    if "flipped" in defects:  # a few faces wound backwards
        for i in rng.sample(range(len(faces)), max(1, len(faces) // 3)):
            faces[i] = faces[i][::-1]
    if "unwelded" in defects:  # every face on its own copies of its corners
        soup, out = [], []
        for f in faces:
            out.append(list(range(len(soup), len(soup) + len(f))))
            soup += [verts[v] for v in f]
        verts, faces = soup, out
    if "debris" in defects:  # a small closed cube beside the body
        s, cx = 0.05, x0 + max(x for x, _ in pts) + 0.15
        base = len(verts)
        verts = verts + [(cx + dx * s, y0 + dy * s, dz * s) for dz in (0, 1) for dy in (0, 1)
                         for dx in (0, 1)]
        cube = [[0, 2, 3, 1], [4, 5, 7, 6], [0, 1, 5, 4], [2, 6, 7, 3], [0, 4, 6, 2], [1, 3, 7, 5]]
        faces = faces + [[base + i for i in f] for f in cube]
    return verts, faces


def obj_text(objects: list[tuple[str, list, list]]) -> bytes:
    """An OBJ file holding named objects, Z up (as the scene is)."""
    lines, base = ["# scanned parts"], 1
    for name, verts, faces in objects:
        lines.append(f"o {name}")
        lines += [f"v {x:.6f} {y:.6f} {z:.6f}" for x, y, z in verts]
        lines += ["f " + " ".join(str(base + i) for i in f) for f in faces]
        base += len(verts)
    return ("\n".join(lines) + "\n").encode()


def mesh_repair(level: int, rng: random.Random) -> TaskSpec:
    n_mesh, n_def = {1: (1, 1), 2: (1, 2), 3: (2, 2), 4: (2, 3), 5: (4, 4)}[level]
    names = rng.sample(MESH_NAMES, n_mesh)
    objects, oracle, constraints, found, words = [], [], [], [], []
    for i, name in enumerate(names):
        defects = sorted(rng.sample(DEFECTS, n_def), key=DEFECTS.index)
        pts, h, _ = _prism(rng)
        at = (rounded(-1.5 * (n_mesh - 1) + 3.0 * i), 0.0)
        verts, faces = broken_mesh(rng, pts, h, at, defects)
        objects.append((name, verts, faces))
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        body = {"name": name, "kind": "cube", "rotation_deg": [0.0, 0.0, 0.0],
                "dimensions": [rounded(max(xs) - min(xs)), rounded(max(ys) - min(ys)), h],
                "location": [rounded(at[0] + (max(xs) + min(xs)) / 2),
                             rounded(at[1] + (max(ys) + min(ys)) / 2), rounded(h / 2)]}
        if level >= 4:  # the prompt does not say what is wrong: look first
            oracle.append(call("mesh_check", name=name))
        oracle += [call("mesh_repair", name=name, operation=DEFECT_OPS[d]) for d in defects]
        facts = ["manifold"] + [f for d in defects for f in DEFECT_FACTS[d]]
        constraints += [{"kind": "mesh_health", "object": name, "require": [f]}
                        for f in dict.fromkeys(facts)]
        constraints += placed(body, kind_check=False, guard=True)
        words.append(" and ".join(DEFECT_WORDS[d] for d in defects))
        found.append(f"'{name}' ({', '.join(DEFECT_WORDS[d] for d in defects)})")
    path = "scan.obj" if n_mesh == 1 else "scans.obj"
    if level == 1:
        prompt = (f"The mesh '{names[0]}' imported from {path} has "
                  f"{words[0]}. Repair it so it is watertight and "
                  "manifold, with outward normals, without moving or resizing it.")
    else:
        which = "; ".join(found) if level <= 3 else ", ".join(f"'{n}'" for n in names)
        prompt = (f"These meshes were imported from {path} for 3D printing and are broken: "
                  f"{which}. Repair each so it is one watertight, manifold piece with outward "
                  "normals, keeping its size and place.")
        if level >= 4:
            prompt += " Check each mesh to find out what is wrong with it."
    return TaskSpec(
        prompt=prompt,
        parameters={"meshes": names, "file": path},
        oracle=oracle,
        constraints=constraints,
        files={path: obj_text(objects)},
        # the importer turns Y-up files to Z-up on the object; this file is Z-up already
        start=[call("import_file", path=path)]
        + [call("transform", name=n, rotation_deg=[0.0, 0.0, 0.0]) for n in names],
    )


# Its goals re-said in the other wordings (training/tasks/wording.py): its own phrases,
# then the shared ones (training/tasks/recipes/phrases.py).
WORDINGS = Wordings(swaps=(
    swap(r"Repair (?P<w>it|each) so", "Fix {w} so", "Mend {w} so", "Repair {w} so",
         "Clean up {w} so", "Repair {w} so", unseen=("Sort out {w} so",)),
    swap(r"watertight", "closed (watertight)", "watertight", "water-tight", "watertight",
         "watertight", unseen=("sealed (no open edges)",)),
    swap(r"keeping its size and place", "without moving or resizing it",
         "leaving its size and position unchanged", "keeping its size and position",
         "at the same size and place", "keeping its size and place",
         unseen=("not changing where it is or how big",)),
))


FAMILY = Family(
    name="mesh_repair",
    description="Make imported meshes watertight: weld seams, fill holes, fix normals, delete loose parts.",
    domain="repair",
    levels=(1, 2, 3, 4, 5),
    weights=REPAIR_WEIGHTS,
    held_out=False,
    # Its prompts' tools, chosen without looking at its solutions (training/tasks/toolbox.py):
    toolbox=declare("mesh", extra=("measure",)),
    wordings=WORDINGS,
    make=mesh_repair,
)
