"""Goals as people write them (#49): every family's goals in several wordings, picked by the
task id, some held out of training, none changing what is checked or a quantity stated."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from training.tasks import FAMILIES, TaskError, get_task, split_ids
from training.tasks.numbers import NumberStyle, say_numbers
from training.tasks.sampling import TaskSampler, demo_task_ids
from training.tasks.wording import FRAMES, SEEN, VOICES, wording_index
from training.train_config import DemoSpec

ROOT = Path(__file__).resolve().parents[1]
WORDINGS = range(len(VOICES))
SAMPLE = [(f, lvl) for f in FAMILIES for lvl in FAMILIES[f].levels]


@cache
def worded(family: str, level: int, seed: int) -> tuple[str, ...]:
    """The goal of `family:level:seed` in every wording, 0 (the template) first."""
    return tuple(get_task(f"{family}:{level}:{seed}:w{i}").prompt for i in WORDINGS)


# --- a reader of quantities, written apart from the module that re-says them ---------------

_SPELLED = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
            "ten", "eleven", "twelve")
_METRES = {"mm": 0.001, "cm": 0.01, "m": 1.0}
_METRES |= {f"{w}{e}{s}": _METRES[u] for u, w in (("mm", "millime"), ("cm", "centime"), ("m", "me"))
            for e in ("tre", "ter") for s in ("", "s")}
_SKIPPED = re.compile(r"(?<!\w)'[^']*'(?!\w)|#[0-9A-Fa-f]{3,8}\b|\S*/\S*"
                      r"|\b[\w-]+\.(?:step|stl|glb|3mf|svg|obj)\b")
_TOKEN = re.compile(r"(?<![\w.])(?P<sign>[-+±]?)(?P<num>\d+(?:\.\d+)?)(?!\.?\w)"
                    r"|\b(?P<word>" + "|".join(_SPELLED) + r")\b", re.IGNORECASE)
# A number's run goes on while a joint and another number follow ("1.5 x 2", "(0, 0), (60, 0)");
# the word after the run is its unit. Two numbers apart by a space alone are two quantities.
_JOINT = re.compile(r"\)?(?:, | x | by | × | and | or | to |-)\(?[-+±]?\d+(?:\.\d+)?")


def quantities(text: str) -> list[tuple[str, float]]:
    """Every number the text states, with what it measures: lengths in metres, angles in
    degrees, other units by name, plain numbers (counts, factors) as they are."""
    text = _SKIPPED.sub(" ", text)
    out = []
    for m in _TOKEN.finditer(text):
        if m.group("word"):
            value = float(_SPELLED.index(m.group("word").lower()))
        else:
            value = float(m.group("num")) * (-1 if m.group("sign") == "-" else 1)
        rest = text[m.end():]
        if rest.startswith("°"):
            out.append(("deg", value))
            continue
        end = 0
        while joint := _JOINT.match(rest, end):
            end = joint.end()
        unit = re.match(r"\)* ?([^\s,.;:()]+)", rest[end:])
        unit = unit.group(1) if unit else ""
        if unit in _METRES:
            out.append(("m", round(value * _METRES[unit], 9)))
        elif unit in ("°", "degrees"):
            out.append(("deg", value))
        elif unit in ("cm³", "kg", "W", "%"):
            out.append((unit, value))
        else:
            out.append(("", value))
        if m.group("sign") == "±":
            out[-1] = ("±" + out[-1][0], out[-1][1])
    return sorted(out)


def test_the_reader_sees_the_same_quantities_in_different_words() -> None:
    a = "a plate 120 x 60 x 4 mm with four 6 mm holes at (±28, ±18) mm, turned 15° about Z"
    b = "a plate 0.12 m by 0.06 m by 0.004 m with four 0.6 cm holes at (±2.8, ±1.8) cm, turned 15 degrees about Z"
    assert quantities(a) == quantities(b)
    assert quantities("a 12 mm hole") != quantities("a 1.2 mm hole")
    assert quantities("x = -0.6, 0 and 0.6 m") != quantities("x = -0.6, 0 and 60 cm")


# --- numbers as people write them -------------------------------------------------------------


def test_numbers_are_said_as_people_write_them_and_names_are_never_touched() -> None:
    say = say_numbers
    assert say("a 12 mm hole", NumberStyle(units="si")) == "a 0.012 m hole"
    assert say("a 12 mm hole", NumberStyle(units="cm")) == "a 1.2 cm hole"
    assert say("a 1.5 x 2 m rug", NumberStyle(times=" by ")) == "a 1.5 by 2 m rug"
    assert say("a 1.5 x 2 m rug", NumberStyle(repeat=True, times=" by ")) == "a 1.5 m by 2 m rug"
    assert say("a shank 0.06 m across", NumberStyle(units="small")) == "a shank 60 mm across"
    assert say("walls 2 mm thick", NumberStyle(words=True)) == "walls 2 millimetres thick"
    assert say("a 2 mm wall", NumberStyle(words=True)) == "a 2 mm wall"  # not "a 2 millimetres wall"
    assert say("z = 1 m, 0.5 x 1 m, (1, 1) m", NumberStyle(words=True, spelling="us")) == \
        "z = 1 meter, 0.5 x 1 meters, (1, 1) meters"
    assert say("drill 4 holes, centred", NumberStyle(counts=True, spelling="us")) == \
        "drill four holes, centered"
    assert say("turned 15° about Z", NumberStyle(words=True)) == "turned 15 degrees about Z"
    # Quoted names, colours, file paths and focal lengths stay as written.
    kept = "colour 'Centre 2 mm' teal (#20A0A0), export to out/part_12.step, a 50 mm lens"
    assert say(kept, NumberStyle(units="si", counts=True, spelling="us")) == kept.replace(
        "colour", "color")
    # A unit covers its whole run; a run whose left end follows a number is left whole.
    assert say("at (-52, 0), (52, 0) mm", NumberStyle(units="cm")) == "at (-5.2, 0), (5.2, 0) cm"
    assert say("at x = -0.6, 0 and 0.6 m", NumberStyle(units="small")) == \
        "at x = -600, 0 and 600 mm"


# --- the wording a task id picks -----------------------------------------------------------------


def test_the_same_id_gives_the_same_goal_in_any_process() -> None:
    ids = [f"{f}:{lvl}:{s}" for f, lvl in SAMPLE[::7] for s in (0, 110_001)]
    ids += [f"{ids[0]}:unseen", f"{ids[1]}:w7", f"{ids[2]}:seen"]
    here = {i: get_task(i).prompt for i in ids}
    assert here == {i: get_task(i).prompt for i in ids}
    code = ("import json, sys\nfrom training.tasks import get_task\n"
            "print(json.dumps({i: get_task(i).prompt for i in json.loads(sys.argv[1])}))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code, json.dumps(ids)], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == here


def test_every_family_and_level_has_five_or_more_wordings_and_ids_spread_over_them() -> None:
    for family, level in SAMPLE:
        for seed in (0, 1):
            seen = worded(family, level, seed)[:SEEN]
            assert len(set(seen)) == SEEN, (family, level, seed)
            assert len(set(worded(family, level, seed))) == len(VOICES)
        picked = {get_task(f"{family}:{level}:{s}").wording for s in range(64)}
        assert picked == set(range(SEEN)), (family, level, picked)


def test_held_out_wordings_never_appear_in_training_goals() -> None:
    """No training id shows a held-out wording: not the wording, not its frame."""
    ids = split_ids("train", per_family=10) + split_ids("validation", per_family=5)
    ids += demo_task_ids(DemoSpec(per_family=4, levels=[1, 2, 3, 4, 5]))
    ids += TaskSampler([], [1, 2, 3, 4, 5]).plan(6)  # GRPO's buckets, as its curriculum draws
    unseen_frames = [f.replace("{}", "").strip() for f in FRAMES[SEEN:]]
    for task_id in dict.fromkeys(ids):
        task = get_task(task_id)
        assert task.wording < SEEN and task.phrasing == "seen", task_id
        every = worded(task.family, task.level, task.seed)
        assert task.prompt == every[task.wording]
        assert task.prompt not in every[SEEN:], task_id
        assert not any(frame in task.prompt for frame in unseen_frames), task_id
    with pytest.raises(TaskError, match="held-out phrasings"):
        split_ids("train", phrasing="unseen")


def test_the_unseen_phrasing_is_an_id_option_for_eval() -> None:
    ids = split_ids("test", per_family=2, phrasing="unseen")
    assert ids and all(i.endswith(":unseen") for i in ids)
    for task_id in ids:
        task = get_task(task_id)
        assert task.id == task_id and task.phrasing == "unseen" and task.wording >= SEEN
        assert task.split == "test"
    plain = get_task("materials:1:110000")
    assert get_task("materials:1:110000:seen").id == plain.id
    assert wording_index("materials", 1, 110000) == plain.wording
    for bad in ("materials:1:0:w99", "materials:1:0:loud", "materials:1:0:w1:x"):
        with pytest.raises(TaskError):
            get_task(bad)


def test_no_wording_changes_what_is_checked() -> None:
    """The checker is built from the task's parameters, constraints and start: one for all
    of a task's wordings."""
    for family, level in SAMPLE:
        for seed in (0, 3):
            tasks = [get_task(f"{family}:{level}:{seed}:w{i}") for i in WORDINGS]
            first = tasks[0]
            for t in tasks[1:]:
                assert (t.parameters, t.oracle, t.constraints, t.spec.start, t.spec.files,
                        t.spec.deliverables, t.spec.geometry, t.budget) == (
                    first.parameters, first.oracle, first.constraints, first.spec.start,
                    first.spec.files, first.spec.deliverables, first.spec.geometry,
                    first.budget), (family, level, seed, t.wording)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_wording_states_the_templates_quantities(family: str) -> None:
    """Re-said goals still say the numbers the checker's parameters came from: the same
    lengths (in any unit), angles, counts and factors as the template."""
    for level in FAMILIES[family].levels:
        for seed in (0, 1, 2):
            every = worded(family, level, seed)
            want = quantities(every[0])
            for i, text in enumerate(every[1:], 1):
                assert quantities(text) == want, f"{family}:{level}:{seed}:w{i}: {text}"


def test_the_template_wording_is_the_goal_ids_showed_before() -> None:
    """Wording 0 is the generator's own text: the pinned pre-#49 goals are its goals."""
    task = get_task("primitive_placement:1:0:w0")
    assert task.prompt == ("In an empty scene, create a cylinder named 'Ball' of size "
                           "(1, 1, 1.1) m centred at (-9.2, -2.85, 0.55) m.")


# --- eval reports the two phrasings apart --------------------------------------------------------


def test_an_eval_report_has_seen_and_unseen_phrasings_apart() -> None:
    from training.eval.harness import aggregate

    ids = split_ids("test", per_family=2, families=["materials", "hinges"])
    ids += split_ids("test", per_family=2, families=["materials", "hinges"], phrasing="unseen")
    records = [{"task": i, "family": i.split(":")[0], "success": not i.endswith(":unseen"),
                "reward": 1.0 if not i.endswith(":unseen") else 0.25} for i in ids]  # fmt: skip
    report = aggregate(records + [{"task": "plate_01", "family": "benchmark", "success": True,
                                   "reward": 1.0}])  # a benchmark case: in neither
    seen, unseen = report["phrasings"]["seen"], report["phrasings"]["unseen"]
    assert seen["overall"]["episodes"] == unseen["overall"]["episodes"] == 4
    assert (seen["overall"]["success_rate"], unseen["overall"]["success_rate"]) == (1.0, 0.0)
    assert unseen["families"]["hinges"]["mean_reward"] == 0.25
    assert "phrasings" not in aggregate(records[:4])  # seen goals only: nothing to set apart


def test_eval_refuses_a_phrasing_it_does_not_know_and_unseen_training_goals() -> None:
    from typer.testing import CliRunner

    from studio.cli import build_app

    app = build_app()
    bad = CliRunner().invoke(app, ["eval", "--policy", "none", "--phrasing", "loud"])
    assert bad.exit_code == 2 and "unknown phrasing 'loud'" in bad.output
    train = CliRunner().invoke(app, ["eval", "--policy", "none", "--split", "train",
                                     "--phrasing", "unseen"])
    assert train.exit_code == 2 and "never shows held-out phrasings" in train.output
