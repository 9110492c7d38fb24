"""Agent-layer commands (serve, mcp, models), assembled from a literal list of their modules."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    # imported here, not at module level: `modelwright` imports this module to build its app
    from agents.models import cli as models_cli
    from agents.serving import cli as serving_cli

    for group in (serving_cli, models_cli):
        group.register(app)
