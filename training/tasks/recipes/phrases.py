"""Phrase swaps several families share (training/tasks/wording.py): how their templates'
common phrases are said in the other wordings. A family lists the sets it uses, after its own
swaps, in its `Wordings`. Each replacement keeps every number and name of the phrase; the first
`seen` entries are wordings 1.., `unseen` only the held-out wordings.
"""

from __future__ import annotations

from training.tasks.wording import swap

N = r"\d+(?:\.\d+)?"  # a plain number, as a template writes it
SIZE = r"\([^()']*\) m"  # "(1, 0.5, 2) m"
NAME = r"'[^']+'"


def _lead(*forms: str):
    """A sentence's imperative lead ("Create ") said another way: `forms` take `{v}`, the verb
    in lower case."""
    return tuple((lambda m, f=f: f.format(v=m.group("v").lower())) for f in forms)


# Imperatives that open a goal: Create, Add, Make, Model, Build, Place, Put.
LEADS = (
    swap(r"^(?P<v>Create|Add|Make|Model|Build|Place|Put|Set up|Design|Turn) ",
         *_lead("Please {v} ", "I'd like you to {v} ", "Could you {v} ", "Go ahead and {v} ",
                "I need you to {v} "),
         unseen=_lead("What I want: {v} ", "Your job is to {v} ")),
)

# Objects of a metre scene: kind, name, size, centre, turn, resting on another.
SCENE = (
    swap(rf"a (?P<kind>box|cylinder|sphere|cone|cube) named (?P<name>{NAME}) of size "
         rf"(?P<size>{SIZE})",
         "a {kind} called {name}, {size} in size,", "{name}, a {kind} measuring {size}",
         "a {kind} {name} sized {size}", "a {kind} named {name} with size {size}",
         "a {kind} {name} of size {size}",
         unseen=("a {kind} (name it {name}) whose bounding box is {size}",
                 "a {kind} that should be called {name}, {size} overall")),
    swap(rf"(?<= m) centred at (?P<at>{SIZE})",
         " with its centre at {at}", " centred on {at}", ", centre {at}", " at {at} (centre)",
         " with its centre point at {at}",
         unseen=(", its middle at {at}", ", its centre point being {at}")),
    swap(r"turned (?P<a>\d+)° about Z",
         "rotated {a}° about Z", "turned {a}° around the Z axis", "at {a}° about Z",
         "yawed {a}° (about Z)", "with a {a}° turn about Z",
         unseen=("spun {a}° around the vertical axis", "twisted {a}° about the up axis")),
    swap(rf"resting on top of (?P<base>{NAME}), centred on it",
         "sitting on top of {base}, centred", "stacked centred on {base}",
         "on top of {base} (centred on it)", "placed centred on top of {base}",
         "resting centred on {base}",
         unseen=("perched right in the middle of {base}'s top",
                 "sat on {base} with their centres lined up")),
    swap(r"resting on the ground",
         "resting on the ground", "standing on the ground", "sitting on the ground",
         "on the ground", "resting on the floor",
         unseen=("touching the ground from above", "down on the ground plane")),
)

# Parts in millimetres: placement, diameters, holes, fillets, chamfers, counterbores.
CAD = (
    swap(r"\(centred in XY, bottom on Z=0\)",
         "(centred on the origin in XY, bottom on Z=0)", "(centred in plan, sitting on Z=0)",
         "(centre at the origin in XY, base at Z=0)", "(XY-centred, its bottom face on Z=0)",
         "(centred in X and Y, resting on Z=0)",
         unseen=("(middle of the part on the Z axis, underside at Z=0)",
                 "(centred about the origin in XY with the underside on Z=0)")),
    swap(rf"counterbored (?P<d>{N}) mm across and (?P<h>{N}) mm deep",
         "with a {d} mm counterbore {h} mm deep", "counterbored to {d} mm diameter, {h} mm deep",
         "with a counterbore {d} mm across and {h} mm deep",
         "counterbored {d} mm in diameter and {h} mm deep",
         "counterbored {d} mm across, {h} mm deep",
         unseen=("sunk with a {d} mm wide, {h} mm deep counterbore",)),
    swap(rf"(?<![\w.,±(])(?P<d>{N}) mm across",
         "{d} mm in diameter", "{d} mm across", "{d} mm diameter", "{d} mm across",
         "{d} mm in diameter",
         unseen=("{d} mm wide", "with a diameter of {d} mm")),
    swap(rf"(?<![\w.,±(])(?P<d>{N}) mm in diameter",
         "{d} mm across", "{d} mm in diameter", "of {d} mm diameter", "{d} mm in diameter",
         "{d} mm across",
         unseen=("{d} mm wide", "with a diameter of {d} mm")),
    swap(r"through holes",
         "through-holes", "through holes", "holes (through)", "through-holes", "thru holes",
         unseen=("clear-through holes",)),
    swap(rf"(?:(?<=filleted )|(?<=rounded ))r=(?P<r>{N}) mm",
         "radius {r} mm", "r = {r} mm", "to radius {r} mm", "with a radius of {r} mm",
         "r={r} mm",
         unseen=("at a radius of {r} mm", "to a radius of {r} mm")),
    swap(rf"chamfered (?P<c>{N}) mm",
         "chamfered {c} mm", "given a {c} mm chamfer", "chamfered by {c} mm",
         "bevelled {c} mm", "with a {c} mm chamfer",
         unseen=("eased with a {c} mm chamfer", "broken by a {c} mm chamfer")),
    swap(r"bolt circle",
         "bolt circle", "pitch circle", "bolt circle", "PCD", "bolt-hole circle",
         unseen=("circle of bolt holes",)),
    swap(r"centre bore",
         "centre bore", "central bore", "bore in the middle", "centre hole", "middle bore",
         unseen=("bore down the middle",)),
    swap(r"Lengths in millimetres\.",
         "All lengths in mm.", "Dimensions in millimetres.", "Units: millimetres.",
         "Lengths in mm.", "Everything is in millimetres.",
         unseen=("Sizes are given in millimetres.",)),
)

# Edits of a scene's objects (scene_editing, recovery): move, scale, turn, stack, delete.
MOVES = (
    swap(rf"scale (?P<n>{NAME}) by (?P<f>{N}) \(uniformly\) and keep it resting on the ground, "
         rf"i\.e\. centred at (?P<at>{SIZE})",
         "scale {n} uniformly by {f}, keeping it on the ground (centred at {at})",
         "resize {n} by a factor of {f} in every direction and keep it standing on the ground, "
         "its centre then at {at}",
         "make {n} {f} times its size (uniformly), still resting on the ground, i.e. centred "
         "at {at}",
         "scale {n} by {f} on all axes so that it stays on the ground, centred at {at}",
         "uniformly scale {n} by {f} and keep it grounded, centred at {at}",
         unseen=("grow or shrink {n} by {f} in every direction without lifting it off the "
                 "ground, so its centre lands at {at}",
                 "{n} needs to be {f} times as big in each direction, still on the ground, "
                 "centred at {at}")),
    swap(rf"then turn (?P<n>{NAME}) to (?P<a>\d+)° about Z",
         "then rotate {n} to {a}° about Z", "then set the Z rotation of {n} to {a}°",
         "after that turn {n} to {a}° around Z", "then give {n} a Z rotation of {a}°",
         "then turn {n} to {a}° about Z",
         unseen=("and then spin {n} round to {a}° about the vertical axis",
                 "next {n} should be rotated to {a}° about Z")),
    swap(rf"turn (?P<n>{NAME}) to (?P<a>\d+)° about the Z axis",
         "rotate {n} to {a}° about Z", "set the Z rotation of {n} to {a}°",
         "turn {n} to {a}° around the Z axis", "give {n} a Z rotation of {a}°",
         "rotate {n} so it sits at {a}° around Z",
         unseen=("spin {n} round until it is at {a}° about the vertical axis",
                 "{n} should be rotated to {a}° about Z")),
    swap(rf"put (?P<t>{NAME}) on top of (?P<b>{NAME}), centred on it",
         "stack {t} on top of {b}, centred", "place {t} centred on top of {b}",
         "set {t} on {b}, centred on it", "put {t} on {b}, centred",
         "move {t} onto the top of {b}, centred",
         unseen=("sit {t} right in the middle of the top of {b}",
                 "{t} goes on top of {b}, centres lined up")),
    swap(rf"move (?P<n>{NAME}) to (?P<at>{SIZE})",
         "put {n} at {at}", "shift {n} so its centre is at {at}", "relocate {n} to {at}",
         "move {n} over to {at}", "move {n} to {at}",
         unseen=("take {n} and set it down centred at {at}", "{n} should end up centred at {at}")),
    swap(rf"delete (?P<n>{NAME})",
         "remove {n}", "delete {n}", "get rid of {n}", "delete the object {n}",
         "take {n} out of the scene",
         unseen=("throw away {n}", "{n} has to go")),
)

# Materials by colour name, hex and finish (materials, recovery).
PAINT = (
    swap(rf"(?:(?<=^)|(?<=[;:] ))[Mm]ake (?P<n>{NAME}) (?P<c>[a-z]+) \((?P<hex>#[0-9A-F]{{6}})\)",
         "colour {n} {c} ({hex})", "paint {n} {c} ({hex})", "give {n} a {c} material ({hex})",
         "set {n} to {c}, {hex}", "make {n} {c} ({hex})",
         unseen=("{n} should come out {c} (hex {hex})", "turn {n} {c}, that is {hex}")),
    swap(r"make it (?P<c>[a-z]+) \((?P<hex>#[0-9A-F]{6})\)",
         "paint it {c} ({hex})", "colour it {c} ({hex})", "give it a {c} material ({hex})",
         "make it {c}, {hex}", "make it {c} ({hex})",
         unseen=("have it come out {c} (hex {hex})", "turn it {c}, that is {hex}")),
    swap(rf", metallic (?P<m>[01]), roughness (?P<r>{N})",
         " with metallic {m} and roughness {r}", ", finish metallic {m}, roughness {r}",
         ", metalness {m} and roughness {r}", ", roughness {r}, metallic {m}",
         ", metallic {m}, roughness {r}",
         unseen=(" with a metalness of {m} and a roughness of {r}",
                 " (finish: metallic {m} / roughness {r})")),
)
