"""Curriculum task sampling for RL rollouts, reproducible from the seed.

Tasks are drawn per *slot* (one GRPO prompt; its group of rollouts shares the slot, hence the
task). A slot first picks a (family, level) bucket with weight `floor + p(1 - p)`, where p is
the bucket's success rate over its last `window` rollouts (a prior for unseen buckets): buckets
the policy solves sometimes but not always are drawn most, as in cadrille's hard-example
mining; always-solved and never-solved buckets keep a small floor so they are re-checked. The
seed of the task is drawn from the split's seed range. The config's `family_weights` and
`level_weights` multiply each bucket's weight (training/tasks/sampling.py; SFT's
demonstrations share them out the same way); a bucket they weigh 0 is never drawn. The draw
for a slot depends only on (run seed, slot, the success history so far), and the history is
saved with each checkpoint.

`unlock` ({level: success}) moves the draw to harder levels as success rises: level L's
buckets weigh 0 until the level below has reached that success over its buckets' recent
rollouts (their windows pooled, once they hold `window` rollouts in all), then stay open. The
lowest level is always open; which levels are open is saved with the history.
"""

from __future__ import annotations

import random
from collections import deque

from training.train_config import CurriculumSpec


class Curriculum:
    def __init__(
        self,
        families: list[str],
        levels: list[int],
        split: str = "train",
        seed: int = 0,
        spec: CurriculumSpec | None = None,
    ) -> None:
        from training.tasks.sampling import TaskSampler
        from training.tasks.spec import TaskError

        self.spec = spec or CurriculumSpec()
        bad = [lv for lv in self.spec.unlock if lv not in levels]
        if bad:
            raise TaskError(f"grpo.curriculum.unlock: levels {bad} are not in grpo.tasks.levels "
                            f"{list(levels)}")  # fmt: skip
        # A TaskError (a ValueError) names the config field in one line.
        self.sampler = TaskSampler(families, levels, split, self.spec.family_weights,
                                   self.spec.level_weights)  # fmt: skip
        self.buckets = self.sampler.buckets
        self.seeds = self.sampler.seeds
        self.seed = seed
        self.history: dict[str, deque[int]] = {
            b: deque(maxlen=self.spec.window) for b in self.buckets
        }
        self.assigned: dict[int, str] = {}
        self.levels = sorted({int(b.rsplit(":", 1)[1]) for b in self.buckets})
        self.opened: list[int] = self.levels[:1]  # levels whose buckets may be drawn
        self._open_levels()

    def success_rate(self, bucket: str) -> float:
        h = self.history[bucket]
        return sum(h) / len(h) if h else self.spec.prior_success

    def level_success(self, level: int) -> tuple[float, int]:
        """A level's success over its buckets' windows, pooled, and the rollouts counted."""
        seen = [x for b, h in self.history.items() if b.endswith(f":{level}") for x in h]
        return (sum(seen) / len(seen) if seen else 0.0), len(seen)

    def _open_levels(self) -> None:
        """Open each next level whose bar the level below has reached (in order, once)."""
        for below, level in zip(self.levels, self.levels[1:], strict=False):
            if level in self.opened:
                continue
            bar = self.spec.unlock.get(level)
            if bar is not None:
                rate, n = self.level_success(below)
                if below not in self.opened or n < self.spec.window or rate < bar:
                    return
            self.opened.append(level)

    def weights(self) -> list[float]:
        shut = [0.0 if int(b.rsplit(":", 1)[1]) not in self.opened else 1.0 for b in self.buckets]
        if not self.spec.enabled:
            return [w * o for w, o in zip(self.sampler.static, shut, strict=True)]
        return [o * w * (self.spec.floor + (p := self.success_rate(b)) * (1 - p))
                for b, w, o in zip(self.buckets, self.sampler.static, shut, strict=True)]

    def task_for(self, slot: int) -> str:
        """The task id for a slot (the same on every call for that slot)."""
        if slot not in self.assigned:
            rng = random.Random(f"{self.seed}:{slot}")
            bucket = rng.choices(self.buckets, weights=self.weights())[0]
            task_seed = self.seeds.start + rng.randrange(len(self.seeds))
            self.assigned[slot] = f"{bucket}:{task_seed}"
        return self.assigned[slot]

    def record(self, task_id: str, success: bool) -> None:
        bucket = task_id.rsplit(":", 1)[0]
        if bucket in self.history:
            self.history[bucket].append(1 if success else 0)
            self._open_levels()

    def state_dict(self) -> dict:
        return {
            "history": {b: list(h) for b, h in self.history.items()},
            "assigned": {str(k): v for k, v in self.assigned.items()},
            "opened": list(self.opened),
        }

    def load_state_dict(self, state: dict) -> None:
        for b, h in state.get("history", {}).items():
            if b in self.history:
                self.history[b].clear()
                self.history[b].extend(h)
        self.assigned = {int(k): v for k, v in state.get("assigned", {}).items()}
        if "opened" in state:
            self.opened = [lv for lv in self.levels if lv in state["opened"]] or self.levels[:1]
        self._open_levels()
