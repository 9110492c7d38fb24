"""`modelwright tools ...`: list the catalogue, run a sequence of calls, check the jail, stress."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from tools.cli.exits import ExitCode, fail, one_line

app = typer.Typer(help="The tool runtime: list tools, run call sequences.", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="tools")


@app.command("list")
def list_tools(as_json: bool = typer.Option(False, "--json", help="Print the catalogue as JSON.")) -> None:
    """Every tool: name, description, JSON-schema parameters, mutating, kernel."""
    from tools.specs import catalogue

    cat = catalogue()
    if as_json:
        typer.echo(json.dumps(cat, indent=2))
        return
    for t in cat:
        flag = "mutating " if t["mutating"] else "read-only"
        typer.echo(f"{t['name']:<20} {t['kernel']:<9} {flag}  {t['description']}")


def read_sequence(path: Path) -> list[dict]:
    """Parse a `tools run` file; a line that is not a JSON object exits with a one-line reason."""
    if not path.is_file():
        raise typer.BadParameter(f"no such file: {path}")
    calls = []
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as e:
            raise typer.BadParameter(f"{path}:{n}: not JSON ({e.msg})") from None
        if not isinstance(item, dict) or "tool" not in item:
            raise typer.BadParameter(f"{path}:{n}: each line must be an object {{\"tool\": NAME, \"args\": {{...}}}}")
        calls.append({"tool": item["tool"], "args": item.get("args", {})})
    return calls


@app.command("run")
def run(seq: Path = typer.Argument(..., help="JSONL: one {\"tool\": NAME, \"args\": {...}} per line."),
        out: Path = typer.Option(..., "--out", help="Folder for results.jsonl, scene.json, final.png, exports."),
        deadline: float = typer.Option(30.0, help="Per-call deadline in seconds."),
        keep_going: bool = typer.Option(False, "--keep-going", "-k",
                                        help="Run every call even after one fails, and exit 0.")) -> None:
    """Run one session over SEQ. It stops at the first failed call and exits 1 (with
    --keep-going it runs every call and exits 0); each failure is one line on stderr."""
    try:
        calls = read_sequence(seq)
    except typer.BadParameter as e:
        fail(str(e))
    from tools.errors import ToolError
    from tools.runtime.session import ToolSession
    from tools.runtime.supervisor import WorkerPool
    from tools.trust.outbox import UserFolder

    try:
        folder = UserFolder(out)
    except ToolError as e:
        fail(e.message)
    out, box = folder.root, folder.outbox
    pool = WorkerPool(size=0, prewarm=False)
    failures: list[str] = []
    ran = renders = 0
    # The worker works in its private scratch and never sees `out`: an import is copied in
    # before its call, and every file below is written by the trusted side through the outbox.
    try:
        with ToolSession(pool=pool, deadline_s=deadline) as s, box.log("results.jsonl") as f:
            for n, call in enumerate(calls, 1):
                r = folder.call(s, call["tool"], call["args"])
                ran += 1
                f.write((json.dumps(r.to_dict()) + "\n").encode())
                f.flush()
                for i, img in enumerate(r.images):
                    box.write(f"render_{renders:03d}_{i}.png", img)
                renders += bool(r.images)
                if not r.ok:
                    err = r.error
                    kind, message = (err.kind.value, err.message) if err else ("unknown", "")
                    failures.append(f"{seq}:{n}: {r.tool} failed ({kind}): {one_line(message)}")
                    if not keep_going:
                        typer.echo(f"error: {failures[-1]}; stopped after call {n} of "
                                   f"{len(calls)} (--keep-going runs them all)", err=True)
                        break
                    typer.echo(f"error: {failures[-1]}", err=True)
            box.write_json("scene.json", s.scene(), indent=2)
            final = s.render()
            if final.ok:
                box.write("final.png", final.images[0])
    except ToolError as e:
        typer.echo(f"error: {one_line(e.message)}", err=True)
        raise typer.Exit(1) from None
    finally:
        pool.close()
    typer.echo(json.dumps({"calls": len(calls), "ran": ran, "failed": len(failures), "out": str(out)}))
    if failures and not keep_going:
        raise typer.Exit(int(ExitCode.FAILED))


@app.command("doctor")
def doctor(as_json: bool = typer.Option(False, "--json", help="Print the measurements as JSON.")) -> None:
    """Start one worker and print its jail as measured from inside; exit 1 if a property fails."""
    from tools.cli.doctor import main as doctor_main

    raise typer.Exit(doctor_main(["--json"] if as_json else []))


@app.command("stress")
def stress(calls: int = typer.Option(10_000, help="How many fuzzed calls."),
           seed: int = typer.Option(0)) -> None:
    """Fuzz the runtime with schema-generated and mutated calls; fails if the supervisor breaks."""
    from tools.cli.fuzz import run_fuzz

    report = run_fuzz(calls, seed=seed, progress=True)
    typer.echo(json.dumps(report, indent=2))
    if report["supervisor_errors"]:
        raise typer.Exit(int(ExitCode.FAILED))
