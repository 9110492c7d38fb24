"""`modelwright envs serve`: the task families as an OpenEnv environment server
(training/envs/openenv_server.py, docs/ENVIRONMENTS.md)."""

from __future__ import annotations

import importlib.util

import typer

from tools.cli.exits import ExitCode, fail

app = typer.Typer(help="The task families as environments for other trainers (OpenEnv).",
                  no_args_is_help=True)  # fmt: skip


def _levels(text: str) -> list[int]:
    try:
        levels = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        fail(f"--levels {text!r}: comma-separated numbers from 1 to 5, e.g. 1,2")
    if not levels or any(lv not in range(1, 6) for lv in levels):
        fail(f"--levels {text!r}: comma-separated numbers from 1 to 5, e.g. 1,2")
    return levels


@app.command("serve")
def serve(
    port: int = typer.Option(8000, min=0, max=65535, help="Port to listen on (0: any free one)."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on (loopback by default)."),
    families: str = typer.Option(None, help="Comma-separated families reset draws from (default: all trained on)."),
    levels: str = typer.Option("1,2,3,4,5", help="Comma-separated levels reset draws from."),
    split: str = typer.Option("train", help="train | validation | test: the seeds reset draws."),
    max_steps: int = typer.Option(8, min=1, help="Turns per episode (the task's own budget caps it)."),
    max_sessions: int = typer.Option(4, min=1, help="Sessions at once (each episode holds a worker)."),
    idle_timeout: float = typer.Option(900, min=1, help="Seconds after which an untouched HTTP "
                                       "session may be closed for a new one."),  # fmt: skip
) -> None:
    """Serve the task families over OpenEnv's protocol (HTTP and WebSocket) until Ctrl-C."""
    for dep in ("fastapi", "uvicorn", "websockets"):
        if importlib.util.find_spec(dep) is None:
            fail(f"the OpenEnv server needs {dep}: pip install 'modelwright[envs]'",
                 ExitCode.UNAVAILABLE)  # fmt: skip
    from training.envs.openenv_server import EnvServer
    from training.envs.openenv_server import serve as run

    chosen = [f.strip() for f in families.split(",") if f.strip()] if families else None
    server = EnvServer(chosen, _levels(levels), split, max_steps=max_steps,
                       max_sessions=max_sessions, idle_s=idle_timeout)  # fmt: skip

    def ready(url: str) -> None:
        typer.echo(f"OpenEnv server at {url} ({len(server.sampler.families)} families, levels "
                   f"{server.levels}, split {split}); Ctrl-C stops it", err=True)  # fmt: skip
        typer.echo(url)

    try:
        run(server, host, port, ready=ready)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", ExitCode.UNAVAILABLE)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="envs")
