"""`modelwright tasks list|show|try` and `modelwright score A B`.

Module-level imports stay light: the task suite, tool runtime and CadQuery load inside the
commands that need them.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import typer

from tools.exits import ExitCode, fail, one_line
from tools.text import printable

tasks_app = typer.Typer(
    help="The task suite: list families, show a task, try calls on it.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")
    app.command("score")(score)


def _jsonable(value: Any) -> Any:
    import numpy as np

    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def _print(data: Any, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(_jsonable(data), indent=2))
    else:
        for key, value in _jsonable(data).items():
            shown = (
                value
                if isinstance(value, str | int | float | bool) or value is None
                else json.dumps(value)
            )
            typer.echo(printable(f"{key}: {shown}"))  # a result quotes the worker


@tasks_app.command("list")
def list_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Every task family: name, levels, description, split."""
    from training.tasks import list_families

    families = list_families()
    if as_json:
        typer.echo(json.dumps(families, indent=2))
        return
    for f in families:
        levels = ",".join(map(str, f["levels"]))
        typer.echo(f"{f['family']:<22} levels {levels:<6} {f['split']:<22} {f['description']}")


@tasks_app.command("show")
def show(
    task_id: str = typer.Argument(..., help="family:level:seed, e.g. cad_parts:2:7"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    image: Path | None = typer.Option(
        None, "--image", help="Also write the target image (PNG) here."
    ),
    no_image: bool = typer.Option(False, "--no-image", help="Skip rendering the target image."),
) -> None:
    """A task's prompt, parameters, oracle plan, constraints, budget and target image (if any)."""
    from training.tasks import get_task

    task = get_task(task_id)  # a TaskError ends the command with one line (exit 2)
    view = task.describe()
    # Text shows where the image went; JSON carries it. Rendering takes a worker: only
    # when it is asked for.
    if task.spec.has_target_image and not no_image and (as_json or image is not None):
        png = task.target_image  # renders once in a fresh worker
        if as_json:
            view["target_image"] = base64.b64encode(png).decode() if png else None
        if image is not None and png:
            from tools.outbox import Outbox

            Outbox(image.parent).write(image.name, png, png=True)  # a worker's render: re-encoded
    if as_json:
        _print(view, True)
    else:
        from training.cli.views import describe_task

        typer.echo(describe_task(view, image if task.spec.has_target_image else None))


def _load_calls(path: Path) -> list[dict[str, Any]]:
    from tools.cli import read_sequence

    try:
        return read_sequence(path)
    except typer.BadParameter as exc:
        fail(str(exc))


@tasks_app.command("try")
def try_cmd(
    target: str = typer.Argument(..., help="Task id, or with --benchmark the case name."),
    oracle: bool = typer.Option(False, "--oracle", help="Run the task's oracle plan."),
    calls: Path | None = typer.Option(
        None, "--calls", help="JSONL of {tool, args} (the `tools run` format)."
    ),
    none: bool = typer.Option(False, "--none", help="Run no calls (checks the start state)."),
    benchmark: Path | None = typer.Option(
        None, "--benchmark", help="An external benchmark folder."
    ),
    reference: bool = typer.Option(
        False, "--reference", help="With --benchmark: run the case's .py."
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Folder for calls.jsonl, scene.json, reward.json, final.png."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    deadline: float = typer.Option(60.0, help="Per-call deadline in seconds."),
) -> None:
    """Set up the start state in a fresh session, run the calls, check, print the reward."""
    from training.tasks import get_task

    if sum([oracle, calls is not None, none, reference]) != 1:
        fail("choose exactly one of --oracle, --calls FILE, --none, --reference")
    if benchmark is not None:  # a TaskError ends the command with one line (exit 2)
        from training.tasks.benchmark import load_benchmark

        task = load_benchmark(benchmark).case(target).task()
        if oracle:
            fail("--oracle is for generated tasks; use --reference for a benchmark case")
        if reference and not task.oracle:
            fail(f"case {target!r} has no reference .py")
    else:
        if reference:
            fail("--reference needs --benchmark DIR")
        task = get_task(target)
    steps = task.oracle if (oracle or reference) else _load_calls(calls) if calls else []

    from tools import ToolSession, WorkerPool
    from tools.errors import ToolError
    from tools.outbox import Outbox
    from training.tasks.verifier import boot_for_one_episode

    try:  # the worker never sees `out`: what the command delivers is written here, afterwards
        box = Outbox(out) if out is not None else None
    except ToolError as exc:
        fail(exc.message)
    pool = WorkerPool(size=0, prewarm=False)
    pool.boot()  # the policy's and the verifier's workers start now, side by side
    boot_for_one_episode()
    import training.tasks.checks  # noqa: F401  (the checker's imports, while they start)
    from training.tasks.runner import attempt

    try:
        with ToolSession(pool=pool, deadline_s=deadline) as session:
            result = attempt(task, session, steps)
            summary = result.summary()
            if box is not None:
                _deliver(box, session, result.calls, summary)
    except ToolError as exc:
        fail(exc.message, int(ExitCode.FAILED))
    finally:
        pool.close()
    if not as_json:
        summary = {k: v for k, v in summary.items() if k != "details"}
    _print(summary, as_json)


def _deliver(box, session, calls: list[dict], summary: dict) -> None:
    """calls.jsonl, scene.json, reward.json, final.png and every export the calls made, copied
    out of the worker's scratch through the outbox (tools/outbox.py)."""
    from tools.errors import ToolError
    from tools.outbox import export_path

    with box.log("calls.jsonl") as f:
        for c in calls:
            f.write((json.dumps(c) + "\n").encode())
    box.write_json("scene.json", session.scene(), indent=2)
    box.write_json("reward.json", _jsonable(summary), indent=2)
    final = session.render()
    if final.ok and final.images:
        box.write("final.png", final.images[0])
    for c in calls:
        if c.get("tool") == "export" and c.get("ok"):
            try:
                box.take(session.workspace, export_path(c["args"]))
            except ToolError as exc:  # the episode's outcome stands; the file is not delivered
                typer.echo(f"warning: {one_line(exc.message)}", err=True)


@tasks_app.command("verify")
def verify(
    families: str | None = typer.Option(None, help="Comma-separated families (default: all)."),
    seeds: str = typer.Option("0:3", help="Seed range A:B (B excluded)."),
    perturb: bool = typer.Option(True, help="Also check that perturbed oracles fail."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Prove the checkers over many seeds: oracle passes, nothing fails, perturbed fails."""
    from training.tasks import FAMILIES, TaskError, get_task
    from training.tasks.perturb import verify_task

    names = families.split(",") if families else list(FAMILIES)
    try:
        lo, hi = (int(v) for v in seeds.split(":"))
        ids = [f"{f}:{lvl}:{s}" for f in names for lvl in FAMILIES[f].levels for s in range(lo, hi)]
    except (ValueError, KeyError) as exc:
        fail(
            f"bad --families or --seeds ({exc}); seeds look like 0:5, families like cad_parts,materials"
        )
    from tools import ToolSession, WorkerPool

    problems: list[str] = []
    pool = WorkerPool(size=0, prewarm=False)
    try:
        with ToolSession(pool=pool, deadline_s=60) as session:
            for n, task_id in enumerate(ids, 1):
                try:
                    found = verify_task(get_task(task_id), session, perturb)
                except TaskError as exc:
                    found = [f"{task_id}: {exc}"]
                problems += found
                typer.echo(
                    f"[{n}/{len(ids)}] {task_id}: {'ok' if not found else '; '.join(found)}",
                    err=True,
                )
    finally:
        pool.close()
    _print({"checked": len(ids), "problems": problems}, as_json)
    if problems:
        raise typer.Exit(int(ExitCode.FAILED))


def score(
    a: Path = typer.Argument(..., help="Reference shape (.stl/.obj/.glb/.step)."),
    b: Path = typer.Argument(..., help="Candidate shape (.stl/.obj/.glb/.step)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Compare two shape files with every geometry metric (normalised chamfer x10^3, IoUs)."""
    from training.cli.views import why_not_measured
    from training.rewards.geometry import compare_files

    result = compare_files(a, b)  # a ShapeLoadError ends the command with one line (exit 2)
    metrics = result.to_dict()
    why = why_not_measured(metrics, a, b)
    if as_json:
        _print({"a": str(a), "b": str(b), **metrics, "not_measured": why}, True)
        return
    _print({"a": str(a), "b": str(b),
            **{k: f"n/a — {why[k]}" if v is None else v for k, v in metrics.items()}}, False)
