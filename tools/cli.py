"""`modelwright tools ...`: list the catalogue, run a sequence of calls, check the jail, stress."""

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
    from tools.session import ToolSession
    from tools.supervisor import WorkerPool

    out.mkdir(parents=True, exist_ok=True)
    pool = WorkerPool(size=0, prewarm=False)
    try:
        with ToolSession(pool=pool, workspace=out, deadline_s=deadline) as s, open(out / "results.jsonl", "w") as f:
            failed = 0
            for call in calls:
                r = s.call(call["tool"], call["args"])
                failed += not r.ok
                f.write(json.dumps(r.to_dict()) + "\n")
                for i, img in enumerate(r.images):
                    (out / f"render_{sum(1 for _ in out.glob('render_*.png')):03d}_{i}.png").write_bytes(img)
            (out / "scene.json").write_text(json.dumps(s.scene(), indent=2))
            final = s.render()
            if final.ok:
                (out / "final.png").write_bytes(final.images[0])
    finally:
        pool.close()
    typer.echo(json.dumps({"calls": len(calls), "failed": failed, "out": str(out)}))


@app.command("doctor")
def doctor(as_json: bool = typer.Option(False, "--json", help="Print the measurements as JSON.")) -> None:
    """Start one worker and print its jail as measured from inside; exit 1 if a property fails."""
    from tools.doctor import main as doctor_main

    raise typer.Exit(doctor_main(["--json"] if as_json else []))


@app.command("stress")
def stress(calls: int = typer.Option(10_000, help="How many fuzzed calls."),
           seed: int = typer.Option(0)) -> None:
    """Fuzz the runtime with schema-generated and mutated calls; fails if the supervisor breaks."""
    from tools.fuzz import run_fuzz

    report = run_fuzz(calls, seed=seed, progress=True)
    typer.echo(json.dumps(report, indent=2))
    if report["supervisor_errors"]:
        sys.exit(1)
