"""The `modelwright` command line: a thin shell over each layer's public face.

Each layer owns a module with `register(app)` that adds its commands; this file only
assembles them, so that `modelwright tools list` never imports Qt, torch or bpy. Every
command ends by the convention of `tools/cli/exits.py` (0 ok, 1 failed, 2 usage or input,
3 unavailable): the errors below are a user's to fix and end in one line, never a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util

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
    "training.tasks.base.TaskError": ExitCode.USAGE,
    "training.eval.requests.ClusterUnavailable": ExitCode.UNAVAILABLE,
    "training.train_config.ConfigError": ExitCode.USAGE,
    "training.sft.data.DatasetError": ExitCode.USAGE,
    "training.rewards.geometry.ShapeLoadError": ExitCode.USAGE,
}

COMMAND_MODULES = (
    "tools.cli.commands",  # tools list / run
    "training.cli",  # tasks, score, run, eval, train
    "agents.cli",  # serve, mcp, dev
    "agents.store.cli",  # data
    "studio.commands",  # studio (the GUI)
)


def build_app() -> typer.Typer:
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

    for name in COMMAND_MODULES:
        if importlib.util.find_spec(name) is None:
            continue
        importlib.import_module(name).register(app)
    return app


def main() -> None:
    build_app()()


if __name__ == "__main__":
    main()
