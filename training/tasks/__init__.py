"""Task suite: procedurally generated tasks `family:level:seed` with oracle plans and checkers.

from training.tasks import get_task, list_families, split_ids
task = get_task("primitive_placement:1:42")
task.setup(session); ...; task.evaluate(session, calls) -> RewardBreakdown
"""

from __future__ import annotations

from training.rewards import RewardBreakdown
from training.tasks.base import (
    Task,
    family_tools,
    get_task,
    held_out_families,
    list_families,
    split_of,
)
from training.tasks.config import SPLITS
from training.tasks.families import FAMILIES
from training.tasks.spec import Family, TaskError, TaskSpec
from training.tasks.wording import PHRASINGS


def split_ids(split: str, per_family: int = 10, families: list[str] | None = None,
              phrasing: str = "seen", levels: list[int] | None = None) -> list[str]:  # fmt: skip
    """`per_family` task ids for each family in `split`, levels in turn, seeds from the split's range.

    `levels`: the levels to take in turn (those a family has; default: all of them), as a
    training pipeline's `eval.levels` does, so `modelwright eval` replays its report's tasks.

    Held-out families appear only in `test`; `heldout` lists only them. `phrasing="unseen"`:
    the same tasks with their goals in held-out phrasings (`family:level:seed:unseen`, never
    shown in training; training/tasks/wording.py), for eval splits only.
    """
    if split not in SPLITS and split != "heldout":
        raise TaskError(f"unknown split {split!r}; use one of {[*SPLITS, 'heldout']}")
    if phrasing not in PHRASINGS:
        raise TaskError(f"unknown phrasing {phrasing!r}; use one of {list(PHRASINGS)}")
    if phrasing == "unseen" and split == "train":
        raise TaskError("the train split never shows held-out phrasings; ask a validation, "
                        "test or heldout split for them")
    tail = ":unseen" if phrasing == "unseen" else ""
    chosen = families or list(FAMILIES)
    unknown = [f for f in chosen if f not in FAMILIES]
    if unknown:
        raise TaskError(f"unknown families {unknown}; known: {sorted(FAMILIES)}")
    if split == "heldout":
        chosen, seeds = [f for f in chosen if FAMILIES[f].held_out], SPLITS["test"]
    else:
        if split != "test":
            chosen = [f for f in chosen if not FAMILIES[f].held_out]
        seeds = SPLITS[split]
    if levels is not None:
        bad = [lv for lv in levels if not any(lv in FAMILIES[f].levels for f in chosen)]
        if not levels or bad:
            have = sorted({lv for f in chosen for lv in FAMILIES[f].levels})
            raise TaskError(f"no chosen family has level {bad[0] if bad else '(none)'}; "
                            f"their levels are {have}")
    ids = []
    for name in chosen:
        own = FAMILIES[name].levels
        cycle = [lv for lv in levels if lv in own] if levels is not None else list(own)
        if not cycle:
            continue  # a family without any of the asked levels
        for k in range(per_family):
            ids.append(f"{name}:{cycle[k % len(cycle)]}:{seeds[k]}{tail}")
    return ids


__all__ = [
    "FAMILIES",
    "Family",
    "SPLITS",
    "RewardBreakdown",
    "Task",
    "TaskError",
    "TaskSpec",
    "family_tools",
    "get_task",
    "held_out_families",
    "list_families",
    "split_ids",
    "split_of",
]
