"""Import episodes into a store from another store's data dir or from a `data export` folder.

Episodes keep their ids; one already present is skipped (so importing twice is harmless).
For each episode the files are written first (atomically) and the rows committed last, so
an import killed half-way leaves only whole episodes. Exports carry no artifacts, so
episodes imported from an export have none.

The source is anyone's folder (a download, another user's store), so every file read from
it is reached one component at a time from the source's folder descriptor without
following a link, and only once it is proven a regular file (tools.trust.confined): a symlinked
`artifacts/` or `episodes/`, a FIFO in place of a frame, a device, are refused, never read
or waited on. Every name it gives (episode id, frame path, artifact, tools version) is held
to the shape the store itself writes before it becomes a path.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.store import journal
from agents.store.atomic import TEMP_MARK, atomic_write_bytes, atomic_write_stream, fsync_dir
from agents.store.errors import CorruptFrame, ImportSourceError, StoreError
from agents.store.export import EXPORT_FORMAT
from agents.store.frames import check_png, sha256
from agents.store.layout import ARTIFACTS, FRAMES, dumps
from agents.store.lease import Lease, holder_alive
from agents.store.models import EPISODE_ID, TOOLS_VERSION
from agents.store.schema import INDEX_NAME
from agents.store.store import EPISODES, STEP_COLUMNS, tools_version
from tools.trust import confined
from tools.trust.images import MAX_PNG_BYTES

if TYPE_CHECKING:
    from agents.store.store import Store


@dataclass
class ImportReport:
    source: str
    kind: str  # "store" or "export"
    imported: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already present, or still recording


EPISODE_COLUMNS = (
    "id",
    "created_at",
    "finished_at",
    "status",
    "task_id",
    "task_family",
    "task_level",
    "task_seed",
    "task_params",
    "source",
    "policy",
    "model",
    "adapter",
    "tools_version",
    "system",
    "prompt",
    "initial_frame",
    "initial_frame_sha256",
    "setup",
    "initial_scene_hash",
    "final_message",
    "reward",
    "components",
    "success",
    "n_steps",
    "n_errors",
    "tool_ms",
    "latency_ms",
    "tokens_in",
    "tokens_out",
    "versions",
    "tags",
    "notes",
    "artifacts",
    "writer",
)
JSON_COLUMNS = {"task_params", "components", "setup", "versions", "tags", "artifacts", "writer"}
NULLABLE_JSON = {"task_params", "components"}


def _episode_values(ep: dict[str, Any]) -> tuple:
    out = []
    for c in EPISODE_COLUMNS:
        v = ep[c]
        if c in JSON_COLUMNS:
            v = None if (v is None and c in NULLABLE_JSON) else dumps(v)
        elif c == "success" and v is not None:
            v = int(v)
        out.append(v)
    return tuple(out)


def _step_values(st: dict[str, Any]) -> tuple:
    return (
        st["episode_id"],
        st["index"],
        st["turn"],
        st["at"],
        st["tool"],
        dumps(st["args"]),
        None if st["result"] is None else dumps(st["result"]),
        st["result_text"],
        st["error_kind"],
        st["error_message"],
        st["duration_ms"],
        st["frame"],
        st["frame_sha256"],
        st["scene_hash"],
        st["model_message"],
        st["tokens_in"],
        st["tokens_out"],
        st["latency_ms"],
        None if st["token_ids"] is None else dumps(st["token_ids"]),
        None if st["logprobs"] is None else dumps(st["logprobs"]),
        st.get("actor", "agent"),
    )


def _commit(store: Store, ep: dict, steps: list[dict], specs: list[dict] | None) -> None:
    _version, text = tools_version(specs)
    with store.transaction() as db:
        if ep["tools_version"] is not None and text is not None:
            db.execute(
                "INSERT OR IGNORE INTO tool_specs VALUES (?, ?)", (ep["tools_version"], text)
            )
        elif ep["tools_version"] is not None:
            ep = {**ep, "tools_version": None}
        db.execute(
            f"INSERT INTO episodes ({', '.join(EPISODE_COLUMNS)}) VALUES "
            f"({', '.join('?' * len(EPISODE_COLUMNS))})",
            _episode_values(ep),
        )
        db.executemany(
            f"INSERT INTO steps ({', '.join(STEP_COLUMNS)}) VALUES "
            f"({', '.join('?' * len(STEP_COLUMNS))})",
            [_step_values(s) for s in steps],
        )
    # The folder's own copy of the rows (what `data doctor` rebuilds an index from).
    if ep["tools_version"] is not None and text is not None:
        journal.write_specs(store.data_dir, ep["tools_version"], text, store.durable)
    with store.transaction() as db:
        store.journal_episode(db, ep["id"])
    folder = store.episode_dir(ep["id"])
    for st in steps:
        journal.append_step(folder, STEP_COLUMNS, _step_values(st))


class _Staging:
    """An imported episode's folder, built hidden under a held lease (so no reader takes it
    for an orphan), renamed into place, then committed: rows never point at missing files."""

    def __init__(self, store: Store, episode_id: str):
        self.final = store.episode_dir(episode_id)
        self.path = store.episodes_dir / f"{TEMP_MARK}{episode_id}.{os.getpid()}.import"
        self._episodes_dir = store.episodes_dir
        self._lease: Lease | None = None

    def __enter__(self) -> _Staging:
        shutil.rmtree(self.path, ignore_errors=True)  # our own leftover from a killed import
        (self.path / FRAMES).mkdir(parents=True)
        self._lease = Lease(self.path)
        return self

    def __truediv__(self, rel: str) -> Path:
        return self.path / rel

    def publish(self, commit: Callable[[], None]) -> None:
        if self.final.exists():
            if holder_alive(self.final, {}):
                raise StoreError(f"{self.final} is being written by another process")
            shutil.rmtree(self.final)  # a folder no row owns: a dead writer's orphan
        os.rename(self.path, self.final)
        self.path = self.final
        fsync_dir(self._episodes_dir)
        commit()

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._lease is not None:
            self._lease.release()
        if exc is not None:
            shutil.rmtree(self.path, ignore_errors=True)


# What an imported store or export may name, checked before anything touches the disk: an
# id of `../../x` must not become a folder outside the store, nor a frame path a file there.
FRAME_PATH = re.compile(rf"^{FRAMES}/(initial|[0-9]{{6}})\.png$")
ARTIFACT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")


def _check_episode(ep: dict, steps: list[dict]) -> None:
    """ImportSourceError unless every id, frame path and artifact name is one the store
    itself would have written (all inside the episode's own folder)."""
    eid = ep.get("id")
    if not isinstance(eid, str) or not EPISODE_ID.match(eid):
        raise ImportSourceError(f"episode id {str(eid)[:80]!r} is not a Modelwright episode id; "
                                "nothing was imported from it")
    frames = [ep.get("initial_frame")] + [s.get("frame") for s in steps]
    for rel in frames:
        if rel is not None and (not isinstance(rel, str) or not FRAME_PATH.match(rel)):
            raise ImportSourceError(f"episode {eid}: frame path {str(rel)[:80]!r} is not inside "
                                    "its folder; nothing was imported from it")
    for name in ep.get("artifacts") or []:
        if not isinstance(name, str) or not ARTIFACT_NAME.match(name):
            raise ImportSourceError(f"episode {eid}: artifact name {str(name)[:80]!r} is not a "
                                    "plain file name; nothing was imported from it")
    version = ep.get("tools_version")
    if version is not None and not (isinstance(version, str) and TOOLS_VERSION.match(version)):
        raise ImportSourceError(f"episode {eid}: tools version {str(version)[:80]!r} is not a "
                                "plain name; nothing was imported from it")
    for st in steps:
        if st.get("episode_id", eid) != eid:
            raise ImportSourceError(f"episode {eid}: a step claims episode {str(st['episode_id'])[:80]!r}")
        index = st.get("index", 0)
        if type(index) is not int or not 0 <= index < 1_000_000:
            raise ImportSourceError(f"episode {eid}: step index {str(index)[:40]!r} is not a step number")


SIDE_FILES = ("-wal", "-shm", "-journal")  # SQLite opens these beside its index


def _source_file(root: str, rel: str, max_bytes: int, what: str) -> bytes:
    """A regular file inside the source, read without following any link."""
    try:
        return confined.read_file(root, rel, max_bytes)
    except confined.ConfinedPathError as exc:
        raise ImportSourceError(f"{what}: {exc.message} (in {root}); nothing more was imported") from None


def _source_frame(root: str, episode_id: str, rel: str, sha: str | None, what: str) -> bytes:
    data = _source_file(root, f"{EPISODES}/{episode_id}/{rel}", MAX_PNG_BYTES, what)
    if sha is not None and sha256(data) != sha:
        raise CorruptFrame(f"{what}: frame {rel} does not match the checksum recorded with it")
    check_png(data, f"{what}: frame {rel}")
    return data


def _copy_source_file(root: str, rel: str, final: Path, what: str) -> None:
    try:
        with confined.open_file(root, rel) as src:
            atomic_write_stream(final, src)
    except confined.ConfinedPathError as exc:
        raise ImportSourceError(f"{what}: {exc.message} (in {root}); nothing more was imported") from None


def _check_store_files(root: str) -> None:
    """The index SQLite opens (and the files it opens beside it) are regular files inside
    the source, not links to someone else's."""
    if not confined.is_file(root, INDEX_NAME):
        raise ImportSourceError(f"{root}/{INDEX_NAME} is not a regular file (a link?); not imported")
    for suffix in SIDE_FILES:
        name = INDEX_NAME + suffix
        if os.path.lexists(os.path.join(root, name)) and not confined.is_file(root, name):
            raise ImportSourceError(f"{root}/{name} is not a regular file (a link?); not imported")




def import_into(store: Store, source: Path) -> ImportReport:
    source = Path(os.path.realpath(source))  # the user's own path; inside it, no link is followed
    if os.path.lexists(source / INDEX_NAME):
        return _from_store(store, source)
    manifest = source / "manifest.json"
    if os.path.lexists(manifest):
        try:
            listed = json.loads(_source_file(str(source), "manifest.json", 64 << 20, "the export"))
        except ValueError as exc:  # a user's file: one line, not a traceback
            raise ImportSourceError(f"{manifest} is not valid JSON ({exc}); re-export with "
                                    "`modelwright data export --out DIR`") from None
        try:
            return _from_export(store, source, listed)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a field of the wrong shape
            raise ImportSourceError(f"{source} is a malformed export ({type(exc).__name__}: "
                                    f"{str(exc)[:200]}); nothing more was imported") from None
    raise ImportSourceError(
        f"{source} is neither a store (no {INDEX_NAME}) nor a `data export` "
        f"folder (no manifest.json)"
    )


def _from_store(store: Store, source: Path) -> ImportReport:
    from agents.store.store import Store as StoreClass

    if source.resolve() == store.data_dir.resolve():
        raise ImportSourceError(f"{source} is the store being imported into")
    root = str(source)
    _check_store_files(root)
    report = ImportReport(str(source), "store")
    have = store.episode_ids()
    with StoreClass(source, create=False) as other:
        for ep in other.list_episodes():
            if ep.id in have or ep.status == "running":
                report.skipped.append(ep.id)
                continue
            steps = other.steps(ep.id)
            _check_episode(ep.to_dict(), [st.to_dict() for st in steps])
            with _Staging(store, ep.id) as folder:
                if ep.initial_frame:
                    atomic_write_bytes(folder / ep.initial_frame, _source_frame(
                        root, ep.id, ep.initial_frame, ep.initial_frame_sha256, f"episode {ep.id}"))
                for st in steps:
                    if st.frame:
                        atomic_write_bytes(folder / st.frame, _source_frame(
                            root, ep.id, st.frame, st.frame_sha256, f"episode {ep.id} step {st.index}"))
                for name in ep.artifacts:
                    (folder / ARTIFACTS).mkdir(exist_ok=True)
                    _copy_source_file(root, f"{EPISODES}/{ep.id}/{ARTIFACTS}/{name}",
                                      folder / ARTIFACTS / name, f"episode {ep.id}: artifact {name}")
                specs = other.tool_specs(ep.tools_version)
                folder.publish(lambda ep=ep, steps=steps, specs=specs: _commit(
                    store, ep.to_dict(), [s.to_dict() for s in steps], specs))
            report.imported.append(ep.id)
    return report


def _from_export(store: Store, source: Path, manifest: dict) -> ImportReport:
    import pyarrow.parquet as pq

    if not isinstance(manifest, dict) or manifest.get("format") != EXPORT_FORMAT:
        raise ImportSourceError(f"{source}/manifest.json is not a Modelwright export")
    report = ImportReport(str(source), "export")
    have = store.episode_ids()
    try:
        with confined.open_file(source, "episodes.parquet") as f:
            episodes = pq.read_table(f, columns=["episode_id", "images", "meta"]).to_pylist()
        with confined.open_file(source, "steps.parquet") as f:
            steps_table = pq.read_table(f)
    except confined.ConfinedPathError as exc:
        raise ImportSourceError(f"{source}: {exc.message}; nothing was imported") from None
    except (OSError, ValueError) as exc:  # ArrowInvalid (a file that is not Parquet) too
        raise ImportSourceError(f"cannot read the export in {source}: {exc}") from None
    by_episode: dict[str, list[dict]] = {}
    for row in steps_table.to_pylist():
        by_episode.setdefault(row["episode_id"], []).append(row)
    specs = manifest.get("tool_specs") or {}
    if not isinstance(specs, dict):
        raise ImportSourceError(f"{source}/manifest.json: `tool_specs` is not an object")
    for row in episodes:
        ep = json.loads(row["meta"])
        if not isinstance(ep, dict):
            raise ImportSourceError(f"{source}: an episode's meta is not an object")
        rows = by_episode.get(ep.get("id"), [])
        _check_episode(ep, [{"episode_id": r.get("episode_id")} for r in rows])
        if ep["id"] in have:
            report.skipped.append(ep["id"])
            continue
        with _Staging(store, ep["id"]) as folder:
            if ep["initial_frame"]:
                data = row["images"][0]["bytes"]  # the user turn's image is the first one
                check_png(data, f"initial frame of {ep['id']}")
                if sha256(data) != ep["initial_frame_sha256"]:
                    raise StoreError(f"initial frame of {ep['id']} does not match its checksum")
                atomic_write_bytes(folder / ep["initial_frame"], data)
            steps = []
            for st in sorted(by_episode.get(ep["id"], []), key=lambda s: s["index"]):
                frame = st.pop("frame")
                rel = sha = None
                if frame is not None:
                    data = frame["bytes"]
                    check_png(data, f"frame of {ep['id']} step {st['index']}")
                    rel, sha = f"{FRAMES}/{st['index']:06d}.png", sha256(data)
                    atomic_write_bytes(folder / rel, data)
                steps.append(
                    {
                        **st,
                        "args": json.loads(st.pop("arguments")),
                        "result": None if st["result"] is None else json.loads(st["result"]),
                        "frame": rel,
                        "frame_sha256": sha,
                    }
                )
            tool_specs = specs.get(str(ep["tools_version"]))
            folder.publish(lambda ep=ep, steps=steps, tool_specs=tool_specs: _commit(
                store, {**ep, "artifacts": []}, steps, tool_specs))
        report.imported.append(ep["id"])
    return report
