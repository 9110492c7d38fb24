"""`modelwright data ...`: list, show, export, replay, import and delete recorded episodes.

Every command takes `--data-dir` (else MODELWRIGHT_DATA_DIR, else the platform default).
Exit codes follow `tools/cli/exits.py`: a store error is one actionable line on stderr and exit
2 (3 when another process holds the episode), raised through to the app's one handler; a
replay that diverges exits 1.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from tools.cli.exits import ExitCode
from tools.text import printable

DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Store folder (default: $MODELWRIGHT_DATA_DIR, else the platform's user data dir).",
        show_default=False,
    ),
]
Source = Annotated[str | None, typer.Option("--source", help="human, agent, oracle or rollout.")]
Family = Annotated[str | None, typer.Option("--task-family", help="Task family.")]
Success = Annotated[
    bool | None, typer.Option("--success/--failed", help="Only (un)successful.", show_default=False)
]
Status = Annotated[str | None, typer.Option("--status", help="running, finished, interrupted.")]
Model = Annotated[str | None, typer.Option("--model", help="Model id.")]
Tag = Annotated[str | None, typer.Option("--tag", help="Episodes carrying this tag.")]
Limit = Annotated[int | None, typer.Option("--limit", help="At most this many episodes.")]
AsJson = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _filter(source, family, success, status, model, tag, limit):
    from agents.store.errors import StoreError
    from agents.store.models import SOURCES, EpisodeFilter

    if source is not None and source not in SOURCES:
        raise StoreError(f"--source must be one of {', '.join(SOURCES)}, not {source!r}")
    return EpisodeFilter(
        source=source,
        task_family=family,
        success=success,
        status=status,
        model=model,
        tag=tag,
        limit=limit,
    )


def _echo(text: str, err: bool = False) -> None:
    """Every line this command prints: a store's text (an imported one is anyone's) escaped."""
    typer.echo(printable(text), err=err)


def _when(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def register(app: typer.Typer) -> None:
    data = typer.Typer(
        help="Recorded episodes: list, show, export, replay, import, delete.", no_args_is_help=True
    )
    app.add_typer(data, name="data")

    @data.command("list")
    def list_cmd(
        data_dir: DataDir = None,
        source: Source = None,
        task_family: Family = None,
        success: Success = None,
        status: Status = None,
        model: Model = None,
        tag: Tag = None,
        limit: Limit = None,
        as_json: AsJson = False,
    ) -> None:
        """List episodes, oldest first."""
        from agents.store.errors import StoreError
        from agents.store.location import resolve_data_dir
        from agents.store.schema import INDEX_NAME
        from agents.store.store import Store

        where = _filter(source, task_family, success, status, model, tag, limit)
        root = resolve_data_dir(data_dir)
        if not root.is_dir():  # a mistyped path must not read as an empty store
            raise StoreError(f"no store at {root}: the folder does not exist; pass --data-dir "
                             "or set MODELWRIGHT_DATA_DIR to the store you mean")
        if not (root / INDEX_NAME).exists():
            episodes = []  # nothing recorded yet: an empty list, and no store created
        else:
            with Store(data_dir, create=False) as store:
                episodes = store.list_episodes(where)
        if as_json:
            _echo(json.dumps([e.to_dict() for e in episodes]))
            return
        if not episodes:
            _echo("no episodes")
            return
        _echo(
            f"{'id':26} {'created (UTC)':19} {'source':7} {'status':11} {'steps':>5} "
            f"{'reward':>7} {'ok':3} task"
        )
        for e in episodes:
            reward = "-" if e.reward is None else f"{e.reward:.3f}"
            ok = "-" if e.success is None else ("yes" if e.success else "no")
            _echo(
                f"{e.id:26} {_when(e.created_at):19} {e.source:7} {e.status:11} "
                f"{e.n_steps:>5} {reward:>7} {ok:3} {e.task_id or '-'}"
            )

    @data.command("show")
    def show_cmd(episode: str, data_dir: DataDir = None, as_json: AsJson = False) -> None:
        """Show one episode (an id or a unique prefix) and its steps."""
        from agents.store.store import Store

        with Store(data_dir, create=False) as store:
            ep = store.episode(episode)
            steps = store.steps(ep.id)
        if as_json:
            _echo(json.dumps({**ep.to_dict(), "steps": [s.to_dict() for s in steps]}))
            return
        _echo(f"episode {ep.id}  [{ep.status}]  source={ep.source}  task={ep.task_id or '-'}")
        _echo(
            f"  created {_when(ep.created_at)}  finished {_when(ep.finished_at)}  "
            f"policy={ep.policy or '-'} model={ep.model or '-'} adapter={ep.adapter or '-'}"
        )
        _echo(f"  reward={ep.reward} success={ep.success} components={ep.components}")
        _echo(
            f"  steps={ep.n_steps} errors={ep.n_errors} tool_ms={ep.tool_ms:.1f} "
            f"tokens={ep.tokens_in}/{ep.tokens_out} versions={ep.versions}"
        )
        if ep.prompt:
            _echo(f"  prompt: {ep.prompt}")
        for s in steps:
            status = "ok" if s.ok else f"ERROR {s.error_kind}: {s.error_message}"
            _echo(
                f"  [{s.index:3}] {s.tool}({json.dumps(s.args)}) -> {status}  "
                f"{s.duration_ms:.1f} ms  hash={(s.scene_hash or '-')[:12]}"
                f"{'  frame' if s.frame else ''}"
            )

    @data.command("export")
    def export_cmd(
        out: Annotated[Path, typer.Option("--out", help="Folder to write into.")],
        fmt: Annotated[str, typer.Option("--format", help="Only parquet.")] = "parquet",
        data_dir: DataDir = None,
        source: Source = None,
        task_family: Family = None,
        success: Success = None,
        model: Model = None,
        tag: Tag = None,
        limit: Limit = None,
        include_interrupted: Annotated[
            bool, typer.Option("--include-interrupted", help="Also export interrupted episodes.")
        ] = False,
        include_untasked: Annotated[
            bool,
            typer.Option(
                "--include-untasked", help="Also export episodes with neither a task nor a goal."
            ),
        ] = False,
        as_json: AsJson = False,
    ) -> None:
        """Export finished episodes as Parquet in TRL's conversational format (+ a step table).
        Episodes with neither a task nor a goal are left out unless --include-untasked."""
        from agents.store.errors import ExportError
        from agents.store.export import FORMATS, export_parquet
        from agents.store.store import Store

        if fmt not in FORMATS:
            raise ExportError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
        where = _filter(source, task_family, success, None, model, tag, limit)
        with Store(data_dir, create=False) as store:
            if as_json or not sys.stderr.isatty():
                report = export_parquet(store, out, where, include_interrupted=include_interrupted,
                                        include_untasked=include_untasked)
            else:
                from tqdm import tqdm

                with tqdm(unit="episode", desc="export") as bar:

                    def step(done: int, total: int) -> None:
                        bar.total = total
                        bar.update(done - bar.n)

                    report = export_parquet(
                        store, out, where, include_interrupted=include_interrupted,
                        include_untasked=include_untasked, progress=step
                    )
        if as_json:
            from dataclasses import asdict

            _echo(json.dumps(asdict(report)))
        else:
            _echo(
                f"exported {report.episodes} episodes ({report.steps} steps, "
                f"{report.images} images) to {report.out} in {report.seconds:.2f} s"
            )

    @data.command("replay")
    def replay_cmd(episode: str, data_dir: DataDir = None, as_json: AsJson = False) -> None:
        """Re-execute an episode in a fresh tool session, checking the scene hash at each step."""
        from agents.store.replay import replay_episode
        from agents.store.store import Store

        with Store(data_dir, create=False) as store:
            report = replay_episode(store, episode)
        _echo(json.dumps(report.to_dict()) if as_json else report.summary())
        if not report.matched:
            raise typer.Exit(int(ExitCode.FAILED))

    @data.command("import")
    def import_cmd(source: Path, data_dir: DataDir = None, as_json: AsJson = False) -> None:
        """Import episodes from another store's folder or from a `data export` folder."""
        from dataclasses import asdict

        from agents.store.importer import import_into
        from agents.store.store import Store

        with Store(data_dir) as store:
            report = import_into(store, source)
        if as_json:
            _echo(json.dumps(asdict(report)))
        else:
            _echo(
                f"imported {len(report.imported)} episodes from {report.kind} {source}"
                f" ({len(report.skipped)} skipped: already present or still recording)"
            )

    @data.command("delete")
    def delete_cmd(
        episodes: list[str],
        data_dir: DataDir = None,
        yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    ) -> None:
        """Delete episodes (rows, frames and artifacts)."""
        from agents.store.store import Store

        with Store(data_dir, create=False) as store:
            ids = [store.resolve(e) for e in episodes]
            if not yes and not typer.confirm(f"delete {len(ids)} episode(s)?"):
                raise typer.Exit(int(ExitCode.FAILED))
            deleted = store.delete(ids)
        _echo(f"deleted {len(deleted)} episode(s)")

    @data.command("doctor")
    def doctor_cmd(
        data_dir: DataDir = None,
        rebuild: Annotated[bool, typer.Option("--rebuild", help="Rebuild even a healthy index.")] = False,
        as_json: AsJson = False,
    ) -> None:
        """Check the store's index; rebuild a corrupt one from the episode folders (the old
        file is kept beside it as index.sqlite3.corrupt-TIME)."""
        from dataclasses import asdict

        from agents.store.errors import CorruptIndex, StoreError
        from agents.store.journal import rebuild_index
        from agents.store.location import resolve_data_dir
        from agents.store.schema import INDEX_NAME
        from agents.store.store import Store

        root = resolve_data_dir(data_dir)
        if not (root / "episodes").is_dir() and not (root / INDEX_NAME).exists():
            raise StoreError(f"no store at {root}; pass --data-dir")
        problem = None
        try:
            with Store(root, create=False) as store:
                verdict = store.integrity_check()
                missing = store.unindexed_episodes() if verdict == "ok" else []
                if verdict != "ok":
                    problem = verdict
                elif missing:
                    problem = f"{len(missing)} episode folder(s) are missing from the index"
        except CorruptIndex as exc:  # any other store error (a newer schema...) is the user's
            problem = str(exc)
        if problem is None and not rebuild:
            out = {"index": str(root / INDEX_NAME), "healthy": True}
            _echo(json.dumps(out) if as_json else f"{out['index']}: healthy")
            return
        report = rebuild_index(root, root / INDEX_NAME)
        if as_json:
            _echo(json.dumps({**asdict(report), "problem": problem}))
            return
        aside = f"; the old index is kept as {report.set_aside}" if report.set_aside else ""
        skipped = f", {len(report.skipped)} folder(s) without episode.json skipped" if report.skipped else ""
        _echo(f"rebuilt {report.index}: {report.episodes} episode(s), {report.steps} step(s)"
                   f"{skipped}{aside}")
