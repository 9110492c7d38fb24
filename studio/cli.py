"""The `modelwright` command line: a thin shell over each layer's public face.

Each layer owns a module with `register(app)` that adds its commands; this file only
assembles them, from the literal list `COMMAND_MODULES`, so that `modelwright tools list`
never imports Qt, torch or bpy. A module of that list that cannot be imported is an error
(one line, exit 3), never a command group silently left out. Every
command ends by the convention of `tools/cli/exits.py` (0 ok, 1 failed, 2 usage or input,
3 unavailable): the errors below are a user's to fix and end in one line, never a traceback.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import typer

from tools.cli.exits import ExitCode, guarded_group

# The layers' errors that mean "the user must fix something", by class (subclasses follow).
USER_ERRORS = {
    "agents.store.errors.StoreError": ExitCode.USAGE,
    "agents.store.errors.EpisodeBusy": ExitCode.UNAVAILABLE,
    "agents.store.errors.StoreLocked": ExitCode.UNAVAILABLE,
    "agents.policies.UnknownPolicyError": ExitCode.USAGE,
    "agents.policies.simple.ScriptError": ExitCode.USAGE,
    "agents.policies.protocol.PolicyError": ExitCode.UNAVAILABLE,
    "agents.serving.server.ServingError": ExitCode.UNAVAILABLE,
    "agents.serving.profiles.UnknownModelFamily": ExitCode.USAGE,
    "training.tasks.spec.TaskError": ExitCode.USAGE,
    "training.eval.requests.ClusterUnavailable": ExitCode.UNAVAILABLE,
    "training.train_config.ConfigError": ExitCode.USAGE,
    "training.sft.data.DatasetError": ExitCode.USAGE,
    "training.rewards.geometry.ShapeLoadError": ExitCode.USAGE,
}

COMMAND_MODULES = (
    "tools.cli.commands",  # tools list / run
    "training.cli",  # tasks, score, run, eval, train, cluster
    "agents.cli",  # serve, mcp, models
    "agents.store.cli",  # data
    "studio.commands",  # studio (the GUI)
)


class MissingCommands(RuntimeError):
    """A module of the command table cannot be imported: the install is incomplete."""


def build_app(modules: Sequence[str] = COMMAND_MODULES) -> typer.Typer:
    app = typer.Typer(
        name="modelwright",
        help="Modelwright: build 3D models with a vision-language agent driving Blender and CadQuery.",
        no_args_is_help=False,
        invoke_without_command=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        cls=guarded_group(USER_ERRORS),
    )

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        """With no command, open the studio."""
        if ctx.invoked_subcommand is None:
            from studio.commands import open_studio

            open_studio()

    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            raise MissingCommands(
                f"the commands of {name} cannot be loaded ({exc}); reinstall with `make setup`"
            ) from None
        module.register(app)
    return app


def main(modules: Sequence[str] = COMMAND_MODULES) -> None:
    from agents.models.cpu import prepare_openmp

    prepare_openmp()  # before any command imports torch: its threads sleep, not spin, when idle
    try:
        app = build_app(modules)
    except MissingCommands as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(ExitCode.UNAVAILABLE) from None
    app()


if __name__ == "__main__":
    main()
