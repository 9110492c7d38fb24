"""Each family's toolbox: the tools a prompt shows for its tasks when no list is configured.

The whole catalogue's signatures cost a small model ~2,750 tokens per prompt, so a task shows
its family's toolbox instead. A toolbox is chosen by a rule that never looks at a solution
(#49): its family's author declares it in the family's module (`Family.toolbox`), from the
kits below (what a kind of work needs) and a few tools of its own, and it is the same for
every level and seed of the family, held-out families included. Every toolbox holds the scene
basics, and more than any one level's solutions call, so choosing among tools stays part of
every task; `training.tasks.base.family_tools` is a family's, as its tasks show it. This module
reads no registry (the families import it). `tests/test_toolbox.py` checks, without being the source of anything, that each
declared toolbox covers every tool its oracle plans use (seeds 0..63 of every level) and
that none is just the tools some level's plans use.
"""

from __future__ import annotations

from functools import cache

SCENE_BASICS = ("add_primitive", "transform", "set_material", "delete")

# What a kind of work needs, by name; a family picks kits and adds its own extras.
KITS: dict[str, tuple[str, ...]] = {
    # looking at and arranging the objects of a scene
    "scene": ("duplicate", "get_scene", "measure"),
    # fitting objects together
    "assembly": ("boolean", "duplicate", "parent", "get_scene", "measure"),
    # exact CAD parts in millimetres: primitives, profiles, features, the part's facts
    "cad": ("cad_box", "cad_cylinder", "cad_sketch_extrude", "cad_revolve", "cad_hole",
            "cad_fillet", "cad_chamfer", "cad_shell", "cad_pattern", "cad_query"),
    # meshes: combining, arraying, checking and mending them
    "mesh": ("boolean", "join", "modifier", "mesh_check", "mesh_repair"),
    # files in the workspace
    "files": ("export", "import_file"),
    # going back: the last call, or a named state
    "history": ("undo", "snapshot", "restore"),
    # a shot: lights, a camera and the picture
    "shot": ("add_light", "add_camera", "render", "set_visible"),
}  # fmt: skip


def declare(*kits: str, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """A family's toolbox: the scene basics, the named kits' tools and `extra`, each once."""
    unknown = [k for k in kits if k not in KITS]
    if unknown:
        raise ValueError(f"unknown tool kits {unknown}; known: {sorted(KITS)}")
    names = [*SCENE_BASICS, *(t for k in kits for t in KITS[k]), *extra]
    return tuple(dict.fromkeys(names))


@cache
def in_catalogue_order(toolbox: tuple[str, ...]) -> tuple[str, ...]:
    """A toolbox in the order the whole catalogue is shown in (`family_tools` in
    training/tasks/base.py: a family's, as its tasks show it)."""
    from tools import catalogue

    declared = set(toolbox)
    return tuple(spec["name"] for spec in catalogue() if spec["name"] in declared)


# -- a person's goal, which has no family --------------------------------------------------------
# The studio's Local agent and `modelwright run` get a goal with no task behind it, so no
# family's toolbox: they show a domain's, chosen from the goal's own words (never from a
# solution). A goal in a CAD part's words (a hole, a fillet, a plate, a bracket; not units,
# which scene goals use too) shows the CAD toolbox, any other goal the scene one. Both are
# toolboxes training families declare as they are (brackets' and dimension edits'; requests'
# and materials'), so an adapter trained across the families has seen each. Words inside
# quotes (object names: 'Block', 'Plate') do not count. tests/test_goal_toolbox.py routes the
# training families' own goals, in both phrasings, with this rule.
CAD_WORDS = (
    "cad", "part", "parts", "hole", "holes", "bore", "bores", "counterbore", "fillet",
    "filleted", "fillets", "chamfer", "chamfered", "chamfers", "flange", "bracket", "plate",
    "block", "shaft", "sheet", "profile", "extrude", "extruded", "revolve", "revolved",
)


def goal_toolboxes() -> dict:
    """What a shipped adapter's manifest keeps for free-form goals: the default (scene)
    toolbox and the ones chosen by a goal's words, each in catalogue order
    (`agents.models.shipped.tools_for_goal` applies it)."""
    return {"tools": list(in_catalogue_order(declare("scene"))),
            "toolboxes": [{"name": "cad", "words": list(CAD_WORDS),
                           "tools": list(in_catalogue_order(declare("cad")))}]}
