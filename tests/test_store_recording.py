"""Recording: every field round-trips, the data dir precedence, schema versions, the
`interrupted` state of a dead writer, and bad input that must fail cleanly."""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from agents.store import (
    CorruptFrame,
    EpisodeBusy,
    EpisodeFilter,
    EpisodeNotFound,
    RecorderClosed,
    SchemaTooNew,
    Store,
    StoreError,
    StoreLocked,
    resolve_data_dir,
)
from agents.store.upkeep import hidden_folder_name
from tools import ToolError, ToolResult

REPO = Path(__file__).resolve().parents[1]
TOOLS = [{"name": "add_primitive", "description": "Add a primitive.",
          "parameters": {"type": "object", "properties": {"kind": {"type": "string"}}},
          "mutating": True, "kernel": "blender"}]


def png(color=(200, 30, 30), size=256) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (size, size), color).save(buf, "PNG")
    return buf.getvalue()


def tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
            and not p.name.startswith("index.sqlite3")}


def record_full(store: Store) -> str:
    rec = store.begin_episode(
        task_id="primitive_placement:2:42", task_params={"size": 1.5}, source="oracle",
        policy="oracle", model="tiny-vl", adapter="lora-3", tools=TOOLS, system="You model.",
        prompt="Make a red cube.", initial_frame=png((1, 2, 3)), tags=("demo", "red"),
        notes="first", setup=[{"tool": "clear_scene", "args": {}}], initial_scene_hash="h-init",
    )
    rec.add_step(tool="add_primitive", args={"kind": "cube"}, result={"name": "Cube"},
                 duration_ms=12.5, frame=png((9, 9, 9)), scene_hash="h0", model_message="A cube.",
                 tokens_in=100, tokens_out=20, latency_ms=300.0, token_ids=[1, 2, 3],
                 logprobs=[-0.1, -0.2, -0.3], turn=0)
    rec.add_step(tool="set_material", args={"name": "Cube", "color": "#ff0000"}, result="ok",
                 duration_ms=3.0, scene_hash="h1", turn=0)  # same assistant reply
    failed = ToolResult("boolean", {"a": "Cube"}, False,
                        error=ToolError("kernel", "no second operand"), duration_ms=7.0,
                        scene_hash="h1")
    rec.add_step(tool="boolean", args={"a": "Cube"}, result=failed, frame=png((5, 5, 5)))
    ep = rec.finish(reward=0.75, components={"iou": 0.9, "validity": 1.0}, success=True,
                    artifacts={"final.blend": b"BLENDER-v502", "final.step": b"ISO-10303"},
                    final_message="Done.")
    return ep.id


def test_every_field_is_recorded_and_read_back(tmp_path):
    with Store(tmp_path) as store:
        eid = record_full(store)
        ep = store.episode(eid)
        steps = store.steps(eid)
        assert (ep.status, ep.task_id, ep.task_family, ep.task_level, ep.task_seed) == (
            "finished", "primitive_placement:2:42", "primitive_placement", 2, 42)
        assert ep.task_params == {"size": 1.5}
        assert (ep.source, ep.policy, ep.model, ep.adapter) == ("oracle", "oracle", "tiny-vl", "lora-3")
        assert store.tool_specs(ep.tools_version) == TOOLS
        assert (ep.system, ep.prompt, ep.final_message) == ("You model.", "Make a red cube.", "Done.")
        assert store.initial_frame(ep) == png((1, 2, 3))
        assert ep.setup == [{"tool": "clear_scene", "args": {}}] and ep.initial_scene_hash == "h-init"
        assert (ep.reward, ep.components, ep.success) == (0.75, {"iou": 0.9, "validity": 1.0}, True)
        assert (ep.n_steps, ep.n_errors, ep.tool_ms, ep.latency_ms) == (3, 1, 22.5, 300.0)
        assert (ep.tokens_in, ep.tokens_out) == (100, 20)
        assert set(ep.versions) == {"app", "blender", "cadquery", "python"}
        assert ep.versions["blender"].startswith("5.2")
        assert ep.tags == ["demo", "red"] and ep.notes == "first"
        assert ep.artifacts == ["final.blend", "final.step"]
        assert (store.episode_dir(eid) / "artifacts" / "final.step").read_bytes() == b"ISO-10303"
        assert ep.writer["pid"] == os.getpid() and ep.duration_s >= 0
        s0, s1, s2 = steps
        assert (s0.index, s0.turn, s0.tool, s0.args, s0.result) == (
            0, 0, "add_primitive", {"kind": "cube"}, {"name": "Cube"})
        assert s0.result_text == '{"name":"Cube"}' and s0.ok
        assert (s0.duration_ms, s0.scene_hash, s0.model_message) == (12.5, "h0", "A cube.")
        assert (s0.tokens_in, s0.tokens_out, s0.latency_ms) == (100, 20, 300.0)
        assert (s0.token_ids, s0.logprobs) == ([1, 2, 3], [-0.1, -0.2, -0.3])
        assert store.step_frame(s0) == png((9, 9, 9)) and s0.at >= ep.created_at
        assert (s1.turn, s1.result, s1.result_text, s1.frame) == (0, None, "ok", None)
        assert (s2.turn, s2.error_kind, s2.error_message) == (1, "kernel", "no second operand")
        assert s2.result_text.startswith("ERROR (kernel)") and s2.duration_ms == 7.0
        assert s2.scene_hash == "h1" and store.step_frame(s2) == png((5, 5, 5))


def test_a_lock_held_past_the_timeout_is_one_line_and_loses_nothing(tmp_path):
    """Another process holding the index's write lock longer than the busy timeout: the write
    fails with StoreLocked (one line, exit code "unavailable" on the command line, not a
    traceback), nothing half-written is left, and the same recorder carries on once it is free."""
    from studio.cli import USER_ERRORS
    from tools.cli.exits import ExitCode, classify

    store = Store(tmp_path, busy_timeout_s=0.2)
    rec = store.begin_episode(task_id="t:1:0", source="agent", prompt="p", tools=TOOLS)
    rec.add_step(tool="add_primitive", args={"kind": "cube"}, frame=png())
    other = sqlite3.connect(tmp_path / "index.sqlite3", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # the other process's write transaction
    with pytest.raises(StoreLocked) as caught:
        rec.add_step(tool="add_primitive", args={"kind": "cone"}, frame=png((1, 1, 1)))
    message = str(caught.value)
    assert "locked by another process" in message and "\n" not in message
    assert classify(caught.value, USER_ERRORS) == ExitCode.UNAVAILABLE
    with Store(tmp_path, busy_timeout_s=0.2) as second:  # reads need no lock in WAL mode
        assert [e.id for e in second.list_episodes()] == [rec.episode_id]
        with pytest.raises(StoreLocked):  # a new episode in another store object: the same
            second.begin_episode(task_id="t:1:1", source="agent", prompt="p", tools=TOOLS)
    assert [p.name for p in (tmp_path / "episodes").iterdir()] == [rec.episode_id]  # no stray folder
    other.execute("ROLLBACK")
    other.close()
    rec.add_step(tool="add_primitive", args={"kind": "torus"})
    rec.finish(reward=1.0, success=True)
    steps = store.steps(rec.episode_id)
    assert [(s.index, s.args["kind"]) for s in steps] == [(0, "cube"), (1, "torus")]
    journal = (store.episode_dir(rec.episode_id) / "steps.jsonl").read_text().splitlines()
    assert len(journal) == 2  # the failed write left no line behind, and no frame
    assert sorted(p.name for p in (store.episode_dir(rec.episode_id) / "frames").iterdir()) == [
        "000000.png"]
    assert store.integrity_check() == "ok"
    store.close()


def test_filters_and_prefix_ids(tmp_path):
    with Store(tmp_path) as store:
        eid = record_full(store)
        with store.begin_episode(task_id="cad_plate:1:7", source="agent") as rec:
            rec.add_step(tool="cad_box", args={})
        assert [e.id for e in store.list_episodes(EpisodeFilter(source="oracle"))] == [eid]
        assert [e.task_id for e in store.list_episodes(EpisodeFilter(task_family="cad_plate"))] == [
            "cad_plate:1:7"]
        assert [e.id for e in store.list_episodes(EpisodeFilter(success=True))] == [eid]
        assert [e.id for e in store.list_episodes(EpisodeFilter(tag="red"))] == [eid]
        assert store.episode(eid[:-3]).id == eid


def test_data_dir_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("MODELWRIGHT_DATA_DIR", str(tmp_path / "env"))
    assert resolve_data_dir(tmp_path / "arg") == tmp_path / "arg"
    assert resolve_data_dir(None) == tmp_path / "env"
    monkeypatch.delenv("MODELWRIGHT_DATA_DIR")
    import platformdirs

    assert resolve_data_dir(None) == Path(platformdirs.user_data_dir("modelwright", appauthor=False))


def test_schema_is_versioned_and_a_newer_store_is_refused(tmp_path):
    Store(tmp_path).close()
    conn = sqlite3.connect(tmp_path / "index.sqlite3")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    from agents.store.schema import MIGRATIONS

    assert conn.execute("SELECT version FROM schema_version").fetchall() == [
        (m.version,) for m in MIGRATIONS]
    conn.execute("INSERT INTO schema_version VALUES (99, 'from the future', 0)")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaTooNew, match="upgrade Modelwright"):
        Store(tmp_path)


def test_a_live_writer_shows_running_and_a_killed_one_interrupted(tmp_path):
    script = ("import sys, time\nfrom agents.store import Store\n"
              "rec = Store(sys.argv[1]).begin_episode(prompt='p')\n"
              "rec.add_step(tool='t')\nprint(rec.episode_id, flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE,
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        eid = proc.stdout.readline().decode().strip()
        with Store(tmp_path) as store:
            assert store.episode(eid).status == "running"
            with pytest.raises(EpisodeBusy):
                store.delete([eid])
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            ep = store.episode(eid)
            assert ep.status == "interrupted" and ep.n_steps == 1
            assert ep.writer["pid"] == proc.pid
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_recorder_in_this_process_is_running_until_finished(tmp_path):
    with Store(tmp_path) as store:
        rec = store.begin_episode(prompt="p")
        assert store.list_episodes()[0].status == "running"  # our own lease counts as live
        with pytest.raises(ValueError), store.begin_episode(prompt="q") as failing:
            failing.add_step(tool="t")
            raise ValueError("policy crashed")
        rec.finish()
        with pytest.raises(RecorderClosed):
            rec.add_step(tool="t")
        statuses = {e.prompt: (e.status, e.notes) for e in store.list_episodes()}
        assert statuses == {"p": ("finished", ""),
                            "q": ("interrupted", "ValueError: policy crashed")}


def test_a_corrupt_frame_is_refused_and_nothing_is_written(tmp_path):
    with Store(tmp_path) as store:
        rec = store.begin_episode(prompt="p")
        rec.add_step(tool="t", frame=png())
        before = tree(tmp_path)
        with pytest.raises(CorruptFrame, match="frame of step 1"):
            rec.add_step(tool="t", frame=png()[:-20])  # truncated
        with pytest.raises(CorruptFrame, match="not a PNG"):
            rec.add_step(tool="t", frame=b"GIF89a....")
        assert tree(tmp_path) == before
        step = rec.add_step(tool="t", frame=png())  # the episode goes on
        assert step.index == 1 and rec.finish().n_steps == 2
        with pytest.raises(CorruptFrame, match="initial frame"):
            store.begin_episode(prompt="q", initial_frame=b"\x89PNG\r\n\x1a\nxx")
        assert len(store.list_episodes()) == 1


def test_a_frame_corrupted_on_disk_is_reported_by_name(tmp_path):
    with Store(tmp_path) as store:
        eid = record_full(store)
        s0 = store.steps(eid)[0]
        path = store.episode_dir(eid) / s0.frame
        path.write_bytes(path.read_bytes()[:100])
        with pytest.raises(CorruptFrame, match=f"{eid} step 0.*000000.png.*checksum"):
            store.step_frame(s0)


def test_unknown_episode_id_is_a_clear_error(tmp_path):
    with Store(tmp_path) as store:
        eid = record_full(store)
        before = tree(tmp_path)
        with pytest.raises(EpisodeNotFound, match="no episode 'nope'.*data list"):
            store.episode("nope")
        with pytest.raises(EpisodeNotFound):
            store.delete([eid, "nope"])  # all resolved first: nothing deleted
        assert tree(tmp_path) == before and store.episode(eid).status == "finished"
    with pytest.raises(StoreError, match="no store at"):
        Store(tmp_path / "missing", create=False)
    assert not (tmp_path / "missing").exists()


def test_delete_removes_rows_and_files(tmp_path):
    with Store(tmp_path) as store:
        keep, gone = record_full(store), record_full(store)
        assert store.delete([gone]) == [gone]
        assert [e.id for e in store.list_episodes()] == [keep]
        assert not store.episode_dir(gone).exists() and store.episode_dir(keep).exists()
        with pytest.raises(EpisodeNotFound):
            store.steps(gone)


def test_import_from_another_store_keeps_everything_and_is_idempotent(tmp_path):
    with Store(tmp_path / "a") as a:
        eid = record_full(a)
        src_ep, src_steps = a.episode(eid), a.steps(eid)
    with Store(tmp_path / "b") as b:
        from agents.store.importer import import_into

        report = import_into(b, tmp_path / "a")
        assert report.imported == [eid] and report.skipped == []
        assert b.episode(eid) == src_ep and b.steps(eid) == src_steps
        assert b.step_frame(b.steps(eid)[0]) == png((9, 9, 9))
        assert (b.episode_dir(eid) / "artifacts" / "final.blend").read_bytes() == b"BLENDER-v502"
        assert import_into(b, tmp_path / "a").skipped == [eid]
        with pytest.raises(StoreError, match="neither a store"):
            import_into(b, tmp_path)
        json.dumps(src_ep.to_dict())  # JSON-able for `data show --json`


def test_two_threads_share_one_store(tmp_path):
    import threading

    errors: list[BaseException] = []

    def worker(name: str, store: Store) -> None:
        try:
            for _ in range(5):
                with store.begin_episode(prompt=name) as rec:
                    for k in range(3):
                        rec.add_step(tool="t", args={"k": k}, frame=png(size=32))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    with Store(tmp_path) as store:
        threads = [threading.Thread(target=worker, args=(n, store)) for n in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        episodes = store.list_episodes()
        assert sorted(e.prompt for e in episodes) == ["a"] * 5 + ["b"] * 5
        assert all(e.status == "finished" and e.n_steps == 3 for e in episodes)
        assert all([s.args["k"] for s in store.steps(e.id)] == [0, 1, 2] for e in episodes)


def test_a_migration_upgrades_an_existing_store_in_place(tmp_path, monkeypatch):
    from agents.store import schema

    with Store(tmp_path) as store:
        eid = record_full(store)
    known = [m.version for m in schema.MIGRATIONS]
    new = known[-1] + 1
    v_next = schema.Migration(new, "episodes get a rating", (
        "ALTER TABLE episodes ADD COLUMN rating INTEGER NOT NULL DEFAULT 3",))
    monkeypatch.setattr(schema, "MIGRATIONS", (*schema.MIGRATIONS, v_next))
    monkeypatch.setattr(schema, "LATEST_VERSION", new)
    with Store(tmp_path) as store:
        assert store.episode(eid).n_steps == 3  # the data came through
        rows = store._conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        assert [r[0] for r in rows] == [*known, new]
        assert store._conn.execute("SELECT rating FROM episodes").fetchone()[0] == 3
    with Store(tmp_path) as store:  # applied once
        assert len(store._conn.execute("SELECT * FROM schema_version").fetchall()) == new


def test_opening_a_store_removes_only_rowless_unleased_folders(tmp_path):
    with Store(tmp_path) as store:
        eid = record_full(store)
        live = store.begin_episode(prompt="live")
        orphan = store.episodes_dir / "20260101-000000-deadbeef"
        (orphan / "frames").mkdir(parents=True)
        (orphan / "frames" / "000000.png").write_bytes(png())
        # hidden folders being set up: named with their creator's pid, kept while it lives
        in_setup = store.episodes_dir / hidden_folder_name("20260101-000000-cafecafe")
        in_setup.mkdir()
        gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
        dead_setup = store.episodes_dir / f".mwtmp-20260101-000000-feedfeed.{gone.stdout.strip()}"
        dead_setup.mkdir()
        with Store(tmp_path) as other:  # what any process does on open
            assert other.orphan_folders() == []
            legacy = store.episodes_dir / ".mwtmp-20260101-000000-0ddba11"  # no pid: by age
            legacy.mkdir()
            made = legacy.stat().st_mtime
            assert other.orphan_folders(now=made + 1) == []
            assert other.orphan_folders(now=made + 3600) == [legacy]
        assert not orphan.exists() and not dead_setup.exists() and in_setup.exists()
        assert store.episode_dir(eid).exists() and store.episode_dir(live.episode_id).exists()
        live.finish()


def test_dropped_steps_leave_the_index_the_counters_and_a_rebuilt_index(tmp_path):
    """Steps a person drops before Finish: gone with their frames and counters, kept out of an
    index rebuilt from the journal, and refused when a kept step was made on their scene."""
    from agents.store.journal import rebuild_index
    from agents.store.revise import StepsNeeded, drop_steps

    store = Store(tmp_path)
    rec = store.begin_episode(source="human", tools=TOOLS, initial_scene_hash="h0")
    rec.add_step(tool="add_primitive", args={"name": "A"}, scene_hash="h1", frame=png())
    rec.add_step(tool="set_material", args={"name": "Nope"}, error_kind="validation",
                 error_message="no object named 'Nope'", frame=png((9, 9, 9)))
    rec.add_step(tool="add_primitive", args={"name": "B"}, scene_hash="h2")
    with pytest.raises(StepsNeeded, match="step 1 \\(add_primitive\\)"):
        drop_steps(store, rec.episode_id, [0])  # B was made on the scene A built
    frame = store.steps(rec.episode_id)[1].frame
    assert drop_steps(store, rec.episode_id, [1]) == [1]
    assert not (store.episode_dir(rec.episode_id) / frame).exists()
    rec.finish()
    episode = store.episode(rec.episode_id)
    assert (episode.n_steps, episode.n_errors) == (2, 0)
    assert [s.args["name"] for s in store.steps(rec.episode_id)] == ["A", "B"]
    with pytest.raises(StoreError, match="closed"):
        drop_steps(store, rec.episode_id, [2])
    store.close()
    rebuild_index(tmp_path, tmp_path / "index.sqlite3")
    with Store(tmp_path) as again:
        assert [s.index for s in again.steps(rec.episode_id)] == [0, 2]
        assert again.episode(rec.episode_id).n_steps == 2


def test_a_worded_task_id_is_filed_under_its_family_level_and_seed() -> None:
    """Eval's held-out phrasings (`:unseen`, `:wN`) are the same task: the store files them
    under its family, level and seed, not under the family alone."""
    from agents.store.store import parse_task_id

    assert parse_task_id("materials:1:110000") == ("materials", 1, 110000)
    assert parse_task_id("materials:1:110000:unseen") == ("materials", 1, 110000)
    assert parse_task_id("materials:1:110000:w7") == ("materials", 1, 110000)
    assert parse_task_id("materials:1:110000:loud") == ("materials", None, None)
    assert parse_task_id("bench:case-3") == ("bench", None, None)
