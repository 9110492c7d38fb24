"""The SQLite index: connection settings, schema version table and migrations.

The index lives in `<data dir>/index.sqlite3` in WAL mode with `synchronous=FULL`, so a
committed transaction survives a kill -9 or a power cut. Every schema change is a new
entry in MIGRATIONS; a store opened by an older Modelwright than the one that wrote it is
refused rather than misread.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from agents.store.errors import SchemaTooNew, StoreError

INDEX_NAME = "index.sqlite3"
BUSY_TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "episodes, steps and tool specs",
        (
            """CREATE TABLE tool_specs (
                version TEXT PRIMARY KEY,
                specs TEXT NOT NULL
            )""",
            """CREATE TABLE episodes (
                id TEXT PRIMARY KEY,
                created_at REAL NOT NULL,
                finished_at REAL,
                status TEXT NOT NULL CHECK (status IN ('running', 'finished', 'interrupted')),
                task_id TEXT,
                task_family TEXT,
                task_level INTEGER,
                task_seed INTEGER,
                task_params TEXT,
                source TEXT NOT NULL,
                policy TEXT,
                model TEXT,
                adapter TEXT,
                tools_version TEXT REFERENCES tool_specs(version),
                system TEXT,
                prompt TEXT,
                initial_frame TEXT,
                initial_frame_sha256 TEXT,
                setup TEXT NOT NULL DEFAULT '[]',
                initial_scene_hash TEXT,
                final_message TEXT,
                reward REAL,
                components TEXT,
                success INTEGER,
                n_steps INTEGER NOT NULL DEFAULT 0,
                n_errors INTEGER NOT NULL DEFAULT 0,
                tool_ms REAL NOT NULL DEFAULT 0,
                latency_ms REAL NOT NULL DEFAULT 0,
                tokens_in INTEGER NOT NULL DEFAULT 0,
                tokens_out INTEGER NOT NULL DEFAULT 0,
                versions TEXT NOT NULL DEFAULT '{}',
                tags TEXT NOT NULL DEFAULT '[]',
                notes TEXT NOT NULL DEFAULT '',
                artifacts TEXT NOT NULL DEFAULT '[]',
                writer TEXT NOT NULL DEFAULT '{}'
            )""",
            "CREATE INDEX episodes_created ON episodes (created_at)",
            "CREATE INDEX episodes_status ON episodes (status)",
            "CREATE INDEX episodes_family ON episodes (task_family)",
            """CREATE TABLE steps (
                episode_id TEXT NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
                idx INTEGER NOT NULL,
                turn INTEGER NOT NULL,
                at REAL NOT NULL,
                tool TEXT NOT NULL,
                args TEXT NOT NULL,
                result TEXT,
                result_text TEXT,
                error_kind TEXT,
                error_message TEXT,
                duration_ms REAL NOT NULL DEFAULT 0,
                frame TEXT,
                frame_sha256 TEXT,
                scene_hash TEXT,
                model_message TEXT,
                tokens_in INTEGER NOT NULL DEFAULT 0,
                tokens_out INTEGER NOT NULL DEFAULT 0,
                latency_ms REAL NOT NULL DEFAULT 0,
                token_ids TEXT,
                logprobs TEXT,
                PRIMARY KEY (episode_id, idx)
            )""",
        ),
    ),
    Migration(
        2,
        "who made each step: a person (human) or a policy (agent)",
        (
            "ALTER TABLE steps ADD COLUMN actor TEXT NOT NULL DEFAULT 'agent'",
            "UPDATE steps SET actor = 'human' WHERE episode_id IN "
            "(SELECT id FROM episodes WHERE source = 'human')",
        ),
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version


def connect(path: Path, durable: bool = True,
            busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    """Open the index in WAL mode; `durable`: synchronous=FULL (a commit survives power loss),
    else NORMAL (a commit survives the process being killed, not the machine losing power).
    A lock another process holds is waited for up to `busy_timeout_ms`."""
    try:
        conn = sqlite3.connect(
            path, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
        )
    except sqlite3.OperationalError as exc:
        raise StoreError(f"cannot open the store index {path}: {exc}") from exc
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if mode.lower() != "wal":
        raise StoreError(f"the store index {path} could not switch to WAL mode (got {mode!r})")
    conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def current_version(conn: sqlite3.Connection) -> int:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if not exists:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0] or 0)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema to LATEST_VERSION; safe when several processes open a new store at once."""
    if current_version(conn) == LATEST_VERSION:
        return LATEST_VERSION
    # BEGIN IMMEDIATE takes the write lock first, so two processes cannot both apply v1.
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_version (
                version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at REAL NOT NULL)"""
        )
        version = current_version(conn)
        if version > LATEST_VERSION:
            raise SchemaTooNew(
                f"this store has schema version {version}, newer than this Modelwright knows "
                f"({LATEST_VERSION}); upgrade Modelwright or use another --data-dir"
            )
        for m in MIGRATIONS:
            if m.version <= version:
                continue
            for sql in m.statements:
                conn.execute(sql)
            conn.execute(
                "INSERT INTO schema_version (version, description, applied_at) VALUES (?, ?, ?)",
                (m.version, m.description, time.time()),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return LATEST_VERSION
