"""`modelwright train sft|grpo|pipeline --config F [--resume] [--out DIR]`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from tools.cli.exits import fail


def _load(config: Path, kind: str, probe: bool = True, quick: bool = False):
    """The config, its model checked before anything slow starts (workers, datasets).
    A ConfigError or a missing model ends the command with one line (exit 2). `probe=False`
    (dry runs) checks a local folder but never asks the hub about a hub id."""
    from training.tasks import TaskError
    from training.tasks.sampling import check_task_choices
    from training.train_config import load_config

    cfg = load_config(config, quick=quick)
    if cfg.kind != kind:
        fail(f"{config} is a {cfg.kind!r} config; use `modelwright train {cfg.kind}`")
    try:  # families, levels and weights against the task registry
        check_task_choices(cfg)
    except TaskError as exc:
        fail(f"{config}: {exc}")
    if cfg.model.path and not cfg.model.build_tiny:
        from agents import resolve_model  # with build_tiny, model.path is where it is built

        resolve_model(cfg.model.path, probe=probe)
    return cfg


def _out(cfg, out: Path | None) -> Path:
    if out is not None:
        return out
    if cfg.run.out_dir:
        return Path(cfg.run.out_dir)
    return Path("runs") / (cfg.name or cfg.kind)


CONFIG = typer.Option(
    ..., "--config", "-c", exists=True, dir_okay=False, help="YAML config (see configs/)."
)
RESUME = typer.Option(
    False, "--resume", help="Continue from the last complete checkpoint in the run folder."
)
OUT = typer.Option(
    None, "--out", help="Run folder (default: run.out_dir, else runs/<config name>)."
)


def register(app: typer.Typer) -> None:
    train = typer.Typer(
        help="Fine-tune a policy: SFT on episodes, GRPO in the tool environment.",
        no_args_is_help=True,
    )

    @train.command("sft")
    def sft(config: Path = CONFIG, resume: bool = RESUME, out: Path | None = OUT) -> None:
        """Supervised fine-tuning (LoRA) on exported episodes."""
        from training.sft.trainer import run_sft

        cfg = _load(config, "sft")
        result = run_sft(cfg, _out(cfg, out), resume=resume, config_text=config.read_text())
        typer.echo(
            json.dumps(
                {
                    "run_dir": str(result.run_dir),
                    "adapter": str(result.adapter_dir),
                    "steps": result.steps,
                    "loss": result.final_loss,
                    "resumed_from": result.resumed_from,
                }
            )
        )

    @train.command("grpo")
    def grpo(
        config: Path = CONFIG,
        resume: bool = RESUME,
        out: Path | None = OUT,
        adapter: Path | None = typer.Option(
            None, help="Start from this LoRA adapter (e.g. SFT's)."
        ),
        dry_run: bool = typer.Option(
            False, "--dry-run", help="Check the config and print a step's plan; start nothing."
        ),
    ) -> None:
        """Multi-turn GRPO: rollouts are episodes of the agent loop, rewards the tasks' checks."""
        from training.rl.grpo import run_grpo

        cfg = _load(config, "grpo", probe=not dry_run)
        if adapter is not None and not (adapter / "adapter_config.json").is_file():
            fail(f"{adapter} is not a LoRA adapter folder (no adapter_config.json); point at "
                 "the adapter a `modelwright train sft` run saved (RUN/adapter)")
        if dry_run:
            from training.rl.grpo_server import plan

            typer.echo(json.dumps(plan(cfg)))
            return
        result = run_grpo(
            cfg, _out(cfg, out), resume=resume, adapter=adapter, config_text=config.read_text()
        )
        typer.echo(
            json.dumps(
                {
                    "run_dir": str(result.run_dir),
                    "adapter": str(result.adapter_dir),
                    "steps": result.steps,
                    "resumed_from": result.resumed_from,
                }
            )
        )

    @train.command("pipeline")
    def pipeline(
        config: Path = CONFIG,
        out: Path | None = OUT,
        resume: bool = RESUME,
        quick: bool = typer.Option(
            False, "--quick", help="Apply the config's `quick:` overrides: a short run."
        ),
    ) -> None:
        """Base model -> zero-shot eval -> oracle demonstrations -> SFT -> eval -> GRPO -> eval
        -> report.json."""
        import signal

        from training.pipeline import run_pipeline

        cfg = _load(config, "pipeline", quick=quick)
        run_dir = _out(cfg, out)
        # A supervisor's stop (SIGTERM: `kill`, a job scheduler, the studio) is Ctrl-C: the
        # stage in progress keeps its time, an eval stage ends the episodes under way.
        before = signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            report = run_pipeline(cfg, run_dir, resume=resume)
        except KeyboardInterrupt:
            typer.echo(f"stopped: the finished stages, checkpoints and eval episodes in "
                       f"{run_dir} are kept; add --resume to the same command to go on",
                       err=True)  # fmt: skip
            raise typer.Exit(130) from None
        finally:
            signal.signal(signal.SIGTERM, before)
        typer.echo(report["summary"])

    @train.command("launch")
    def launch(
        config: Path = CONFIG,
        out: Path | None = OUT,
        machine_rank: int = typer.Option(0, help="This machine's rank (0 on the main node)."),
        vllm_gpus: str | None = typer.Option(None, help="GPUs for `trl vllm-serve`, e.g. 7."),
        tensor_parallel: int = typer.Option(
            1, help="vLLM tensor parallel size (1: `modelwright serve` has no other yet)."
        ),
    ) -> None:
        """Print the command lines for a multi-GPU / multi-node run of CONFIG (nothing is started)."""
        from training.launch import render, train_command, vllm_server_command
        from training.train_config import load_config

        try:
            cfg = load_config(config)
            server = vllm_server_command(cfg, tensor_parallel=tensor_parallel, gpus=vllm_gpus)
            line = train_command(cfg, config, out=out, machine_rank=machine_rank)
        except ValueError as exc:  # ConfigError is one
            fail(str(exc))
        if server:
            typer.echo("# 1. the rollout server (once, on GPUs the trainers do not use)")
            typer.echo(render(server))
            typer.echo("# 2. the trainers (on every machine, with its own --machine_rank)")
        typer.echo(render(line))

    app.add_typer(train, name="train")
