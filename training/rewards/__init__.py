"""Reward components and their combination into one `RewardBreakdown`.

Every component is a float in a documented range; the total is the weighted mean of the
components a family weighs (each family declares its own: `Family.weights`, gathered in
`training.tasks.families.REWARD_WEIGHTS`). An
invalid or empty final result is a hard penalty: the total becomes `INVALID_TOTAL` whatever
the rest says, as in cadrille's `10·IoU if valid else −10` (also reported as `cadrille`).

Ranges:
- validity       [0, 1]  share of calls that validated and ran
- geometry       [0, 1]  shape agreement (IoU, or a chamfer score), family-specific
- constraints    [0, 1]  weighted share of the task's constraints met (guards that
                         only say 'leave this alone' weigh 0.2)
- completeness   [0, 1]  share of required deliverables that exist and reload
- efficiency     [0, 1]  1 at or under the oracle's step count, 0 at the budget
                         (0 for a task that did not succeed)
- recovery       [0, 1]  1 without errors; after an error: half for never repeating a
                         failing call verbatim, half for succeeding anyway
- cadrille       [−10, 10] reported only, not weighed: 10·IoU if valid else −10

The shape metrics behind `geometry` (chamfer, IoU, loading meshes and solids) are
`training.rewards.geometry`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

INVALID_TOTAL = -1.0
COMPONENT_RANGES: dict[str, tuple[float, float]] = {
    "validity": (0.0, 1.0),
    "geometry": (0.0, 1.0),
    "constraints": (0.0, 1.0),
    "completeness": (0.0, 1.0),
    "efficiency": (0.0, 1.0),
    "recovery": (0.0, 1.0),
    "cadrille": (-10.0, 10.0),
}


@dataclass
class RewardBreakdown:
    """The checker's verdict: a total, named components, success and what was measured."""

    total: float
    components: dict[str, float]
    success: bool
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def validity(calls: Sequence[Mapping[str, Any]]) -> float:
    """Share of calls that validated and ran (1.0 for no calls: nothing was invalid)."""
    if not calls:
        return 1.0
    return sum(1 for c in calls if c.get("ok")) / len(calls)


def efficiency(steps: int, oracle_steps: int, budget: int) -> float:
    """1 up to the oracle's length, falling linearly to 0 at the step budget."""
    if steps <= oracle_steps:
        return 1.0
    if budget <= oracle_steps:
        return 0.0
    return max(0.0, 1.0 - (steps - oracle_steps) / (budget - oracle_steps))


def _key(call: Mapping[str, Any]) -> str:
    return json.dumps([call.get("tool"), call.get("args")], sort_keys=True, default=str)


def repeated_failures(calls: Sequence[Mapping[str, Any]]) -> int:
    """How many failing calls repeat, verbatim, a call that had already failed."""
    failed: set[str] = set()
    repeats = 0
    for call in calls:
        if call.get("ok"):
            continue
        key = _key(call)
        if key in failed:
            repeats += 1
        failed.add(key)
    return repeats


def recovery(calls: Sequence[Mapping[str, Any]], success: bool) -> float:
    if all(c.get("ok") for c in calls):
        return 1.0
    return 0.5 * (repeated_failures(calls) == 0) + 0.5 * bool(success)


def cadrille(iou: float, valid: bool) -> float:
    """cadrille's reward: 10·IoU for a valid result, −10 for an invalid one."""
    return 10.0 * iou if valid else -10.0


def combine(
    components: Mapping[str, float],
    weights: Mapping[str, float],
    valid_result: bool,
    success: bool,
    details: dict[str, Any] | None = None,
) -> RewardBreakdown:
    """Weighted mean of the weighed components; the hard penalty when the result is invalid."""
    comps = {k: float(v) for k, v in components.items()}
    for name, value in comps.items():
        lo, hi = COMPONENT_RANGES.get(name, (0.0, 1.0))
        if not lo - 1e-9 <= value <= hi + 1e-9:
            raise ValueError(f"reward component {name}={value} outside its range [{lo}, {hi}]")
    used = {k: w for k, w in weights.items() if k in comps and w > 0}
    norm = sum(used.values())
    total = sum(comps[k] * w for k, w in used.items()) / norm if norm else 0.0
    if not valid_result:
        total = INVALID_TOTAL
        success = False
    return RewardBreakdown(
        total=round(total, 6), components=comps, success=bool(success), details=details or {}
    )
