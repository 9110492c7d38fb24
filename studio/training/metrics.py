"""Following a run's `metrics.jsonl` as it grows, and turning it into plot series and an ETA."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

PLOTTED = ("loss", "reward")  # plus every `reward/<component>`
# The periodic held-out evals' rows (`run.eval_every`): a point every few checkpoints.
EVAL_PLOTTED = ("eval/mean_reward", "eval/success_rate", "eval/valid_call_rate")


class MetricsTail:
    """Reads only the complete lines added since the last read (a line cut short waits)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._offset = 0
        self._partial = b""

    def read_new(self) -> list[dict]:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(data)
        data, rows = self._partial + data, []
        *lines, self._partial = data.split(b"\n")
        for line in lines:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                rows.append(row)
        return rows


@dataclass
class RunMetrics:
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    last_step: int = 0
    total_steps: int | None = None
    started_at: float = field(default_factory=time.time)

    def add(self, rows: list[dict]) -> int:
        """Add rows; returns how many plot points were added."""
        added = 0
        for row in rows:
            step = row.get("step")
            if not isinstance(step, int | float):
                continue
            self.last_step = max(self.last_step, int(step))
            for key, value in row.items():
                plotted = key in PLOTTED or key in EVAL_PLOTTED or key.startswith("reward/")
                if plotted and isinstance(value, int | float):
                    self.series.setdefault(key, []).append((float(step), float(value)))
                    added += 1
        return added

    def points(self) -> int:
        return sum(len(v) for v in self.series.values())

    def progress(self) -> float | None:
        if not self.total_steps:
            return None
        return min(1.0, self.last_step / self.total_steps)

    def eta_s(self, now: float | None = None) -> float | None:
        """Seconds left at the pace so far, once a step has been logged."""
        if not self.total_steps or self.last_step <= 0:
            return None
        elapsed = (now or time.time()) - self.started_at
        return max(0.0, elapsed / self.last_step * (self.total_steps - self.last_step))


def planned_steps(config_path: str | Path, kind: str) -> int | None:
    """The optimiser steps a config asks for (the progress bar's 100 %), when it says."""
    try:
        from training import load_config

        cfg = load_config(config_path)
    except Exception:
        return None
    stage = cfg.grpo if kind == "grpo" or (kind == "pipeline" and cfg.grpo) else cfg.sft
    return getattr(stage, "max_steps", None)
