"""The `requests` family: goals as a modeller types them into the Agent dock (issue #50's five
goals are its kinds of request), with sizes unsaid (1 m), bare positions, colour words whose hex
the goal never gives, and names with or without quotes."""

from __future__ import annotations

import re

from training.tasks import get_task
from training.tasks.families.scenes.requests import CALLS
from training.tasks.recipes.scene import COLOURS

SEEDS = range(120)


def _tools(task) -> list[str]:
    return [c["tool"] for c in task.oracle]


def test_a_level_1_request_is_one_call_of_each_kind_a_person_asks_for() -> None:
    kinds = set()
    for seed in SEEDS:
        task = get_task(f"requests:1:{seed}:w0")
        assert len(task.oracle) == 1, task.prompt
        call = task.oracle[0]
        text = task.prompt.lower()
        if call["tool"] == "add_primitive":
            kinds.add("add")
            assert text.startswith("add a ") and " named " in text
            if " m " not in text and " m," not in text:  # no size said: the 1 m default
                assert call["args"]["dimensions"] == [1.0, 1.0, 1.0], task.prompt
        elif call["tool"] == "set_material":
            kinds.add("colour")
            word = next(c for c in COLOURS if re.search(rf"\b{c}\b", text))
            assert call["args"]["color"] == COLOURS[word] and "#" not in text
        elif call["tool"] == "delete":
            kinds.add("delete")
        elif "scale" in call["args"]:
            kinds.add("scale")
            assert re.search(r"twice|half", text)
        else:
            kinds.add("move")
            assert "location" in call["args"] and text.startswith("move ")
    assert kinds == {"add", "colour", "delete", "scale", "move"}


def test_a_coloured_new_object_is_two_calls_like_the_issues_red_cube() -> None:
    found = 0
    for seed in SEEDS:
        task = get_task(f"requests:2:{seed}:w0")
        m = re.match(r"Add an? (\w+) (cube|box) named '?(\w+)'? at \(?(-?[\d.]+), (-?[\d.]+), "
                     r"(-?[\d.]+)(?:\) m)?\.$", task.prompt)
        if not m:
            continue
        found += 1
        colour, _, name, *at = m.groups()
        add, paint = task.oracle
        assert add["tool"] == "add_primitive" and add["args"]["name"] == name
        assert add["args"]["dimensions"] == [1.0, 1.0, 1.0]
        assert add["args"]["location"] == [float(v) for v in at]
        assert paint == {"tool": "set_material", "args": {"name": name, "color": COLOURS[colour]}}
    assert found >= 2


def test_each_level_asks_its_number_of_calls_and_names_come_both_ways() -> None:
    quoted = bare = 0
    for level, calls in CALLS.items():
        for seed in range(20):
            task = get_task(f"requests:{level}:{seed}")
            assert len(task.oracle) == calls, task.id
            quoted += "'" in task.prompt
            bare += bool(re.search(r"named [A-Z]\w* ", task.prompt))
    assert quoted and bare
