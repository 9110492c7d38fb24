"""One unit system: the scene in metres, CAD parts authored in millimetres.

Walks every task family (every level, several seeds): the numbers a prompt gives, with their
unit, are numbers the oracle's tools take in the unit their descriptions state; prompts read
naturally (no "4 4 mm holes", no "hole(s)", no doubled words). On the real runtime a part
authored as 100 mm shows in the scene as 0.1 m and in the outliner's words as 100 mm.
"""

from __future__ import annotations

import re

import pytest

from agents.loop.episode_loop import DEFAULT_SYSTEM
from tools.specs import TOOLS, field_unit, length_unit
from training.tasks import FAMILIES, get_task

SEEDS = (0, 1, 2, 3, 4)
TASK_IDS = [f"{f}:{lvl}:{s}" for f in FAMILIES for lvl in FAMILIES[f].levels for s in SEEDS]

NUM = r"[-±]?\d+(?:\.\d+)?"
TUPLE = rf"\(\s*{NUM}(?:,\s*{NUM}){{1,2}}\s*\)"
TUPLE_RUN = re.compile(rf"{TUPLE}(?:(?:, | and ){TUPLE})*(?P<unit> mm\b| m\b)?")
TRIPLE = re.compile(rf"(?P<nums>{NUM}(?: x {NUM}){{1,2}}) (?P<unit>mm|m)\b")
SCALAR = re.compile(rf"(?<![\w.(,±-])(?P<num>{NUM}) (?P<unit>mm|m)\b")


def _numbers(value) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [abs(float(value))]
    if isinstance(value, str):  # a CadQuery script: its literals
        return [abs(float(x)) for x in re.findall(r"\d+(?:\.\d+)?", value)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, (list, tuple)):
        return [n for v in value for n in _numbers(v)]
    return []


def _pools(task) -> dict[str, list[float]]:
    """Numbers the task's calls (start state and oracle) pass, by the unit their tool takes."""
    pools: dict[str, list[float]] = {"mm": [], "m": []}
    sizes: dict[str, list[float]] = {}  # an added object's size at scale 1, in metres
    for c in [*task.spec.start, *task.oracle]:
        for field, value in c["args"].items():
            unit = field_unit(c["tool"], field) or (length_unit(c["tool"]) if field == "code" else None)
            if unit in pools:
                pools[unit] += _numbers(value)
        a = c["args"]
        if field_unit(c["tool"], "dimensions") == "m" and "dimensions" in a:
            sizes[a["name"]] = [float(v) for v in a["dimensions"]]
        if c["tool"] == "transform" and "scale" in a and a["name"] in sizes:  # an absolute scale
            pools["m"] += [abs(d * f) for d, f in zip(sizes[a["name"]], a["scale"], strict=True)]
    size = task.parameters.get("size")  # the part's bounding size, which the CAD tools produce
    if size:
        pools["mm"] += [float(v) for v in size]
    return pools


def _matches(n: float, pool: list[float], derived: bool) -> bool:
    n = abs(n)
    if any(abs(c - n) < 1e-6 or abs(2 * c - n) < 1e-6 for c in pool):  # a diameter as a radius
        return True
    return derived and any(abs(a - b - n) < 1e-6 for a in pool for b in pool)  # a step length


def _quantities(prompt: str) -> list[tuple[str, list[float], str]]:
    """(unit, numbers, the words) for every length the prompt states with a unit."""
    out = []
    for m in TUPLE_RUN.finditer(prompt):
        nums = [abs(float(x.replace("±", ""))) for x in re.findall(NUM, m.group(0))]
        out.append(((m.group("unit") or "").strip(), nums, m.group(0)))
    for m in TRIPLE.finditer(prompt):
        nums = [abs(float(x.replace("±", ""))) for x in m.group("nums").split(" x ")]
        out.append((m.group("unit"), nums, m.group(0)))
    for m in SCALAR.finditer(prompt):
        out.append((m.group("unit"), [abs(float(m.group("num").replace("±", "")))], m.group(0)))
    return out


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_prompt_numbers_are_the_numbers_the_tools_take_in_their_unit(task_id):
    # The template wording (w0): the other wordings say the same quantities in other units
    # and words (tests/test_task_wordings.py checks each against this one).
    task = get_task(f"{task_id}:w0")
    # a sum, or a limit the result must keep (a printer's build volume), said for the reader
    prompt = re.sub(r"\((?:total|build volume) [^)]*\)", "", task.prompt)
    pools = _pools(task)
    for unit, nums, words in _quantities(prompt):
        assert unit in ("m", "mm"), f"{task_id}: {words!r} has no unit in {task.prompt!r}"
        scalar = len(nums) == 1
        if unit == "m" and scalar:
            continue  # metre scalars are often derived ("0.8 m above the ground")
        for n in nums:
            assert _matches(n, pools[unit], derived=unit == "mm"), (
                f"{task_id}: {n:g} {unit} in {words!r} is no number the {unit} tools take: "
                f"{sorted(set(pools[unit]))[:40]}"
            )
    for call in [*task.spec.start, *task.oracle]:  # every tool used states its unit
        units = {field_unit(call["tool"], f) for f in TOOLS[call["tool"]].schema()["properties"]}
        word = {"mm": "millimetres", "m": "metres"}.get(length_unit(call["tool"]))
        if units & {"m", "mm"} and call["tool"] not in ("cad_pattern",):
            assert word in TOOLS[call["tool"]].description, (call["tool"], word)


DOUBLED_NUMBER = re.compile(rf"(?<![\w.,(])({NUM}) ({NUM}) (mm|m)\b")
DOUBLED_WORD = re.compile(r"\b([A-Za-z]+) \1\b", re.IGNORECASE)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_prompts_read_naturally(family):
    for level in FAMILIES[family].levels:
        for seed in range(12):
            prompt = get_task(f"{family}:{level}:{seed}").prompt
            assert not DOUBLED_NUMBER.search(prompt), prompt
            assert not DOUBLED_WORD.search(prompt), prompt
            assert "(s)" not in prompt, prompt
            assert "  " not in prompt and ".." not in prompt.replace("'..'", ""), prompt


def test_system_prompt_and_cad_descriptions_state_the_units():
    assert "metres" in DEFAULT_SYSTEM and "millimetres" in DEFAULT_SYSTEM
    for name, spec in TOOLS.items():
        if spec.kernel == "cadquery" and name != "cad_query":
            assert "millimetres" in spec.description, name
    assert "millimetres" in TOOLS["cad_query"].description


def test_a_part_authored_in_mm_shows_in_metres_and_reads_in_mm(session):
    """The kernel boundary on the real runtime: 100 x 70 x 10 mm is 0.1 x 0.07 x 0.01 m in the
    scene, next to a 1 m cube, and the outliner's words give back the prompt's numbers."""
    from studio.models.units import size_text

    task = get_task("cad_parts:3:0:w0")  # the template wording: sizes as "A x B x C mm"
    session.reset()
    for c in task.oracle:
        r = session.call(c["tool"], c["args"])
        assert r.ok, r.to_text()
    assert session.call("add_primitive", {"kind": "cube", "name": "Cube",
                                          "dimensions": [1, 1, 1], "location": [0, 0, 2]}).ok
    objects = {o["name"]: o for o in session.scene()["objects"]}
    part, size = objects["Mount"], task.parameters["size"]
    assert part["source"] == "cad"
    assert part["dimensions"] == pytest.approx([v * 0.001 for v in size], abs=2e-5)
    assert objects["Cube"]["dimensions"] == pytest.approx([1, 1, 1])
    words = " × ".join(f"{v:g}" for v in size) + " mm"
    assert size_text(part) == words
    assert words.replace(" × ", " x ") in task.prompt
    assert size_text(objects["Cube"]) == "1 × 1 × 1 m"
    exact = session.call("cad_query", {"name": "Mount"}).output  # the B-rep, in millimetres
    dims = [hi - lo for lo, hi in zip(exact["bbox_min"], exact["bbox_max"], strict=True)]
    assert dims == pytest.approx(size, abs=0.5)  # OCC boxes are loose by a fraction of a mm
    # Moved in the scene (metres), the part's exact geometry follows in millimetres.
    assert session.call("transform", {"name": "Mount", "location": [0.5, 0, 0]}).ok
    moved = session.call("cad_query", {"name": "Mount"}).output
    assert moved["bbox_min"][0] - exact["bbox_min"][0] == pytest.approx(500, abs=0.5)
