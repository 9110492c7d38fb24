"""A copy of each episode's rows in its own folder, so a lost or corrupt index can be rebuilt.

`<episode>/episode.json` holds the episode row (rewritten atomically when it begins and when
it closes), `<episode>/steps.jsonl` one line per committed step (appended after the step's
row commits; a line torn by a crash is skipped on rebuild), and `<data dir>/tool_specs/` one
file per tool catalogue version. `rebuild_index` (`modelwright data doctor`) sets a corrupt
`index.sqlite3` aside and builds a new one from these files.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.store.atomic import atomic_write_bytes
from agents.store.errors import StoreError
from agents.store.models import EPISODE_ID, TOOLS_VERSION

EPISODE_FILE = "episode.json"
STEPS_FILE = "steps.jsonl"
SPECS_DIR = "tool_specs"
COUNTERS = ("n_steps", "n_errors", "tool_ms", "latency_ms", "tokens_in", "tokens_out")


def write_episode(folder: Path, row: sqlite3.Row, durable: bool) -> None:
    data = json.dumps(dict(zip(row.keys(), tuple(row), strict=True)), separators=(",", ":"))
    atomic_write_bytes(folder / EPISODE_FILE, data.encode(), durable=durable)


def append_step(folder: Path, columns: tuple[str, ...], values: tuple) -> None:
    line = json.dumps(dict(zip(columns, values, strict=True)), separators=(",", ":")) + "\n"
    fd = os.open(folder / STEPS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def drop_step(folder: Path, index: int) -> None:
    """A tombstone: the step a person dropped before Finish stays out of a rebuilt index."""
    append_step(folder, ("idx", "dropped"), (int(index), True))


def write_specs(data_dir: Path, version: str, text: str, durable: bool) -> None:
    if not isinstance(version, str) or not TOOLS_VERSION.match(version):
        raise StoreError(f"tools version {str(version)[:80]!r} is not a plain name; not written")
    path = data_dir / SPECS_DIR / f"{version}.json"
    if not path.exists():
        path.parent.mkdir(exist_ok=True)
        atomic_write_bytes(path, text.encode(), durable=durable)


@dataclass
class RebuildReport:
    index: str
    set_aside: str | None
    episodes: int = 0
    steps: int = 0
    skipped: list[str] = field(default_factory=list)  # folders without a readable episode.json


def _steps(folder: Path) -> list[dict[str, Any]]:
    try:
        lines = (folder / STEPS_FILE).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    by_index: dict[int, dict] = {}
    for line in lines:
        try:
            st = json.loads(line)
            if st.get("dropped") is True:
                by_index.pop(int(st["idx"]), None)
                continue
            by_index[int(st["idx"])] = st
        except (ValueError, KeyError, TypeError):
            continue  # a line torn by a crash
    return [by_index[i] for i in sorted(by_index)]


def _aside_name(index_path: Path, stamp: str) -> str:
    """A name no earlier set-aside holds: two rebuilds in one second keep both old files."""
    name, n = f"{index_path}.corrupt-{stamp}", 1
    while any(Path(f"{name}{suffix}").exists() for suffix in ("", "-wal", "-shm")):
        n += 1
        name = f"{index_path}.corrupt-{stamp}-{n}"
    return name


def rebuild_index(data_dir: Path, index_path: Path, stamp: str | None = None) -> RebuildReport:
    """Set the index aside (if any) and build a new one from the episode folders. `stamp`
    (default: the local time, YYYYmmdd-HHMMSS) names the set-aside file."""
    from agents.store.schema import connect, migrate

    set_aside = None
    if index_path.exists():
        set_aside = _aside_name(index_path, stamp or time.strftime("%Y%m%d-%H%M%S"))
        for suffix in ("", "-wal", "-shm"):
            if Path(f"{index_path}{suffix}").exists():
                os.replace(f"{index_path}{suffix}", f"{set_aside}{suffix}")
    tmp = index_path.with_name(index_path.name + ".rebuild")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{tmp}{suffix}").unlink(missing_ok=True)
    report = RebuildReport(str(index_path), set_aside)
    conn = connect(tmp)
    try:
        migrate(conn)
        ep_cols = [r[1] for r in conn.execute("PRAGMA table_info(episodes)")]
        st_cols = [r[1] for r in conn.execute("PRAGMA table_info(steps)")]
        conn.execute("BEGIN IMMEDIATE")
        for spec in sorted((data_dir / SPECS_DIR).glob("*.json")):
            conn.execute("INSERT OR IGNORE INTO tool_specs VALUES (?, ?)",
                         (spec.stem, spec.read_text(encoding="utf-8")))
        episodes = data_dir / "episodes"
        for folder in sorted(episodes.iterdir()) if episodes.is_dir() else []:
            if not EPISODE_ID.match(folder.name) or folder.is_symlink() or not folder.is_dir():
                continue
            try:
                ep = json.loads((folder / EPISODE_FILE).read_text(encoding="utf-8"))
                if ep.get("id") != folder.name:
                    raise ValueError("id does not match the folder")
            except (OSError, ValueError, AttributeError):
                report.skipped.append(folder.name)
                continue
            steps = _steps(folder)
            ep.update(n_steps=len(steps), n_errors=sum(s.get("error_kind") is not None for s in steps),
                      tool_ms=sum(s.get("duration_ms") or 0.0 for s in steps),
                      latency_ms=sum(s.get("latency_ms") or 0.0 for s in steps),
                      tokens_in=sum(s.get("tokens_in") or 0 for s in steps),
                      tokens_out=sum(s.get("tokens_out") or 0 for s in steps))
            if ep.get("status") == "running":
                ep["status"] = "interrupted"  # its writer is gone with the old index
            if ep.get("tools_version") is not None and conn.execute(
                    "SELECT 1 FROM tool_specs WHERE version = ?", (ep["tools_version"],)).fetchone() is None:
                ep["tools_version"] = None
            cols = [c for c in ep_cols if c in ep]
            conn.execute(f"INSERT INTO episodes ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                         [ep[c] for c in cols])
            for st in steps:
                cols = [c for c in st_cols if c in st]
                conn.execute(f"INSERT INTO steps ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                             [st[c] for c in cols])
            report.episodes += 1
            report.steps += len(steps)
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    os.replace(tmp, index_path)
    for suffix in ("-wal", "-shm"):
        Path(f"{tmp}{suffix}").unlink(missing_ok=True)
    return report
