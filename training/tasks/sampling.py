"""Which tasks training draws: (family, level) buckets weighted by config, for RL and SFT alike.

A bucket `family:level` weighs `family_weights[family] x level_weights[level]` (1 for a name
or level the config leaves out; 0 drops the bucket). GRPO's curriculum draws a bucket per
slot at random, its static weight times the adaptive one (training/rl/curriculum.py); SFT's
demonstrations take `plan(per_family)`: the same weights shared out as whole task counts, so
a config that halves a family's weight halves its demonstrations too. Pure Python: only the
registry is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from training.tasks.config import SPLITS
from training.tasks.families import FAMILIES
from training.tasks.spec import TaskError


class TaskSampler:
    """The weighted (family, level) buckets of one config section.

    `where` names the section in errors (`grpo` or `demos`): every problem is one line that
    names the field, e.g. `grpo.curriculum.family_weights: 'cubes' is not a task family`.
    """

    def __init__(
        self,
        families: Sequence[str],
        levels: Sequence[int],
        split: str = "train",
        family_weights: Mapping[str, float] | None = None,
        level_weights: Mapping[int, float] | None = None,
        *,
        families_field: str = "grpo.tasks.families",
        levels_field: str = "grpo.tasks.levels",
        weights_field: str = "grpo.curriculum",
    ) -> None:
        family_weights = dict(family_weights or {})
        level_weights = {int(k): v for k, v in (level_weights or {}).items()}
        if split not in SPLITS:
            raise TaskError(f"split {split!r} is not one of {list(SPLITS)}")
        chosen = list(families) or [f for f in FAMILIES if not FAMILIES[f].held_out]
        unknown = [f for f in chosen if f not in FAMILIES]
        if unknown:
            raise TaskError(f"{families_field}: unknown {unknown}; known: {sorted(FAMILIES)}")
        held = [f for f in chosen if FAMILIES[f].held_out and split != "test"]
        if held:
            raise TaskError(f"{families_field}: {held} are held out (never trained on)")
        for name, w in family_weights.items():
            if name not in FAMILIES:
                raise TaskError(f"{weights_field}.family_weights: {name!r} is not a task family "
                                f"(`modelwright tasks list` names them)")  # fmt: skip
            if FAMILIES[name].held_out and split != "test":
                raise TaskError(f"{weights_field}.family_weights: {name!r} is held out "
                                "(never trained on); leave it out")  # fmt: skip
            if name not in chosen:
                raise TaskError(f"{weights_field}.family_weights: {name!r} is not in "
                                f"{families_field} {chosen}")  # fmt: skip
            if not w >= 0:
                raise TaskError(f"{weights_field}.family_weights: {name}: {w} is below 0")
        for level, w in level_weights.items():
            if level not in levels:
                raise TaskError(f"{weights_field}.level_weights: level {level} is not one of "
                                f"{levels_field} {list(levels)}")  # fmt: skip
            if not w >= 0:
                raise TaskError(f"{weights_field}.level_weights: {level}: {w} is below 0")
        self.split = split
        self.seeds = SPLITS[split]
        self.family_weights = {f: float(family_weights.get(f, 1.0)) for f in chosen}
        self.level_weights = {lv: float(level_weights.get(lv, 1.0)) for lv in levels}
        self.buckets: list[str] = []
        self.static: list[float] = []
        for f in chosen:
            for lv in levels:
                w = self.family_weights[f] * self.level_weights[lv]
                if lv in FAMILIES[f].levels and w > 0:
                    self.buckets.append(f"{f}:{lv}")
                    self.static.append(w)
        if not self.buckets:
            raise TaskError(f"{weights_field}: no task to draw: no family of {families_field} "
                            f"{chosen} has a level of {levels_field} {list(levels)} with a "
                            "weight above 0")  # fmt: skip

    @property
    def families(self) -> list[str]:
        """The families drawn from (a weight above 0 on some level they have)."""
        return list(dict.fromkeys(b.rsplit(":", 1)[0] for b in self.buckets))

    def plan(self, per_family: int) -> list[str]:
        """`per_family` x (families drawn from) task ids, shared out by the weights as whole
        counts (largest remainder): first among families by each one's total bucket weight,
        then within a family among its levels. A family's k-th task takes the split's k-th
        seed, its levels interleaved; with no weights set this is `per_family` ids per family
        cycling the levels, as `run_eval.task_ids` lists them."""
        fams = self.families
        by_family: dict[str, list[tuple[int, float]]] = {f: [] for f in fams}
        for bucket, w in zip(self.buckets, self.static, strict=True):
            name, level = bucket.rsplit(":", 1)
            by_family[name].append((int(level), w))
        counts = _apportion(per_family * len(fams), [sum(w for _, w in by_family[f]) for f in fams])
        ids = []
        for name, n in zip(fams, counts, strict=True):
            levels = [lv for lv, _ in by_family[name]]
            per_level = _apportion(n, [w for _, w in by_family[name]])
            for k, level in enumerate(_interleave(levels, per_level)):
                ids.append(f"{name}:{level}:{self.seeds[k]}")
        return ids


def _apportion(total: int, weights: list[float]) -> list[int]:
    """`total` split in proportion to `weights`, largest remainders first (ties: in order)."""
    whole = sum(weights)
    shares = [total * w / whole for w in weights]
    counts = [int(s) for s in shares]
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(shares[i] - counts[i]), i))
    for i in by_remainder[: total - sum(counts)]:
        counts[i] += 1
    return counts


def _interleave(items: list[int], counts: list[int]) -> list[int]:
    """Each item `counts[i]` times, spread evenly (smooth weighted round robin): equal counts
    cycle the items in order."""
    current = [0] * len(items)
    out = []
    for _ in range(sum(counts)):
        current = [c + w for c, w in zip(current, counts, strict=True)]
        i = max(range(len(items)), key=lambda j: (current[j], -j))
        current[i] -= sum(counts)
        out.append(items[i])
    return out


def grpo_sampler(spec) -> TaskSampler:
    """The sampler of a config's `grpo:` section (`GRPOSpec`)."""
    t, c = spec.tasks, spec.curriculum
    bad = [lv for lv in getattr(c, "unlock", {}) if lv not in t.levels]
    if bad:
        raise TaskError(f"grpo.curriculum.unlock: levels {bad} are not in grpo.tasks.levels "
                        f"{list(t.levels)}")  # fmt: skip
    return TaskSampler(t.families, t.levels, t.split, c.family_weights, c.level_weights)


def demo_sampler(spec) -> TaskSampler:
    """The sampler of a config's `demos:` section (`DemoSpec`): training seeds."""
    return TaskSampler(spec.families, spec.levels, spec.split, spec.family_weights,
                       spec.level_weights, families_field="demos.families",
                       levels_field="demos.levels", weights_field="demos")  # fmt: skip


def demo_task_ids(spec, per_family: int | None = None) -> list[str]:
    """The demonstrations' task ids: `demo_sampler(spec).plan(per_family)`."""
    return demo_sampler(spec).plan(spec.per_family if per_family is None else per_family)


def check_task_choices(config) -> None:
    """A training config's families, levels and weights against the registry (a `TrainConfig`;
    `modelwright train` checks it before anything starts): TaskError, one line naming the
    field, for an unknown or held-out family, a level not asked for, or nothing to draw."""
    if getattr(config, "grpo", None) is not None:
        grpo_sampler(config.grpo)
    if getattr(config, "demos", None) is not None:
        demo_sampler(config.demos)
    select = getattr(getattr(config, "sft", None), "select_checkpoint", None)
    if select is not None:
        bad = [f for f in select.families if f not in FAMILIES or FAMILIES[f].held_out]
        if bad:
            raise TaskError(f"sft.select_checkpoint.families: {bad} are not training families")
    spec = getattr(config, "eval", None)
    if spec is not None and spec.held_out_families:
        bad = [f for f in spec.held_out_families if f not in FAMILIES or not FAMILIES[f].held_out]
        if bad:
            held = [f for f in FAMILIES if FAMILIES[f].held_out]
            raise TaskError(f"eval.held_out_families: {bad} are not held-out families "
                            f"(held out: {held})")
