"""`modelwright tools ...`: list the catalogue, run a sequence of calls, stress the runtime."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

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
        deadline: float = typer.Option(30.0, help="Per-call deadline in seconds.")) -> None:
    """Run one session over SEQ; a failed call is data (exit 0), unusable input exits non-zero."""
    try:
        calls = read_sequence(seq)
    except typer.BadParameter as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    from tools import confined
    from tools.errors import ToolError
    from tools.session import ToolSession
    from tools.supervisor import WorkerPool

    out.mkdir(parents=True, exist_ok=True)
    out = out.resolve()
    pool = WorkerPool(size=0, prewarm=False)
    # `out` is also the worker's workspace: what the worker made there (a link, a FIFO) is
    # never followed; every file below is written by name through tools.confined.
    try:
        with ToolSession(pool=pool, workspace=out, deadline_s=deadline) as s, \
                confined.create_file(out, "results.jsonl") as f:
            failed = renders = 0
            for call in calls:
                r = s.call(call["tool"], call["args"])
                failed += not r.ok
                f.write((json.dumps(r.to_dict()) + "\n").encode())
                f.flush()
                for i, img in enumerate(r.images):
                    confined.write_file(out, f"render_{renders:03d}_{i}.png", img)
                renders += bool(r.images)
            confined.write_file(out, "scene.json", json.dumps(s.scene(), indent=2).encode())
            final = s.render()
            if final.ok:
                confined.write_file(out, "final.png", final.images[0])
    except ToolError as e:
        typer.echo(f"error: {e.message}", err=True)
        raise typer.Exit(1) from None
    finally:
        pool.close()
    typer.echo(json.dumps({"calls": len(calls), "failed": failed, "out": str(out)}))


@app.command("stress")
def stress(calls: int = typer.Option(10_000, help="How many fuzzed calls."),
           seed: int = typer.Option(0)) -> None:
    """Fuzz the runtime with schema-generated and mutated calls; fails if the supervisor breaks."""
    from tools.fuzz import run_fuzz

    report = run_fuzz(calls, seed=seed, progress=True)
    typer.echo(json.dumps(report, indent=2))
    if report["supervisor_errors"]:
        sys.exit(1)
