"""A person's goal has no family, so no family's toolbox (#49): a shipped curriculum adapter
keeps a rule that picks one from the goal's own words (training/tasks/toolbox.py
`goal_toolboxes`, agents/models/shipped.py `tools_for_goal`). The rule routes the training
families' own goals, in every phrasing, to the toolbox their family declares; the episode loop
hands a free goal to the policy, which shows what the rule chose."""

from __future__ import annotations

import pytest

from agents.models.shipped import tools_for_goal
from training.tasks import FAMILIES, get_task
from training.tasks.base import family_tools
from training.tasks.toolbox import declare, goal_toolboxes, in_catalogue_order

RULE = goal_toolboxes()
SCENE = list(in_catalogue_order(declare("scene")))
CAD = list(in_catalogue_order(declare("cad")))


def test_the_rule_is_two_toolboxes_families_declare():
    assert RULE["tools"] == SCENE and [b["tools"] for b in RULE["toolboxes"]] == [CAD]
    declared = {tuple(family_tools(f)) for f in FAMILIES if not FAMILIES[f].held_out}
    assert tuple(SCENE) in declared and tuple(CAD) in declared  # trained on, as they are


@pytest.mark.fast
@pytest.mark.parametrize("phrasing", ["", ":unseen"])
def test_the_training_families_goals_route_to_their_own_toolbox(phrasing):
    routed = {}
    for name, family in FAMILIES.items():
        own = list(family_tools(name))
        if own not in (SCENE, CAD) or family.held_out:
            continue
        for level in (1, 2, 3):
            for seed in range(8):
                goal = get_task(f"{name}:{level}:{seed}{phrasing}").prompt
                chosen = tools_for_goal(goal, RULE["tools"], RULE["toolboxes"])
                routed[goal] = chosen == own
    wrong = [g for g, ok in routed.items() if not ok]
    assert len(routed) > 150 and not wrong, wrong[:3]


@pytest.mark.fast
def test_words_not_names_choose():
    boxes = RULE["toolboxes"]
    for goal in ("Make a plate 80 mm by 60 mm with four holes", "drill a 6mm hole", "a part 12 mm long",
                 "I'd like you to model an L-bracket", "Fillet the edges of the BLOCK",
                 "a flange 7 centimetres across"):
        assert tools_for_goal(goal, SCENE, boxes) == CAD, goal
    for goal in ("add a cube named 'Plate' at (1, 2, 0.5)", 'make "Block" green',
                 "Move the sphere up 2 m", "it's a scene with a lamp", ""):
        assert tools_for_goal(goal, SCENE, boxes) == SCENE, goal
    assert tools_for_goal("drill a hole", SCENE, None) == SCENE  # no rule: the default


def test_a_free_goal_reaches_the_policy_through_the_loop(tiny_text_dir, session):
    from agents import EpisodeLoop, LoopConfig, StartState
    from agents.policies.hf_policy import HFPolicy, HFPolicyConfig

    policy = HFPolicy(HFPolicyConfig(model=str(tiny_text_dir), max_tokens=8, goal_tools=SCENE,
                                     goal_toolboxes=RULE["toolboxes"]))
    policy.reset({"goal": "Add a cube named 'Plate'"})
    assert policy.shown() == SCENE
    policy.reset({"task_id": "materials:1:0", "tools": ["set_material"]})  # a task's own
    assert policy.shown() == ["set_material"]
    session.reset()
    EpisodeLoop(policy, session, "Make a plate 80 mm by 60 mm by 5 mm with four 6 mm holes",
                setup=StartState((), keep=True), config=LoopConfig(max_steps=1)).run()
    assert policy.shown() == CAD
