"""Upkeep of a store: marking the episodes of dead writers `interrupted` and clearing what
dead writers left half-done (temp files, a frame whose step never committed, a folder whose
episode never committed). Mixed into `Store`; every removal happens under the episode's lease.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from agents.store.atomic import TEMP_MARK, is_temp_name, sweep_temp_files
from agents.store.journal import EPISODE_FILE
from agents.store.layout import FRAMES
from agents.store.lease import holder_alive, try_take

# A hidden folder whose name carries no creator pid (made by an older version) is left alone
# this long after its last change: its lease may not be taken yet.
LEGACY_HIDDEN_GRACE_S = 60.0


def hidden_folder_name(episode_id: str, suffix: str = "") -> str:
    """The name a folder is built under before it is leased and renamed into place. It
    carries the creator's pid, so upkeep can tell "being set up" from "left by a dead
    writer" without a clock."""
    return f"{TEMP_MARK}{episode_id}.{os.getpid()}{suffix}"


def _creator_pid(name: str) -> int | None:
    """The pid in `.mwtmp-<episode id>.<pid>[.suffix]`, or None for an older name."""
    parts = name[len(TEMP_MARK):].split(".")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def _hidden_in_setup(path: Path, now: float) -> bool:
    """A hidden folder whose creator may still be about to lease it: its creator is alive
    (a recycled pid only delays the cleanup), or, for an old-style name, it is young."""
    pid = _creator_pid(path.name)
    if pid is not None:
        return _pid_alive(pid)
    try:
        return now - path.stat().st_mtime < LEGACY_HIDDEN_GRACE_S
    except FileNotFoundError:
        return True  # gone already: nothing to clear


class Upkeep:
    """Needs from its host: episodes_dir, episode_dir(), episode_ids(), index(), transaction()."""

    def reap(self) -> list[str]:
        """Mark episodes whose recording process died as `interrupted`, and clear what the
        dead writer left half-done (temp files, a frame whose step never committed)."""
        with self.index() as db:
            rows = db.execute(
                "SELECT id, writer FROM episodes WHERE status = 'running'"
            ).fetchall()
        reaped = []
        for row in rows:
            folder = self.episode_dir(row["id"])
            if holder_alive(folder, json.loads(row["writer"])):
                continue
            lease = try_take(folder)
            if lease is None:
                continue
            try:
                # Sweep first, mark second: a reaper killed in between leaves the episode
                # 'running' with a free lease, so the next reader redoes both.
                self._sweep_episode(row["id"])
                with self.transaction() as db:
                    changed = db.execute(
                        "UPDATE episodes SET status = 'interrupted' "
                        "WHERE id = ? AND status = 'running'",
                        (row["id"],),
                    ).rowcount
                if changed:
                    reaped.append(row["id"])
            finally:
                lease.release()
        return reaped

    def _sweep_episode(self, episode_id: str) -> None:
        folder = self.episode_dir(episode_id)
        sweep_temp_files(folder)
        with self.index() as db:
            known = {
                r[0]
                for r in db.execute(
                    "SELECT frame FROM steps WHERE episode_id = ? AND frame IS NOT NULL "
                    "UNION SELECT initial_frame FROM episodes WHERE id = ? "
                    "AND initial_frame IS NOT NULL",
                    (episode_id, episode_id),
                )
            }
        frames = folder / FRAMES
        if frames.is_dir():
            for path in frames.iterdir():
                if f"{FRAMES}/{path.name}" not in known:
                    path.unlink(missing_ok=True)  # complete, but its step never committed

    def orphan_folders(self, now: float | None = None) -> list[Path]:
        """Folders no episode row owns and no live writer holds: a writer killed before its
        episode's first commit, an import or delete killed half-way. Hidden folders still
        being set up (their creator alive, their lease maybe not taken yet) are left alone.
        `now` (a time.time() value) only matters for hidden folders of older versions."""
        now = time.time() if now is None else now
        candidates = [
            p for p in self.episodes_dir.iterdir()
            if p.is_dir() and not (is_temp_name(p.name) and _hidden_in_setup(p, now))
        ]  # listed before the ids are read: a folder listed here whose row commits later
        known = self.episode_ids()  # is still leased by its writer when holder_alive looks
        # A folder holding its own episode.json had a committed row once: with the row gone
        # (a lost or rebuilt index) it is an episode for `data doctor` to restore, never an
        # orphan to delete.
        return [p for p in candidates if p.name not in known and not holder_alive(p, {})
                and (is_temp_name(p.name) or not (p / EPISODE_FILE).exists())]

    def remove_orphan_folders(self) -> int:
        removed = 0
        for p in self.orphan_folders():
            lease = try_take(p) if p.exists() else None
            if lease is None:
                continue
            try:
                with self.index() as db:  # under the lease nobody writes it: still rowless?
                    owned = db.execute(
                        "SELECT 1 FROM episodes WHERE id = ?", (p.name,)).fetchone()
                if not owned:
                    shutil.rmtree(p, ignore_errors=True)
                    removed += 1
            finally:
                lease.release()
        return removed
