"""Build the tiny random-weight Qwen3-VL for development: `.venv/bin/python scripts/tiny_model.py OUT`.

A developer's tool, not a product command: the model is random and never writes a useful
call. Training configs that want it say `model.build_tiny: true` and the run builds it
itself; the test suite builds it through `tests/conftest.py`. Nothing is downloaded. Load the
result with `--policy hf --model OUT` or `transformers serve OUT`.
"""

from __future__ import annotations

from pathlib import Path

import typer


def main(
    out_dir: Path = typer.Argument(..., help="Folder to write the model into."),
    seed: int = typer.Option(0, help="Seed for the tokenizer corpus and the random weights."),
    size: str = typer.Option("tiny", help="tiny (~0.3 M params, for tests) or small (~1.3 M)."),
) -> None:
    """Build a tiny random-weight Qwen3-VL with a local tokenizer and a tool-calling chat template."""
    from training.sft.tiny_model import build_tiny_model

    try:
        path = build_tiny_model(out_dir, seed=seed, size=size)
    except ValueError as exc:  # a bad --size
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(str(path))


if __name__ == "__main__":
    typer.run(main)
