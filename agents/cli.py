"""Agent-layer commands (serve, mcp, dev, models), assembled from their modules."""

from __future__ import annotations

import importlib
import importlib.util

import typer

MODULES = ("agents.serving.cli", "agents.cli_dev", "agents.models.cli")


def register(app: typer.Typer) -> None:
    for name in MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name).register(app)
