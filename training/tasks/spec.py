"""What a task family is: its declaration (`Family`), what its generator returns for one
(level, seed) (`TaskSpec`), and `call`, one step of a plan.

A family module declares `FAMILY = Family(...)` once: name, description, domain, levels,
reward weights, held-out flag, toolbox, wordings and generator. `training/tasks/families/__init__.py`
lists every family in one table; nothing registers by being imported.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from training.tasks.config import DOMAINS
from training.tasks.wording import Wordings


class TaskError(ValueError):
    """A task id that cannot be resolved, or a start state that could not be built."""


@dataclass
class TaskSpec:
    """What a family generator returns for one (level, seed)."""

    prompt: str
    parameters: dict[str, Any]
    oracle: list[dict[str, Any]]
    constraints: list[dict[str, Any]]
    start: list[dict[str, Any]] = field(default_factory=list)  # calls that build the start state
    # Written into the workspace at setup: bytes, or (file maker, script) made on demand (so
    # listing or showing a task never pays for CadQuery); the makers: families.FILE_MAKERS.
    files: dict[str, bytes | tuple[str, str]] = field(default_factory=dict)
    geometry: dict[str, Any] | None = None  # how the geometry component is measured
    deliverables: list[dict[str, Any]] = field(default_factory=list)
    geometry_min: float = 0.0  # success needs geometry >= this (when a geometry spec exists)
    budget: int | None = None
    has_target_image: bool = False


@dataclass(frozen=True)
class Family:
    """A task family as it declares itself: everything downstream reads these fields."""

    name: str
    description: str
    domain: str  # one of `config.DOMAINS`
    levels: tuple[int, ...]
    weights: dict[str, float]  # the reward components' weights, summing to 1
    # Never in train or validation seeds: only the `test`/`heldout` splits, refused by the
    # curriculum. Chosen to need skills other families teach, in a new combination.
    held_out: bool
    # The tools its prompts show when no list is configured, chosen by its author without
    # looking at its solutions, the same for every level (training/tasks/toolbox.py).
    toolbox: tuple[str, ...]
    make: Callable[[int, random.Random], TaskSpec]
    # How its goals are re-said in the other wordings: its phrase swaps and frames
    # (training/tasks/wording.py). Left out: only the numbers and the frame change.
    wordings: Wordings = Wordings()

    def __post_init__(self) -> None:
        if self.domain not in DOMAINS:
            raise ValueError(f"family {self.name}: domain {self.domain!r} is not one of {DOMAINS}")
        if abs(sum(self.weights.values()) - 1.0) > 1e-6:
            raise ValueError(f"family {self.name}: reward weights must sum to 1, not "
                             f"{self.weights}")


def call(tool: str, **args: Any) -> dict[str, Any]:
    """One step of a plan, in the `tools run` format."""
    return {"tool": tool, "args": args}
