"""`modelwright serve` (vLLM for a tool-using VLM, adapter hot-loading) and `modelwright mcp`.

Imports stay light: vLLM runs in a child process, and the tool runtime is imported only
when `mcp` starts.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import typer

from tools.cli.exits import ExitCode, Unavailable, fail


def _adapter_folder(path: str) -> None:
    """A LoRA adapter folder the user named: say at once when it is not one (exit 2)."""
    if not (Path(path).expanduser() / "adapter_config.json").is_file():
        fail(f"{path} is not a LoRA adapter folder (no adapter_config.json); point at the "
             "folder a `modelwright train` run saved (RUN/adapter)")


def _parse_adapters(values: list[str]) -> dict[str, str]:
    adapters: dict[str, str] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise typer.BadParameter(f"{value!r}: expected NAME=PATH", param_hint="--adapter")
        adapters[name] = path
    return adapters


def register(app: typer.Typer) -> None:
    serve = typer.Typer(
        help="Serve a tool-using vision-language model with vLLM.",
        invoke_without_command=True,
    )

    @serve.callback()
    def serve_model(
        ctx: typer.Context,
        model: str = typer.Option(None, "--model", help="Local model folder or hub id."),
        host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
        port: int = typer.Option(8000, help="Port to listen on."),
        adapter: list[str] = typer.Option(
            [], "--adapter", help="NAME=PATH of a LoRA adapter to serve from the start (repeat)."
        ),
        profile: str = typer.Option(
            "full", help="full: exact, long context. fast: n-gram speculation, fp8 KV cache."
        ),
        family: str = typer.Option(None, help="Model family, when detection cannot tell."),
        tool_parser: str = typer.Option(
            None, help="vLLM --tool-call-parser, overriding the family's."
        ),
        chat_template: str = typer.Option(None, help="Chat template file that renders tool turns."),
        max_model_len: int = typer.Option(None, help="Context length (default: the profile's)."),
        max_lora_rank: int = typer.Option(64, help="Largest LoRA rank hot-loadable later."),
        lora: bool = typer.Option(True, "--lora/--no-lora", help="Reserve LoRA slots."),
        images: int = typer.Option(8, help="Images allowed per prompt."),
        served_model_name: str = typer.Option(None, help="Name clients pass as `model`."),
        vllm_bin: str = typer.Option(
            None, help="Command that runs vLLM's CLI (default: the `vllm` installed by .[gpu])."
        ),
        health_timeout: float = typer.Option(1800.0, help="Seconds to wait for /health."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the command and exit."),
    ) -> None:
        """Start `vllm serve` with tool calling, image limits, LoRA and prefix caching.

        Waits until the server is healthy, prints the endpoint, and stops it on Ctrl-C.
        """
        if ctx.invoked_subcommand is not None:
            return
        if not model:
            fail("--model PATH_OR_ID is required")
        from agents.models.source import resolve_model
        from agents.serving.server import ServeConfig, build_command, vllm_launcher

        if profile not in ("full", "fast"):
            fail(f"--profile {profile!r}: choose full or fast")
        resolve_model(model, probe=False)  # a local folder, or an org/name hub id (vLLM's)
        for path in _parse_adapters(adapter).values():
            _adapter_folder(path)
        config = ServeConfig(
            model=model,
            host=host,
            port=port,
            adapters=_parse_adapters(adapter),
            profile=profile,  # type: ignore[arg-type]
            family=family,
            tool_parser=tool_parser,
            chat_template=chat_template,
            max_model_len=max_model_len,
            lora=lora,
            max_lora_rank=max_lora_rank,
            images_per_prompt=images,
            served_model_name=served_model_name,
        )
        launcher = vllm_bin.split() if vllm_bin else None
        if not dry_run and launcher is None:
            launcher = vllm_launcher()  # not installed: exit 3, with how to install it
        try:
            command = build_command(config, launcher=launcher)
        except ValueError as exc:  # UnknownModelFamily is one: exit 2
            fail(str(exc))
        for warning in command.warnings:
            typer.echo(f"warning: {warning}", err=True)
        if dry_run:
            typer.echo(command.shell())
            return
        _run_server(command, health_timeout)

    @serve.command("load-adapter")
    def load_adapter_cmd(
        name: str = typer.Argument(..., help="Adapter name; served as NAME-vN."),
        path: str = typer.Argument(..., help="LoRA adapter folder (as the server sees it)."),
        base_url: str = typer.Option("http://127.0.0.1:8000", help="The vLLM server."),
        unload_previous: bool = typer.Option(
            False, help="Unload older versions of NAME after loading the new one."
        ),
        check_path: bool = typer.Option(
            True, help="Check the folder here (off for a server on another machine)."
        ),
        api_key_env: str = typer.Option("VLLM_API_KEY", help="Env var holding the server's key."),
    ) -> None:
        """Hot-load a LoRA adapter into a running server under a fresh versioned name."""
        from agents.serving.adapters import load_adapter

        if check_path:
            _adapter_folder(path)
        loaded = load_adapter(  # a server that does not answer: exit 3
            base_url,
            name,
            path,
            api_key=os.environ.get(api_key_env),
            unload_previous=unload_previous,
            check_path=check_path,
        )
        typer.echo(f"loaded {loaded.path} as {loaded.served_name}")
        for old in loaded.unloaded:
            typer.echo(f"unloaded {old}")

    app.add_typer(serve, name="serve")

    @app.command("mcp")
    def mcp_cmd(
        deadline_s: float = typer.Option(30.0, help="Wall-clock limit per tool call."),
        workspace: Path = typer.Option(
            None, help="Folder import_file reads from and export writes to (copied in and out; "
            "the sandbox never sees it)."),
        record: bool = typer.Option(True, "--record/--no-record", help="Record as an episode."),
        data_dir: Path = typer.Option(None, help="Trajectory store (default: the app's)."),
    ) -> None:
        """Serve the tool runtime over MCP (stdio): sandboxed, undoable, recorded."""
        from agents.serving.mcp_server import McpSettings, run_stdio

        run_stdio(
            McpSettings(
                deadline_s=deadline_s, workspace=workspace, record=record, data_dir=data_dir
            )
        )


def _run_server(command, health_timeout: float) -> None:  # noqa: ANN001 - ServeCommand
    """Run vLLM until it exits or the user stops it; stop it with its whole process group."""
    from agents.serving.server import ServingError, VllmServer

    server = VllmServer(command)
    # SIGTERM to us (a supervisor, the studio) stops the server like Ctrl-C does. SIGINT is
    # set too: started from a script's background job, a process inherits SIGINT ignored
    # (Python then keeps it so), and `kill -INT` would leave the server running.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    typer.echo(f"starting: {command.shell()}", err=True)
    server.start()
    try:
        waited = server.wait_healthy(timeout_s=health_timeout)
        typer.echo(
            f"serving {command.argv[command.argv.index('serve') + 1]} at {command.base_url} "
            f"(tool parser {command.tool_parser}, healthy after {waited:.0f} s); Ctrl-C stops it"
        )
        sys.stdout.flush()
        code = server.wait()
    except KeyboardInterrupt:
        typer.echo("stopping vLLM ...", err=True)
        raise typer.Exit(0) from None
    except ServingError as exc:
        raise Unavailable(str(exc)) from None
    finally:
        server.stop()
    if code != 0:
        fail(f"vLLM exited with code {code}; its log is above", ExitCode.FAILED)
