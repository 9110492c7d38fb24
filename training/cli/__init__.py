"""Training-layer commands (tasks, score, run, eval, train), assembled from their modules.

- `tasks`  `tasks list|show|try` and `score A B`
- `eval`   `run` (one episode) and `eval` (a policy over a split or a benchmark)
- `train`  `train sft|grpo|pipeline|launch`
- `cluster` `cluster up|status|down` (a Ray cluster for eval and rollouts)
- `views`  how `tasks show` and `score` read to a person
"""

from __future__ import annotations

import importlib
import importlib.util

import typer

MODULES = ("training.cli.tasks", "training.cli.eval", "training.cli.train", "training.cli.cluster")


def register(app: typer.Typer) -> None:
    for name in MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name).register(app)
