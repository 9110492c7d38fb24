"""The store takes nothing on trust: imported ids and paths, huge arguments, a corrupt index,
and the scratch of a supervisor that died. Real SQLite, real files, real processes."""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile

import pytest
from PIL import Image
from typer.testing import CliRunner

from agents.store import Store
from agents.store.errors import StoreError
from agents.store.importer import import_into


def png(shade: int = 90) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (0, shade, 0)).save(buf, "PNG")
    return buf.getvalue()


def _record(root, n: int = 2) -> list[str]:
    ids = []
    with Store(root) as store:
        for k in range(n):
            rec = store.begin_episode(task_id=f"fam:1:{k}", source="oracle", prompt=f"p{k}",
                                      initial_frame=png(), tools=[{"name": "t"}])
            rec.add_step(tool="add_primitive", args={"kind": "cube", "k": k}, result={"name": "C"},
                         frame=png(k), scene_hash="h")
            rec.add_step(tool="transform", args={"name": "C"}, result="moved", error_kind="kernel",
                         error_message="no")
            rec.finish(reward=0.5 + k, components={"validity": 1.0}, success=bool(k))
            ids.append(rec.episode_id)
    return ids


def _sentinel(path):
    path.mkdir(parents=True, exist_ok=True)
    (path / "keep.txt").write_text("keep")
    return path


def _intact(path) -> bool:
    return (path / "keep.txt").read_text() == "keep" and sorted(os.listdir(path)) == ["keep.txt"]


def test_import_from_a_store_with_id_dotdot_is_refused_and_touches_nothing(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    [eid, _] = _record(src)
    with sqlite3.connect(src / "index.sqlite3") as db:  # foreign keys off: rewrite both tables
        db.execute("UPDATE steps SET episode_id = '../../x' WHERE episode_id = ?", (eid,))
        db.execute("UPDATE episodes SET id = '../../x' WHERE id = ?", (eid,))
    outside = [_sentinel(tmp_path / "x"), _sentinel(tmp_path / "src" / "x"),
               _sentinel(tmp_path / "dst" / "x")]
    Store(dst).close()
    with Store(dst) as store, pytest.raises(StoreError, match="not a"):
        import_into(store, src)
    assert all(_intact(p) for p in outside)
    with Store(dst) as store:
        assert store.list_episodes() == []


def _export(tmp_path, src):
    from agents.store.export import export_parquet

    with Store(src) as store:  # these episodes have no task: exported because asked
        export_parquet(store, tmp_path / "exp", include_untasked=True)
    return tmp_path / "exp"


def _rewrite_meta(exp, change) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(exp / "episodes.parquet")
    metas = [json.dumps(change(json.loads(m))) for m in table.column("meta").to_pylist()]
    table = table.set_column(table.schema.get_field_index("meta"), "meta", pa.array(metas))
    pq.write_table(table, exp / "episodes.parquet")


@pytest.mark.parametrize("field,value", [
    ("id", "../../x"),
    ("id", "/tmp/abs"),
    ("initial_frame", "../../../x/escaped.png"),
    ("initial_frame", "frames/../../../x/escaped.png"),
    ("artifacts", ["../../x/evil.blend"]),
])
def test_import_from_an_export_with_escaping_id_or_paths_is_refused(tmp_path, field, value):
    src, dst = tmp_path / "src", tmp_path / "dst"
    _record(src, n=1)
    exp = _export(tmp_path, src)
    _rewrite_meta(exp, lambda ep: {**ep, field: value})
    outside = _sentinel(tmp_path / "x")
    with Store(dst) as store:
        with pytest.raises(StoreError, match="nothing was imported"):
            import_into(store, exp)
        assert store.list_episodes() == []
    assert _intact(outside)
    assert sorted(os.listdir(dst / "episodes")) == []


def test_a_100_mb_argument_is_stored_as_digest_and_first_kb(tmp_path):
    import hashlib

    huge = "x" * (100 << 20)
    with Store(tmp_path / "s") as store:
        rec = store.begin_episode(source="agent")
        rec.add_step(tool="cadquery_script", args={"code": huge}, result="r" * (50 << 20))
        rec.finish()
        [step] = store.steps(rec.episode_id)
    kept = step.args["_truncated"]
    assert kept["bytes"] > 100 << 20 and len(kept["head"]) == 1024
    assert kept["sha256"] == hashlib.sha256(json.dumps({"code": huge}, separators=(",", ":"))
                                            .encode()).hexdigest()
    assert step.result_text.startswith("[truncated: ") and len(step.result_text) < 2048
    size = sum(p.stat().st_size for p in (tmp_path / "s").rglob("*") if p.is_file())
    assert size < 2 << 20, size


def _cli(*args):
    from studio.cli import build_app

    return CliRunner().invoke(build_app(), ["data", *args])


def test_corrupt_index_says_so_in_one_line_and_doctor_rebuilds_it(tmp_path):
    root = tmp_path / "s"
    ids = _record(root)
    with Store(root) as store:
        before = [(e.id, e.reward, e.success, e.n_steps, e.n_errors) for e in store.list_episodes()]
        steps_before = [s.to_dict() for s in store.steps(ids[1])]
    (root / "index.sqlite3").write_bytes(b"this is not SQLite at all" * 100)
    for suffix in ("-wal", "-shm"):
        (root / f"index.sqlite3{suffix}").unlink(missing_ok=True)
    out = _cli("list", "--data-dir", str(root))
    assert out.exit_code == 2
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and "corrupt" in lines[0] and "data doctor" in lines[0], out.output
    out = _cli("doctor", "--data-dir", str(root))
    assert out.exit_code == 0, out.output
    assert "rebuilt" in out.output and "2 episode(s), 4 step(s)" in out.output
    assert list(root.glob("index.sqlite3.corrupt-*"))
    with Store(root) as store:
        assert [(e.id, e.reward, e.success, e.n_steps, e.n_errors)
                for e in store.list_episodes()] == before
        assert [s.to_dict() for s in store.steps(ids[1])] == steps_before
        assert store.step_frame(store.steps(ids[1])[0]) == png(1)
        assert store.tool_specs(store.episode(ids[0]).tools_version) == [{"name": "t"}]
    assert "healthy" in _cli("doctor", "--data-dir", str(root)).output


def test_a_damaged_page_found_after_the_store_opened_says_so_in_one_line(tmp_path):
    """The index opens (its header and schema read fine) but the steps table's page is
    garbage: every command that reads it says the same one line as a corrupt file."""
    root = tmp_path / "s"
    ids = _record(root)
    with sqlite3.connect(root / "index.sqlite3") as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        page = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'steps'").fetchone()[0]
    with open(root / "index.sqlite3", "r+b") as f:
        f.seek((page - 1) * page_size)
        f.write(b"\xff" * page_size)
    with Store(root, create=False) as store:
        with pytest.raises(StoreError, match="corrupt.*data doctor"):
            store.steps(ids[0])
    out = _cli("show", ids[0], "--data-dir", str(root))
    assert out.exit_code == 2, out.output
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and "corrupt" in lines[0] and "data doctor" in lines[0], out.output
    out = _cli("doctor", "--data-dir", str(root))
    assert out.exit_code == 0 and "2 episode(s), 4 step(s)" in out.output, out.output
    with Store(root) as store:
        assert len(store.steps(ids[0])) == 2


def test_two_rebuilds_in_one_second_keep_both_old_indexes(tmp_path):
    """The set-aside name carries the time to the second; a second rebuild in that second
    (doctor, then doctor --rebuild) must not replace the corrupt file the first kept."""
    from agents.store.journal import rebuild_index

    root = tmp_path / "s"
    _record(root)
    index = root / "index.sqlite3"
    index.write_bytes(b"this is not SQLite at all")
    for suffix in ("-wal", "-shm"):
        (root / f"index.sqlite3{suffix}").unlink(missing_ok=True)
    first = rebuild_index(root, index, stamp="20260101-000000")
    second = rebuild_index(root, index, stamp="20260101-000000")
    assert first.set_aside != second.set_aside
    with open(first.set_aside, "rb") as f:
        assert f.read() == b"this is not SQLite at all"
    assert sqlite3.connect(second.set_aside).execute("SELECT count(*) FROM episodes").fetchone() == (2,)
    with Store(root) as store:
        assert len(store.list_episodes()) == 2


def test_a_lost_index_deletes_no_episode_and_doctor_brings_them_back(tmp_path):
    """A store opened on a missing index (deleted, or a fresh disk copy without it) must not
    take the rowless episode folders for orphans of a killed writer and delete them."""
    root = tmp_path / "s"
    ids = _record(root)
    for suffix in ("", "-wal", "-shm"):
        (root / f"index.sqlite3{suffix}").unlink(missing_ok=True)
    with Store(root) as store:  # a fresh, empty index: the open sweeps orphans
        assert store.list_episodes() == []
    for eid in ids:
        assert (root / "episodes" / eid / "episode.json").is_file(), eid
    out = _cli("doctor", "--data-dir", str(root))
    assert out.exit_code == 0, out.output
    with Store(root) as store:
        assert sorted(e.id for e in store.list_episodes()) == sorted(ids)


# ------------------------------------------------------------ scratch of dead supervisors

HOLD_POOL = """
import sys, time
from tools.runtime.supervisor import WorkerPool
pool = WorkerPool(size=0, prewarm=False)
print(pool.root, flush=True)
time.sleep(600)
"""


def _pool_process(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=os.getcwd())
    p = subprocess.Popen([sys.executable, "-c", HOLD_POOL], stdout=subprocess.PIPE, text=True, env=env)
    root = p.stdout.readline().strip()
    assert root.startswith(str(tmp_path)), root
    (open(os.path.join(root, "marker"), "w")).close()
    return p, root


def test_scratch_of_a_dead_supervisor_is_swept_and_a_live_one_kept(tmp_path, monkeypatch):
    import tempfile

    from tools.runtime.supervisor import WorkerPool

    dead, dead_root = _pool_process(tmp_path)
    live, live_root = _pool_process(tmp_path)
    unowned = tmp_path / "modelwright-nolock"
    unowned.mkdir()
    try:
        dead.send_signal(signal.SIGKILL)
        dead.wait(timeout=60)
        assert os.path.isdir(dead_root)  # kill -9: nothing cleaned up on the way out
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        pool = WorkerPool(size=0, prewarm=False)
        try:
            assert not os.path.exists(dead_root)
            assert os.path.isfile(os.path.join(live_root, "marker"))
            assert unowned.is_dir()  # no owner lock: never ours to remove
        finally:
            pool.close()
        assert not os.path.exists(pool.root)
    finally:
        live.kill()
        live.wait(timeout=60)
        dead.kill()


def test_a_sweep_in_the_instant_a_root_is_claimed_leaves_it(tmp_path, monkeypatch):
    """Another pool's sweep that runs while a new root takes its lock (here: just before the
    lock is taken) finds no unlocked `owner.lock` in it, so the root stays (CI once saw a new
    pool's root removed under it by a sweep in that instant)."""
    import fcntl

    from tools.sandbox import scratch

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    real_flock, swept = fcntl.flock, []

    def flock_after_a_sweep(fd, op):
        if not swept:
            swept.append(None)
            swept[0] = scratch.sweep_dead(str(tmp_path))  # the other pool, at the worst time
        return real_flock(fd, op)

    monkeypatch.setattr(scratch.fcntl, "flock", flock_after_a_sweep)
    root, fd = scratch.new_root()
    try:
        assert swept == [[]] and os.path.isdir(root)
        assert sorted(os.listdir(root)) == [scratch.LOCK_NAME]
        monkeypatch.setattr(scratch.fcntl, "flock", real_flock)
        assert scratch.sweep_dead(str(tmp_path)) == [] and os.path.isdir(root)  # held: alive
    finally:
        scratch.release(root, fd)


def test_import_refuses_an_artifact_that_is_a_symlink_out_of_the_source(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the store")
    with Store(src) as store:
        rec = store.begin_episode(source="agent")
        rec.finish(artifacts={"final.glb": b"glb"})
        eid = rec.episode_id
    art = src / "episodes" / eid / "artifacts" / "final.glb"
    art.unlink()
    art.symlink_to(secret)
    with Store(dst) as store, pytest.raises(StoreError, match="artifact final.glb"):
        import_into(store, src)
    assert not list((dst / "episodes").rglob("final.glb"))
