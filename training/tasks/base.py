"""Tasks: a task id resolved through the families' table (training/tasks/families/).

A task id is `family:level:seed`; the same id always yields the same task, goal text
included. A family's generator gets a seeded `random.Random` and returns a `TaskSpec` (goal in
its template wording, start state, oracle plan, constraints, geometry target;
training/tasks/spec.py); the id then picks the goal's wording among the seen ones
(training/tasks/wording.py), which changes nothing else. `family:level:seed:unseen` is the same
task in a held-out phrasing, `family:level:seed:wN` in wording N. `Task` binds the spec to the
id and offers the contract's `setup`/`evaluate`/`target_image`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tools import Session
from training.rewards import RewardBreakdown
from training.tasks.config import seed_split
from training.tasks.families import FAMILIES, REWARD_WEIGHTS
from training.tasks.spec import TaskError, TaskSpec
from training.tasks.toolbox import in_catalogue_order
from training.tasks.wording import VOICES, check_phrasing, phrasing_of, wording_index


def split_of(family: str, seed: int) -> str:
    """The split a task belongs to: held-out families are only ever `test`."""
    entry = FAMILIES.get(family)
    return seed_split(family, seed, held_out=entry is not None and entry.held_out)


def family_tools(name: str) -> tuple[str, ...]:
    """The tools a task of family `name` shows: its declared toolbox (training/tasks/toolbox.py),
    in the catalogue's order."""
    return in_catalogue_order(FAMILIES[name].toolbox)


def held_out_families() -> list[str]:
    """The families never trained on (only in the test and heldout splits)."""
    return [f.name for f in FAMILIES.values() if f.held_out]


@dataclass
class Task:
    id: str
    family: str
    level: int
    seed: int
    spec: TaskSpec
    _target_image: bytes | None = field(default=None, repr=False)
    wording: int = 0  # which wording its goal is in (0: the template)

    @property
    def phrasing(self) -> str:
        """`seen` (a wording training shows) or `unseen` (a held-out phrasing)."""
        return phrasing_of(self.wording)

    @property
    def prompt(self) -> str:
        return self.spec.prompt

    @property
    def parameters(self) -> dict[str, Any]:
        return self.spec.parameters

    @property
    def oracle(self) -> list[dict[str, Any]]:
        return self.spec.oracle

    @property
    def constraints(self) -> list[dict[str, Any]]:
        return self.spec.constraints

    @property
    def budget(self) -> int:
        # Room for looking around and one retry per step, never below 6.
        return self.spec.budget or max(6, 2 * len(self.spec.oracle) + 4)

    @property
    def split(self) -> str:
        return split_of(self.family, self.seed)

    @property
    def weights(self) -> dict[str, float]:
        return REWARD_WEIGHTS[self.family]

    def setup(self, session: Session) -> None:
        """Build the start state: write the task's files, then run its start calls."""
        from tools.trust import confined

        workspace = session.workspace
        # The workspace outlives `session.reset()`: a deliverable left by an earlier attempt
        # must not count for this one. The worker may have planted links there: the files
        # are removed and written by name, never through a link (tools/trust/confined.py).
        for d in self.spec.deliverables:
            confined.remove_file(workspace, d["path"])
        for rel, data in self.spec.files.items():
            if isinstance(data, tuple):
                from training.tasks.families import FILE_MAKERS

                data = FILE_MAKERS[data[0]](data[1])
            confined.write_file(workspace, rel, data)
        for step in self.spec.start:
            result = session.call(step["tool"], step["args"])
            if not result.ok:
                raise TaskError(f"{self.id}: start call {step['tool']} failed: {result.error}")

    def evaluate(self, session: Session, calls: list[dict[str, Any]]) -> RewardBreakdown:
        """The reward of `session`'s committed scene, measured by the verifier in a clean
        worker that never ran the policy's code (training/tasks/verifier.py)."""
        from training.tasks.verifier import verify

        return verify(self, session, calls)

    @property
    def target_image(self) -> bytes | None:
        """A montage of the solved task, rendered by our renderer the first time it is asked."""
        if not self.spec.has_target_image:
            return None
        if self._target_image is None:
            from tools import ToolSession

            with ToolSession() as session:
                self._target_image = self.render_target(session)
        return self._target_image

    def render_target(self, session: Session) -> bytes:
        """Solve the task in `session` (reset first) and return the montage PNG."""
        session.reset()
        self.setup(session)
        for step in self.oracle:
            session.call(step["tool"], step["args"])
        image = session.render().images[0]
        self._target_image = image
        return image

    def describe(self) -> dict[str, Any]:
        """The `tasks show` view."""
        return {
            "id": self.id,
            "family": self.family,
            "level": self.level,
            "seed": self.seed,
            "split": self.split,
            "prompt": self.prompt,
            "wording": self.wording,
            "phrasing": self.phrasing,
            "parameters": self.parameters,
            "oracle": self.oracle,
            "constraints": self.constraints,
            "budget": self.budget,
            "start": self.spec.start,
            "files": sorted(self.spec.files),
            "deliverables": self.spec.deliverables,
            "has_target_image": self.spec.has_target_image,
        }


def parse_id(task_id: str) -> tuple[str, int, int, str | None]:
    """`family:level:seed[:phrasing]` -> (family, level, seed, phrasing or None)."""
    parts = task_id.split(":")
    if len(parts) not in (3, 4):
        raise TaskError(
            f"task id {task_id!r} must be family:level:seed, e.g. primitive_placement:1:42 "
            "(or family:level:seed:unseen for a held-out phrasing of its goal)"
        )
    name, level_s, seed_s = parts[:3]
    if name not in FAMILIES:
        raise TaskError(f"unknown task family {name!r}; known: {', '.join(sorted(FAMILIES))}")
    try:
        level, seed = int(level_s), int(seed_s)
    except ValueError:
        raise TaskError(f"task id {task_id!r}: level and seed must be integers") from None
    if level not in FAMILIES[name].levels:
        raise TaskError(f"{name} has levels {list(FAMILIES[name].levels)}, not {level}")
    if seed < 0:
        raise TaskError(f"task id {task_id!r}: seed must be >= 0")
    phrasing = None
    if len(parts) == 4:
        phrasing = check_phrasing(parts[3])
        if phrasing is None:
            raise TaskError(f"task id {task_id!r}: its fourth field is the goal's phrasing: "
                            f"seen, unseen or w0..w{len(VOICES) - 1}, not {parts[3]!r}")
        phrasing = None if phrasing == "seen" else phrasing
    return name, level, seed, phrasing


def get_task(task_id: str) -> Task:
    name, level, seed, phrasing = parse_id(task_id)
    # str seeds hash deterministically in `random` (not via PYTHONHASHSEED).
    rng = random.Random(f"{name}:{level}:{seed}")
    family = FAMILIES[name]
    spec = family.make(level, rng)
    # The wording is chosen after everything the checker reads is drawn, from its own hash.
    wording = wording_index(name, level, seed, phrasing)
    spec.prompt = family.wordings.say(spec.prompt, wording)
    canonical = f"{name}:{level}:{seed}" + (f":{phrasing}" if phrasing else "")
    return Task(id=canonical, family=name, level=level, seed=seed, spec=spec, wording=wording)


def list_families() -> list[dict[str, Any]]:
    return [
        {
            "family": f.name,
            "domain": f.domain,
            "levels": list(f.levels),
            "description": f.description,
            "held_out": f.held_out,
            "split": "test (held out)" if f.held_out else "train/validation/test",
        }
        for f in FAMILIES.values()
    ]
