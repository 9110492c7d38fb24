"""Training-layer commands (tasks, score, run, eval, train), assembled from their modules."""

from __future__ import annotations

import importlib
import importlib.util

import typer

MODULES = ("training.cli_tasks", "training.cli_eval", "training.cli_train")


def register(app: typer.Typer) -> None:
    for name in MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name).register(app)
