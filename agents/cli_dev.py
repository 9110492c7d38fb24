"""`modelwright dev ...`: helpers for developing without a GPU or a model hub."""

from __future__ import annotations

from pathlib import Path

import typer

from tools.cli.exits import fail


def register(app: typer.Typer) -> None:
    dev = typer.Typer(
        help="Developer tools (tiny local models for tests and CPU runs).", no_args_is_help=True
    )

    @dev.command("tiny-model")
    def tiny_model(
        out_dir: Path = typer.Argument(..., help="Folder to write the model into."),
        seed: int = typer.Option(0, help="Seed for the tokenizer corpus and the random weights."),
        size: str = typer.Option("tiny", help="tiny (~0.3 M params, for tests) or small (~1.3 M)."),
    ) -> None:
        """Build a tiny random-weight Qwen3-VL with a local tokenizer and a tool-calling chat template.

        Nothing is downloaded. Load it with `--policy hf --model DIR` or `transformers serve DIR`.
        """
        from agents.models.tiny import build_tiny_model

        try:
            path = build_tiny_model(out_dir, seed=seed, size=size)
        except ValueError as exc:  # a bad --size
            fail(str(exc))
        typer.echo(str(path))

    app.add_typer(dev, name="dev")
