"""`modelwright tasks list|show|try|verify|cards` and `modelwright score A B`.

Module-level imports stay light: the task suite, tool runtime and CadQuery load inside the
commands that need them.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import typer

from tools.cli.exits import ExitCode, fail, one_line
from tools.text import printable

tasks_app = typer.Typer(
    help="The task suite: list families, show a task, try calls on it, verify the checkers.",
    no_args_is_help=True,
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
    """Every task family by domain: levels, split and the oracle's mean call count per level
    (measured from its plans on a few seeds, never declared)."""
    from training.tasks.registry import family_rows, table_text  # the package registers them

    rows = family_rows()
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    typer.echo(table_text(rows))


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
    # What each start file is (made at setup, so showing a task never pays for CadQuery).
    view["file_sources"] = {
        name: f"a reference {data[0].removeprefix('reference_').upper()}, made from a CAD "
        "script at setup" if isinstance(data, tuple) else f"{len(data)} bytes"
        for name, data in sorted(task.spec.files.items())
    }
    # Text shows where the image went; JSON carries it. Rendering takes a worker: only
    # when it is asked for.
    if task.spec.has_target_image and not no_image and (as_json or image is not None):
        png = task.target_image  # renders once in a fresh worker
        if as_json:
            view["target_image"] = base64.b64encode(png).decode() if png else None
        if image is not None and png:
            from tools.trust.outbox import Outbox

            Outbox(image.parent).write(image.name, png, png=True)  # a worker's render: re-encoded
    if as_json:
        _print(view, True)
    else:
        from training.cli.views import describe_task

        typer.echo(describe_task(view, image if task.spec.has_target_image else None))


def _load_calls(path: Path) -> list[dict[str, Any]]:
    from tools.cli.commands import read_sequence

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
    from tools.trust.outbox import Outbox
    from training.tasks.verifier import boot_for_one_episode

    try:  # the worker never sees `out`: what the command delivers is written here, afterwards
        box = Outbox(out) if out is not None else None
    except ToolError as exc:
        fail(exc.message)
    pool = WorkerPool(size=0, prewarm=False)
    pool.boot()  # the policy's and the verifier's workers start now, side by side
    boot_for_one_episode()
    import training.tasks.checks.verdict  # noqa: F401  (the checker's imports, while they start)
    from training.tasks.runner import attempt

    try:
        with ToolSession(pool=pool, deadline_s=deadline) as session:
            result = attempt(task, session, steps)
            calls = _trusted(result.calls, result.reward)
            summary = {**result.summary(), "errors": [c for c in calls if not c["ok"]]}
            if box is not None:
                _deliver(box, session, calls, summary)
    except ToolError as exc:
        fail(exc.message, int(ExitCode.FAILED))
    finally:
        pool.close()
    if not as_json:
        summary = {k: v for k, v in summary.items() if k != "details"}
    _print(summary, as_json)


# A failed call's message that the trusted side wrote itself: the call never reached the
# worker (refused), or the supervisor stopped it (timeout, crash, a bad reply).
_OWN_WORDS = frozenset({"refused", "timeout", "crash"})


def _trusted(calls: list[dict[str, Any]], verdict: Any) -> list[dict[str, Any]]:
    """A report's call list from the verifier's record (`details["calls"]`: what the clean
    rebuild established of each call, the same flags the reward used), never from the
    worker's replies: a failed call's message is the trusted side's own, or is labelled as
    the worker's (`worker_error`)."""
    record = (getattr(verdict, "details", None) or {}).get("calls") or []
    out = []
    for i, c in enumerate(calls):
        known = record[i] if i < len(record) and record[i].get("seq") == c.get("seq") else {}
        ok, outcome = bool(known.get("ok", False)), known.get("outcome", "unrecorded")
        row = {"tool": c.get("tool"), "args": c.get("args"), "seq": c.get("seq"), "ok": ok,
               "outcome": outcome, "error_kind": None, "error": None}
        if not ok:
            if outcome in _OWN_WORDS:
                row["error_kind"], row["error"] = c.get("error_kind"), c.get("error")
            elif outcome == "answered":
                row["error"] = "it failed when the trusted side ran it again in a clean worker"
            else:
                row["error"] = "no call of the session's record matches it"
        if outcome == "answered":  # labelled: what the worker said, kept for the person
            row["worker_reported_ok"] = bool(c.get("ok"))
            row["worker_error"] = c.get("error")
        out.append(row)
    return out


def _deliver(box, session, calls: list[dict], summary: dict) -> None:
    """calls.jsonl, scene.json, reward.json, final.png and every export the calls made, copied
    out of the worker's scratch through the outbox (tools/trust/outbox.py)."""
    from tools.errors import ToolError
    from tools.trust.outbox import export_path

    with box.log("calls.jsonl") as f:
        for c in calls:
            f.write((json.dumps(c) + "\n").encode())
    box.write_json("reward.json", _jsonable(summary), indent=2)
    try:  # the policy's worker answers this: a failure costs the file, not the report
        box.write_json("scene.json", session.scene(), indent=2)
    except ToolError as exc:
        typer.echo(f"warning: scene.json not written: {one_line(exc.message)}", err=True)
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
    seeds: int = typer.Option(3, "--seeds", help="Seeds per family and level, from the "
                              "family's split (train; test for a held-out family)."),
    family: list[str] = typer.Option(None, "--family", help="A family (repeatable; default all)."),
    level: list[int] = typer.Option(None, "--level", help="A level (repeatable; default all)."),
    jobs: int = typer.Option(None, "--jobs", help="Tasks checked at once (default min(2, CPUs))."),
    perturb: bool = typer.Option(True, help="Also check that perturbed oracles fail."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Prove the checkers: on sampled seeds of every level of every family, the oracle
    succeeds, the empty plan fails and every applicable perturbation is caught. One line per
    problem, then a summary; exit 1 if there is any problem."""
    import os

    from training.eval.verify_tasks import verify as run_verify
    from training.tasks.registry import verify_ids  # the package registers the families

    jobs = jobs if jobs is not None else min(2, os.cpu_count() or 1)
    if jobs < 1:
        fail(f"--jobs must be at least 1, not {jobs}")
    ids, notes = verify_ids(family, level, seeds)  # a TaskError: one line, exit 2
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    if not ids:
        fail("nothing to verify: no chosen family has the chosen levels")

    def progress(task_id: str, problems: list[str], n: int, total: int) -> None:
        typer.echo(f"[{n}/{total}] {task_id}: {'ok' if not problems else 'PROBLEM'}", err=True)

    report = run_verify(ids, jobs, perturb,
                        on_problem=None if as_json else lambda line: typer.echo(printable(line)),
                        on_done=progress)  # fmt: skip
    report.skipped = notes
    data = report.to_dict()
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    else:
        typer.echo(f"verified {data['families']} families, {data['levels']} levels, "
                   f"{data['tasks']} tasks, {data['attempts']} attempts: "
                   f"{len(data['problems'])} problem(s) in {data['elapsed_s']:.0f} s")
    if report.problems:
        raise typer.Exit(int(ExitCode.FAILED))


@tasks_app.command("cards")
def cards(
    family: list[str] = typer.Option(None, "--family", help="A family (repeatable; default all)."),
    out: Path = typer.Option(Path("docs/img/tasks"), "--out", help="Folder for the pictures."),
    table: bool = typer.Option(False, "--table", help="Instead of pictures: print the table of "
                               "mean oracle calls per level and update it in --doc."),
    doc: Path = typer.Option(Path("docs/TASKS.md"), "--doc", help="The file --table updates "
                             "(between <!-- calls-table --> markers, added if absent)."),
) -> None:
    """The docs' task cards: FAMILY-1.png and FAMILY-5.png (the oracle's solved scene of
    seed 0, rendered by our renderer, 320x240), or with --table the call-count table."""
    from training.tasks import registry  # importing the package registers the families

    if table:
        rows = registry.family_rows()
        if family:
            rows = [r for r in rows if r["family"] in family]
        body = registry.calls_table_markdown(rows)
        typer.echo(body)
        text = doc.read_text() if doc.is_file() else ""
        from tools.errors import ToolError
        from tools.trust.outbox import Outbox

        try:  # the person's file, through the one writer (a planted link is not followed)
            Outbox(doc.parent).save_text(doc.name, registry.update_between_markers(text, body))
        except ToolError as exc:
            fail(exc.message)
        typer.echo(f"updated {doc}", err=True)
        return
    ids, notes = registry.card_ids(family)  # a TaskError: one line, exit 2
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    if not ids:
        fail("no chosen family has levels 1 and 5 yet")
    from tools import ToolSession
    from tools.errors import ToolError
    from tools.trust.outbox import Outbox
    from training.tasks import TaskError

    try:
        box = Outbox(out)
    except ToolError as exc:
        fail(exc.message)
    failed = 0
    with ToolSession(deadline_s=120) as session:
        for task_id in ids:
            name, level, _ = task_id.split(":")
            try:
                png = registry.card_png(task_id, session)
            except (TaskError, ToolError) as exc:
                failed += 1
                typer.echo(f"{task_id}: {one_line(str(exc))}")
                continue
            path = box.write(f"{name}-{level}.png", png, png=True)
            typer.echo(f"{path}  ({path.stat().st_size // 1024} KiB)")
    if failed:
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
