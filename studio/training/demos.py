"""A fine-tune from the studio for a newcomer: this session's demonstrations as an SFT run.

`prepare_demo_run` exports the finished episodes (those this studio recorded, else every
finished human episode in the store) into `RUN/demos` and writes `RUN/sft-demos.yaml` from
the shipped studio config (the packaged base, `smollm2-135m-instruct`, built from its wheel in
the data dir on first use: nothing downloaded), pointed at them.
`error_line` finds the line of a failed run's output that says what went wrong.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

SHIPPED = Path(__file__).resolve().parents[2] / "assets" / "configs" / "sft-studio-demos.yaml"
_ERROR = re.compile(r"^(error: |Error: |[\w.]*(Error|Exception)\b: ?)")


class NoDemonstrations(ValueError):
    """Nothing recorded yet to learn from."""


def prepare_demo_run(store: Any, run_dir: Path, episode_ids: list[str] | None = None
                     ) -> tuple[Path, int]:
    """Export the demonstrations and write the SFT config; returns (config path, episodes)."""
    import yaml

    from agents.store import EpisodeFilter
    from agents.store.export import export_parquet

    if episode_ids:
        where = EpisodeFilter(ids=tuple(episode_ids), status="finished")
    else:
        where = EpisodeFilter(source="human", status="finished")
    episodes = store.list_episodes(where)
    if not episodes:
        raise NoDemonstrations(
            "No finished demonstrations yet: model by hand (or run the agent) and press Finish "
            "in the Task dock, then try again.")
    run_dir = Path(run_dir)
    shutil.rmtree(run_dir / "demos", ignore_errors=True)  # our own earlier export
    report = export_parquet(store, run_dir / "demos", where=EpisodeFilter(
        ids=tuple(e.id for e in episodes)))
    config = yaml.safe_load(SHIPPED.read_text())
    config["name"] = "sft-studio-demos"
    config["sft"]["data"] = [str((run_dir / "demos" / "episodes.parquet").resolve())]
    # A person's free-form episodes have no task verdict: learn from all of them.
    config["sft"]["filter"] = {"success_only": False}
    config.pop("tools", None)  # the rows carry the tools they were recorded with
    path = run_dir / "sft-demos.yaml"
    path.write_text("# written by the studio from " + SHIPPED.name + "\n"
                    + yaml.safe_dump(config, sort_keys=False))
    return path, report.episodes


def free_run_dir(parent: Path, name: str) -> Path:
    """`parent/name`, or `name-2`, `name-3`... when an earlier run holds checkpoints there."""
    candidate, n = Path(parent) / name, 1
    while candidate.exists() and any(candidate.glob("checkpoint-*")):
        n += 1
        candidate = Path(parent) / f"{name}-{n}"
    return candidate


def error_line(log: str) -> str:
    """The line of a failed run's output that names the error (an `error:` line or the
    exception at the end of a traceback), else its last line."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip() and not ln.startswith("$ ")]
    for line in reversed(lines):
        if _ERROR.match(line):
            return line[:500]
    return lines[-1][:500] if lines else "(the process printed nothing)"


def base_model(run_dir: Path) -> Path | None:
    """The model a finished run trained from: `RUN/base-model` (a tiny model built for it)
    or the `model.path` of the run's config (a folder, or a registered name such as the
    packaged base, which the Agent dock resolves in the studio's data dir)."""
    import yaml

    run_dir = Path(run_dir)
    if (run_dir / "base-model" / "config.json").is_file():
        return run_dir / "base-model"
    for name in ("config.yaml", "config.yml"):
        if (run_dir / name).is_file():
            spec = (yaml.safe_load((run_dir / name).read_text()) or {}).get("model") or {}
            if spec.get("path"):
                return Path(spec["path"])
    return None
