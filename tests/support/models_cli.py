"""`modelwright models ...` run in-process, offline, and its one-line errors read back."""

from __future__ import annotations

from typer.testing import CliRunner


def models(*args: str):
    from studio.cli import build_app

    return CliRunner().invoke(build_app(), ["models", *args], env={"HF_HUB_OFFLINE": "1"})


def one_error_line(result, code: int) -> str:
    """The one `error: ...` line a failed command printed, after checking its exit code and
    that no traceback was shown."""
    shown = f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert result.exit_code == code and "Traceback" not in result.output, shown
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: "), shown
    return line
