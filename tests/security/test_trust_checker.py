"""The verifier's geometry runs in a jailed checker with a deadline and a memory cap.

A policy's part can make the checkers as costly as it likes: a plate with hundreds of holes
makes every boolean, IoU and tessellation of it heavy. None of that runs in the trusted
process: the checkers run in a jailed checker process (training/tasks/checker.py), whose
time (MODELWRIGHT_CHECKER_DEADLINE_S) and memory (MODELWRIGHT_CHECKER_MEMORY_MB) are capped.
Past either, the episode is invalid (total INVALID_TOTAL, the reason in
`details["verifier"]`), and the trusted process's peak RSS does not follow the part (printed
here, before and after each verdict). The control: the same part, with the default caps,
scores as the correct answer it is. Real CadQuery, real jail, real clean worker; nothing
timed against a threshold (the deadline is a cap we set, and the verdict it gives is what is
asserted).
"""

from __future__ import annotations

import resource

import pytest

from tools import ToolSession
from training.rewards import INVALID_TOTAL
from training.tasks import checker
from training.tasks.base import Task
from training.tasks.runner import run_calls
from training.tasks.spec import TaskSpec, call
from training.tasks.verifier import verify

HOLES = 14  # per side: a 196-hole plate
CODE = (f"result = cq.Workplane().box({4 * HOLES + 10}, {4 * HOLES + 10}, 5).faces('>Z')"
        f".workplane().rarray(4, 4, {HOLES}, {HOLES}).hole(2)\n")


def plate_task() -> Task:
    """A CAD task whose answer is the heavy plate itself (so a correct episode scores 1)."""
    spec = TaskSpec(
        prompt="Make the CAD part 'Plate': a 5 mm plate with a grid of 2 mm holes.",
        parameters={"holes": HOLES * HOLES},
        oracle=[call("cadquery_script", name="Plate", code=CODE)],
        constraints=[{"kind": "holes", "object": "Plate", "diameter": 2,
                      "count": HOLES * HOLES}],
        geometry={"kind": "parts", "parts": [{"name": "Plate",
                                              "script": "import cadquery as cq\n" + CODE}]},
        geometry_min=0.99,
    )
    return Task(id="recovery:heavy-plate", family="recovery", level=1, seed=0, spec=spec)


@pytest.fixture(scope="module")
def heavy(worker_pool):
    """A session whose policy made the heavy plate with a real cadquery_script."""
    task = plate_task()
    s = ToolSession(worker_pool, deadline_s=600)
    calls = run_calls(s, task.oracle)
    assert [c["ok"] for c in calls] == [True]
    yield task, s, calls
    s.close()


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _verify(task, s, calls, what: str):
    before = _maxrss_mb()
    checks = checker.STATS.checks
    v = verify(task, s, calls)
    print(f"{what}: total {v.total}, verifier {v.details.get('verifier')!r}; trusted process "
          f"peak RSS {before:.0f} MB before, {_maxrss_mb():.0f} MB after"
          + (f"; the checker's peak RSS {checker.STATS.last_peak_mb:.0f} MB"
             if checker.STATS.checks > checks else ""))
    return v, checker.STATS.checks - checks


def test_the_heavy_part_scores_normally_in_the_checker(heavy):
    """Control: with the default caps the same part is measured, in the checker, and scores
    as the correct answer."""
    task, s, calls = heavy
    v, checked = _verify(task, s, calls, "default caps")
    assert checked == 1, "the verdict came from the jailed checker"
    assert v.success and v.total == 1.0
    assert v.details["geometry"]["parts"][0]["iou"] == 1.0
    assert v.details["constraints"][0]["measured"] == HOLES * HOLES


def test_past_the_deadline_the_episode_is_invalid(heavy, monkeypatch):
    task, s, calls = heavy
    monkeypatch.setenv(checker.DEADLINE_ENV, "1")
    v, checked = _verify(task, s, calls, "1 s deadline")
    assert checked == 0
    assert v.total == INVALID_TOTAL and not v.success
    assert "deadline of 1 s" in v.details["verifier"]
    assert checker.DEADLINE_ENV in v.details["verifier"]


def test_past_the_memory_cap_the_episode_is_invalid(heavy, monkeypatch):
    """A ready checker holds ~340 MB of data (CadQuery, trimesh, the checkers); the plate's
    booleans and tessellation need more than the 420 MB left here."""
    task, s, calls = heavy
    monkeypatch.setenv(checker.MEMORY_ENV, "420")
    v, checked = _verify(task, s, calls, "420 MB memory cap")
    assert checked == 0
    assert v.total == INVALID_TOTAL and not v.success
    assert "went past its memory cap of 420 MB" in v.details["verifier"]
    assert checker.MEMORY_ENV in v.details["verifier"]


def test_an_eval_goes_on_after_a_stopped_checker(heavy, monkeypatch):
    """After a checker was stopped, the next episode is scored as usual."""
    task, s, calls = heavy
    monkeypatch.setenv(checker.DEADLINE_ENV, "1")
    assert verify(task, s, calls).total == INVALID_TOTAL
    monkeypatch.delenv(checker.DEADLINE_ENV)
    v = verify(task, s, calls)
    assert v.success, f"{v.total}: {v.details.get('calls')}"
