"""The trajectory store: an SQLite index of episodes and steps plus one folder per episode.

Layout of a data dir:
    index.sqlite3            episodes, steps, tool specs, schema version (WAL, synchronous=FULL)
    episodes/<id>/lease      held (flock) by the recording process while it lives
    episodes/<id>/frames/    initial.png, 000000.png, ... (one per step that has a frame)
    episodes/<id>/artifacts/ final .blend / .step / .glb and anything else `finish` was given
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from agents.store import journal
from agents.store.atomic import (
    atomic_write_bytes,
    fsync_dir,
)
from agents.store.errors import (
    AmbiguousEpisodeId,
    CorruptIndex,
    EpisodeBusy,
    EpisodeNotFound,
    StoreError,
    StoreLocked,
)
from agents.store.frames import check_png, read_frame, sha256
from agents.store.layout import FRAMES, dumps
from agents.store.lease import Lease, writer_identity
from agents.store.location import resolve_data_dir
from agents.store.models import EPISODE_ID, SOURCES, Episode, EpisodeFilter, Step
from agents.store.recorder import Recorder
from agents.store.schema import BUSY_TIMEOUT_MS, INDEX_NAME, connect, migrate
from agents.store.upkeep import Upkeep, hidden_folder_name

# SQLite's answers for "another connection holds a lock" (after the busy timeout), as opposed
# to a damaged file: BUSY, LOCKED, and PROTOCOL (a WAL-index lock that a stopped process holds).
LOCK_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_PROTOCOL)

EPISODES = "episodes"
STEP_COLUMNS = ("episode_id", "idx", "turn", "at", "tool", "args", "result", "result_text",
                "error_kind", "error_message", "duration_ms", "frame", "frame_sha256",
                "scene_hash", "model_message", "tokens_in", "tokens_out", "latency_ms",
                "token_ids", "logprobs", "actor")


@cache
def software_versions() -> dict[str, str]:
    """Versions recorded with every episode (read from package metadata: bpy is never imported)."""
    import platform
    from importlib import metadata

    out = {"python": platform.python_version()}
    for key, dist in (("app", "modelwright"), ("blender", "bpy"), ("cadquery", "cadquery")):
        try:
            out[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[key] = "unknown"
    return out


def tools_version(tools: list[dict] | None) -> tuple[str | None, str | None]:
    """(content hash, canonical JSON) of a tool catalogue, so identical specs are stored once."""
    if tools is None:
        return None, None
    text = json.dumps(tools, sort_keys=True, separators=(",", ":"), default=str)
    return sha256(text.encode())[:16], text


def parse_task_id(task_id: str | None) -> tuple[str | None, int | None, int | None]:
    """`family:level:seed` (and `family:level:seed:PHRASING`, a wording of that task:
    `seen`, `unseen`, `wN`) → (family, level, seed); other ids keep their first field as family."""
    if not task_id:
        return None, None, None
    parts = task_id.split(":")
    if len(parts) == 4 and re.fullmatch(r"seen|unseen|w\d+", parts[3]):
        parts = parts[:3]
    if len(parts) == 3 and parts[1].lstrip("-").isdigit() and parts[2].lstrip("-").isdigit():
        return parts[0], int(parts[1]), int(parts[2])
    return parts[0], None, None


def _code(exc: sqlite3.DatabaseError) -> int:
    """SQLite's primary result code of `exc` (0 when it carries none)."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF


def new_episode_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(4)


class Store(Upkeep):
    """One data dir. Safe to share between threads; several processes may write at once."""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, create: bool = True,
                 durable: bool = True, busy_timeout_s: float = BUSY_TIMEOUT_MS / 1000):
        """`durable=False` (e.g. for RL rollouts) skips the fsyncs: still safe against a
        killed process, not against power loss. A lock another process holds on the index is
        waited for up to `busy_timeout_s`, then StoreLocked says so in one line."""
        self.durable = durable
        self.busy_timeout_s = busy_timeout_s
        self.data_dir = resolve_data_dir(data_dir)
        self.index_path = self.data_dir / INDEX_NAME
        self.episodes_dir = self.data_dir / EPISODES
        if not create and not self.index_path.exists():
            raise StoreError(
                f"no store at {self.data_dir} (nothing recorded there yet); pass --data-dir "
                f"or set MODELWRIGHT_DATA_DIR to the store you mean"
            )
        try:
            self.episodes_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the store at {self.data_dir}: {exc.strerror}") from exc
        self._lock = threading.RLock()
        try:
            self._conn = connect(self.index_path, durable, int(busy_timeout_s * 1000))
            migrate(self._conn)
        except sqlite3.DatabaseError as exc:
            raise (self._locked(exc) if _code(exc) in LOCK_CODES else self._corrupt(exc)) from None
        if create:
            self.remove_orphan_folders()

    # ---- lifecycle -------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _locked(self, exc: sqlite3.DatabaseError) -> StoreLocked:
        return StoreLocked(
            f"the store index {self.index_path} stayed locked by another process for more "
            f"than {self.busy_timeout_s:g} s ({exc}); nothing was written: try again when "
            f"that process has finished or stopped"
        )

    def _corrupt(self, exc: sqlite3.DatabaseError) -> CorruptIndex:
        return CorruptIndex(
            f"the store index {self.index_path} is corrupt ({exc}); run `modelwright data "
            f"doctor --data-dir {self.data_dir}` to rebuild it from the episode folders"
        )

    @contextmanager
    def index(self) -> Iterator[sqlite3.Connection]:
        """The index's connection under the store's lock (for reads; writes use
        `transaction`). A damaged page found on the way, after the store opened, raises
        CorruptIndex: every command says the same one line, with how to rebuild."""
        with self._lock:
            try:
                yield self._conn
            except sqlite3.DatabaseError as exc:
                if _code(exc) in LOCK_CODES:
                    raise self._locked(exc) from None
                if _code(exc) not in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
                    raise  # a constraint: not the file's fault
                raise self._corrupt(exc) from None

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taking SQLite's write lock up front (no upgrade deadlocks)."""
        with self.index() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def episode_dir(self, episode_id: str) -> Path:
        """The episode's folder; an id that is not an episode id (`../x`: a corrupt or
        hostile index) is refused, so no path built from it leaves the store."""
        if not isinstance(episode_id, str) or not EPISODE_ID.match(episode_id):
            raise StoreError(f"{str(episode_id)[:80]!r} is not a valid episode id; the index "
                             "may be corrupt (`modelwright data doctor` rebuilds it)")
        return self.episodes_dir / episode_id

    # ---- recording -------------------------------------------------------------------
    def begin_episode(
        self,
        task_id: str | None = None,
        task_params: dict[str, Any] | None = None,
        source: str = "agent",
        policy: str | None = None,
        model: str | None = None,
        adapter: str | None = None,
        tools: list[dict] | None = None,
        system: str | None = None,
        prompt: str | None = None,
        initial_frame: bytes | None = None,
        tags: Iterable[str] = (),
        notes: str = "",
        setup: list[dict[str, Any]] | None = None,
        initial_scene_hash: str | None = None,
        episode_id: str | None = None,
    ) -> Recorder:
        """Start recording. `setup` lists the calls ({"tool", "args"}) that built the start
        state (a task's setup) so `replay` can rebuild it; `initial_scene_hash` is the hash
        after them. `episode_id`: an id fixed before the episode ran (`new_episode_id()`, by a
        scheduler's head, so that a retried episode keeps it); an id already in the store is
        refused (`agents.store.buffer.commit` is the idempotent path)."""
        if source not in SOURCES:
            raise StoreError(f"source must be one of {', '.join(SOURCES)}, not {source!r}")
        if initial_frame is not None:
            check_png(initial_frame, "initial frame")
        versions = software_versions()  # before anything touches the disk (first call ~50 ms)
        episode_id = new_episode_id() if episode_id is None else episode_id
        folder = self.episode_dir(episode_id)
        if folder.exists():
            raise StoreError(f"episode {episode_id} is already in the store")
        # The folder gets its real name only once its lease is held, so a folder under an
        # episode id always has a live writer or a dead one (never one not yet locked), and
        # the lease is held before the row exists: a visible 'running' row is live.
        hidden = self.episodes_dir / hidden_folder_name(episode_id)
        (hidden / FRAMES).mkdir(parents=True)
        lease = Lease(hidden)
        os.rename(hidden, folder)
        lease.path = folder / lease.path.name
        if self.durable:
            fsync_dir(self.episodes_dir)
        try:
            frame_rel = frame_sha = None
            if initial_frame is not None:
                frame_rel, frame_sha = f"{FRAMES}/initial.png", sha256(initial_frame)
                atomic_write_bytes(folder / frame_rel, initial_frame, durable=self.durable)
            family, level, seed = parse_task_id(task_id)
            version, specs = tools_version(tools)
            with self.transaction() as db:
                if version is not None:
                    db.execute("INSERT OR IGNORE INTO tool_specs VALUES (?, ?)", (version, specs))
                db.execute(
                    """INSERT INTO episodes (id, created_at, status, task_id, task_family,
                    task_level, task_seed, task_params, source, policy, model, adapter,
                    tools_version, system, prompt, initial_frame, initial_frame_sha256, setup,
                    initial_scene_hash, versions, tags, notes, writer)
                    VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
                    ?, ?, ?)""",
                    (
                        episode_id,
                        time.time(),
                        task_id,
                        family,
                        level,
                        seed,
                        None if task_params is None else dumps(task_params),
                        source,
                        policy,
                        model,
                        adapter,
                        version,
                        system,
                        prompt,
                        frame_rel,
                        frame_sha,
                        dumps(list(setup or [])),
                        initial_scene_hash,
                        dumps(versions),
                        dumps(list(tags)),
                        notes,
                        dumps(writer_identity()),
                    ),
                )
                if version is not None:
                    journal.write_specs(self.data_dir, version, specs, self.durable)
                # In the transaction: a writer killed while writing the copy leaves its temp
                # file in a 'running' episode, which the reaper sweeps.
                self.journal_episode(db, episode_id)
        except BaseException:
            lease.release()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return Recorder(self, episode_id, folder, lease, actor="human" if source == "human" else "agent")

    def journal_episode(self, db: Any, episode_id: str) -> None:
        """Write the episode's row, as `db` sees it now, into its folder (episode.json)."""
        row = db.execute("SELECT * FROM episodes WHERE id = ?", (episode_id,)).fetchone()
        journal.write_episode(self.episode_dir(episode_id), row, self.durable)

    def commit_step(self, step: Step) -> None:
        """Append one step to its open episode (the Recorder's write path)."""
        with self.transaction() as db:
            db.execute(
                f"""INSERT INTO steps ({', '.join(STEP_COLUMNS)})
                VALUES ({', '.join('?' * len(STEP_COLUMNS))})""",
                values := (
                    step.episode_id,
                    step.index,
                    step.turn,
                    step.at,
                    step.tool,
                    dumps(step.args),
                    None if step.result is None else dumps(step.result),
                    step.result_text,
                    step.error_kind,
                    step.error_message,
                    step.duration_ms,
                    step.frame,
                    step.frame_sha256,
                    step.scene_hash,
                    step.model_message,
                    step.tokens_in,
                    step.tokens_out,
                    step.latency_ms,
                    None if step.token_ids is None else dumps(step.token_ids),
                    None if step.logprobs is None else dumps(step.logprobs),
                    step.actor,
                ),
            )
            db.execute(
                """UPDATE episodes SET n_steps = n_steps + 1, n_errors = n_errors + ?,
                tool_ms = tool_ms + ?, latency_ms = latency_ms + ?, tokens_in = tokens_in + ?,
                tokens_out = tokens_out + ? WHERE id = ?""",
                (
                    int(step.error_kind is not None),
                    step.duration_ms,
                    step.latency_ms,
                    step.tokens_in,
                    step.tokens_out,
                    step.episode_id,
                ),
            )
        journal.append_step(self.episode_dir(step.episode_id), STEP_COLUMNS, values)

    def close_episode(
        self,
        episode_id: str,
        status: str,
        *,
        reward: float | None = None,
        components: dict[str, float] | None = None,
        success: bool | None = None,
        artifacts: list[str] | None = None,
        final_message: str | None = None,
        note: str = "",
    ) -> None:
        """Close an open episode with its status and outcome (the Recorder's close path)."""
        with self.transaction() as db:
            db.execute(
                """UPDATE episodes SET status = ?, finished_at = ?, reward = ?, components = ?,
                success = ?, artifacts = ?, final_message = ?,
                notes = CASE WHEN ? = '' THEN notes WHEN notes = '' THEN ?
                             ELSE notes || char(10) || ? END
                WHERE id = ?""",
                (
                    status,
                    time.time(),
                    reward,
                    None if components is None else dumps(components),
                    None if success is None else int(success),
                    dumps(artifacts or []),
                    final_message,
                    note,
                    note,
                    note,
                    episode_id,
                ),
            )
            self.journal_episode(db, episode_id)

    # ---- reading ---------------------------------------------------------------------
    def resolve(self, episode_id: str) -> str:
        """The full id for an id or a unique prefix of one."""
        with self.index() as db:
            rows = db.execute(
                "SELECT id FROM episodes WHERE id = ? OR id LIKE ? ESCAPE '\\' LIMIT 2",
                (
                    episode_id,
                    episode_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",
                ),
            ).fetchall()
        ids = [r[0] for r in rows]
        if episode_id in ids:
            return episode_id
        if not ids or not episode_id:
            raise EpisodeNotFound(
                f"no episode {episode_id!r} in {self.data_dir}; `modelwright data list` shows ids"
            )
        if len(ids) > 1:
            raise AmbiguousEpisodeId(
                f"{episode_id!r} matches several episodes; give more of the id"
            )
        return ids[0]

    def episode(self, episode_id: str) -> Episode:
        self.reap()
        return self._read_episode(self.resolve(episode_id))

    def _read_episode(self, full: str) -> Episode:
        with self.index() as db:
            row = db.execute("SELECT * FROM episodes WHERE id = ?", (full,)).fetchone()
        return Episode.from_row(row)

    def episode_ids(self) -> set[str]:
        """The full id of every episode in the index."""
        with self.index() as db:
            return {r[0] for r in db.execute("SELECT id FROM episodes")}

    def list_episodes(self, where: EpisodeFilter | None = None) -> list[Episode]:
        self.reap()
        clause, params = (where or EpisodeFilter()).where()
        sql = f"SELECT * FROM episodes{clause} ORDER BY created_at, id"
        if where is not None and where.limit is not None:
            sql += f" LIMIT {int(where.limit)}"
        with self.index() as db:
            return [Episode.from_row(r) for r in db.execute(sql, params)]

    def steps(self, episode_id: str) -> list[Step]:
        full = self.resolve(episode_id)
        with self.index() as db:
            rows = db.execute(
                "SELECT * FROM steps WHERE episode_id = ? ORDER BY idx", (full,)
            ).fetchall()
        return [Step.from_row(r) for r in rows]

    def frame(self, episode_id: str, relpath: str, sha: str | None) -> bytes:
        """A stored frame, verified against the checksum recorded with it."""
        return read_frame(self.episode_dir(episode_id) / relpath, sha, f"episode {episode_id}")

    def step_frame(self, step: Step) -> bytes | None:
        if step.frame is None:
            return None
        return read_frame(
            self.episode_dir(step.episode_id) / step.frame,
            step.frame_sha256,
            f"episode {step.episode_id} step {step.index}",
        )

    def initial_frame(self, episode: Episode) -> bytes | None:
        if episode.initial_frame is None:
            return None
        return self.frame(episode.id, episode.initial_frame, episode.initial_frame_sha256)

    def tool_specs(self, version: str | None) -> list[dict] | None:
        if version is None:
            return None
        with self.index() as db:
            row = db.execute(
                "SELECT specs FROM tool_specs WHERE version = ?", (version,)
            ).fetchone()
        return None if row is None else json.loads(row[0])

    def integrity_check(self) -> str:
        with self.index() as db:
            return db.execute("PRAGMA integrity_check").fetchone()[0]

    def unindexed_episodes(self) -> list[str]:
        """Episode folders that hold their own episode.json but have no row in the index (a
        lost or replaced index): `data doctor` brings them back."""
        from agents.store.atomic import is_temp_name
        from agents.store.journal import EPISODE_FILE

        known = self.episode_ids()
        return sorted(p.name for p in self.episodes_dir.iterdir()
                      if p.is_dir() and not is_temp_name(p.name) and p.name not in known
                      and (p / EPISODE_FILE).is_file())

    # ---- deleting --------------------------------------------------------------------
    def delete(self, episode_ids: Iterable[str]) -> list[str]:
        """Delete episodes (rows, frames, artifacts). All ids are resolved first: an unknown
        or live one raises before anything is removed."""
        self.reap()
        full = [self.resolve(e) for e in episode_ids]
        for eid in full:
            ep = self.episode(eid)
            if ep.status == "running":
                raise EpisodeBusy(
                    f"episode {eid} is still being recorded (pid "
                    f"{ep.writer.get('pid')}); stop it first"
                )
        for eid in full:
            with self.transaction() as db:
                db.execute("DELETE FROM steps WHERE episode_id = ?", (eid,))
                db.execute("DELETE FROM episodes WHERE id = ?", (eid,))
            shutil.rmtree(self.episode_dir(eid), ignore_errors=True)
        return full
