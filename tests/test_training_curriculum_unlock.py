"""The curriculum's level unlock (`grpo.curriculum.unlock`): harder levels are drawn only once
the level below succeeds often enough, deterministically, and the opened levels survive a
checkpoint's save and restore."""

from __future__ import annotations

import pytest

FAMILIES = ["primitive_placement", "materials"]


def _curriculum(seed: int = 0, **spec):
    from training.rl.curriculum import Curriculum
    from training.train_config import CurriculumSpec

    return Curriculum(FAMILIES, [1, 2, 3], seed=seed,
                      spec=CurriculumSpec(window=4, unlock={2: 0.6, 3: 0.5}, **spec))  # fmt: skip


def _levels(cur, slots) -> set[int]:
    return {int(cur.task_for(s).split(":")[1]) for s in slots}


def test_levels_open_in_order_as_the_level_below_succeeds():
    cur = _curriculum()
    assert cur.opened == [1]
    assert _levels(cur, range(40)) == {1}  # levels 2 and 3 weigh 0 until opened
    for _ in range(3):  # 3 rollouts: under the window of 4, however successful
        cur.record("materials:1:5", True)
    assert cur.opened == [1]
    cur.record("primitive_placement:1:7", False)  # 3 of 4 = 75 % >= 60 %
    assert cur.opened == [1, 2]
    assert _levels(cur, range(40, 200)) == {1, 2}
    for ok in (True, False, False, False):  # level 2 at 25 %: level 3 stays shut
        cur.record("materials:2:9", ok)
    assert cur.opened == [1, 2]
    for _ in range(4):  # the window's last 4: 100 %
        cur.record("materials:2:9", True)
    assert cur.opened == [1, 2, 3]
    for _ in range(8):  # an open level stays open when the level below falls back
        cur.record("materials:1:5", False)
    assert cur.opened == [1, 2, 3]
    assert 3 in _levels(cur, range(200, 400))


def test_the_draw_is_the_same_for_the_same_history_and_is_restored_from_a_checkpoint():
    a, b = _curriculum(seed=4), _curriculum(seed=4)
    for cur in (a, b):
        for ok in (True, True, True, False):
            cur.record("materials:1:1", ok)
    assert [a.task_for(s) for s in range(30)] == [b.task_for(s) for s in range(30)]
    restored = _curriculum(seed=4)
    restored.load_state_dict(a.state_dict())
    assert restored.opened == [1, 2]
    assert [restored.task_for(s) for s in range(30, 60)] == [a.task_for(s) for s in range(30, 60)]
    # A level, once opened, stays so after a restore even if the window no longer shows it.
    state = a.state_dict()
    state["history"] = {}
    fresh = _curriculum(seed=4)
    fresh.load_state_dict(state)
    assert fresh.opened == [1, 2]


def test_no_unlock_keeps_every_level_open_and_a_bad_level_is_a_config_error():
    from training.rl.curriculum import Curriculum
    from training.tasks.spec import TaskError
    from training.train_config import CurriculumSpec

    plain = Curriculum(FAMILIES, [1, 2, 3], seed=0)
    assert plain.opened == [1, 2, 3]
    with pytest.raises(TaskError, match=r"grpo.curriculum.unlock: levels \[4\]"):
        Curriculum(FAMILIES, [1, 2, 3], spec=CurriculumSpec(unlock={4: 0.5}))
    with pytest.raises(ValueError, match="not a success rate"):
        CurriculumSpec(unlock={2: 1.5})
