"""`modelwright data ...` through the assembled CLI: --data-dir and MODELWRIGHT_DATA_DIR,
JSON output, export/import/delete, and errors that exit 2 with one clear line."""

from __future__ import annotations

import io
import json

import datasets
import pytest
from PIL import Image
from typer.testing import CliRunner

from agents.store import Store
from studio.cli import build_app


def png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (0, 90, 0)).save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture
def store_dir(tmp_path):
    with Store(tmp_path / "store") as store:
        for k, (source, ok) in enumerate([("oracle", True), ("agent", False), ("human", True)]):
            rec = store.begin_episode(task_id=f"fam{k % 2}:1:{k}", source=source, prompt=f"p{k}",
                                      initial_frame=png())
            rec.add_step(tool="add_primitive", args={"kind": "cube"}, result={"name": "Cube"},
                         frame=png(), scene_hash="h")
            rec.finish(reward=float(ok), success=ok)
    return tmp_path / "store"


def run(*args: str, env: dict | None = None):
    return CliRunner().invoke(build_app(), ["data", *args], env=env)


def test_list_and_show_with_filters_and_json(store_dir):
    out = run("list", "--data-dir", str(store_dir), "--json")
    assert out.exit_code == 0, out.output
    episodes = json.loads(out.output)
    assert [e["source"] for e in episodes] == ["oracle", "agent", "human"]
    ok = json.loads(run("list", "--data-dir", str(store_dir), "--success", "--json").output)
    assert [e["source"] for e in ok] == ["oracle", "human"]
    fam = json.loads(run("list", "--data-dir", str(store_dir), "--task-family", "fam1", "--json").output)
    assert [e["task_id"] for e in fam] == ["fam1:1:1"]
    table = run("list", "--data-dir", str(store_dir), "--source", "agent")
    assert "agent" in table.output and "oracle" not in table.output
    eid = episodes[0]["id"]
    shown = json.loads(run("show", eid[:20], "--data-dir", str(store_dir), "--json").output)
    assert shown["id"] == eid and shown["steps"][0]["tool"] == "add_primitive"
    assert "add_primitive" in run("show", eid, "--data-dir", str(store_dir)).output


def test_env_var_names_the_store(store_dir, tmp_path):
    out = run("list", "--json", env={"MODELWRIGHT_DATA_DIR": str(store_dir)})
    assert len(json.loads(out.output)) == 3
    (tmp_path / "nothing-here").mkdir()
    empty = run("list", "--data-dir", str(tmp_path / "nothing-here"))
    assert empty.exit_code == 0 and "no episodes" in empty.output
    assert list((tmp_path / "nothing-here").iterdir()) == []  # listing creates no store


def test_export_import_delete(store_dir, tmp_path):
    out = run("export", "--out", str(tmp_path / "ds"), "--data-dir", str(store_dir), "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["episodes"] == 3
    rows = datasets.load_dataset("parquet", data_files=str(tmp_path / "ds" / "episodes.parquet"),
                                 split="train")
    assert rows.num_rows == 3
    bad_fmt = run("export", "--out", str(tmp_path / "x"), "--format", "csv", "--data-dir", str(store_dir))
    assert bad_fmt.exit_code == 2 and "--format must be one of parquet" in bad_fmt.output

    imported = run("import", str(tmp_path / "ds"), "--data-dir", str(tmp_path / "copy"), "--json")
    assert len(json.loads(imported.output)["imported"]) == 3
    eid = json.loads(run("list", "--data-dir", str(tmp_path / "copy"), "--json").output)[0]["id"]
    gone = run("delete", eid, "--yes", "--data-dir", str(tmp_path / "copy"))
    assert gone.exit_code == 0 and "deleted 1 episode" in gone.output
    assert len(json.loads(run("list", "--data-dir", str(tmp_path / "copy"), "--json").output)) == 2


def test_errors_exit_2_with_one_line(store_dir, tmp_path):
    for args in (["show", "nope"], ["delete", "nope", "--yes"], ["replay", "nope"]):
        out = run(*args, "--data-dir", str(store_dir))
        assert out.exit_code == 2, (args, out.output)
        assert out.output.strip().startswith("error: no episode 'nope'")
    blocked = tmp_path / "file"
    blocked.write_text("x")
    out = run("export", "--out", str(blocked / "sub"), "--data-dir", str(store_dir))
    assert out.exit_code == 2 and "cannot write the export to" in out.output
    out = run("show", "x", "--data-dir", str(tmp_path / "missing"))
    assert out.exit_code == 2 and "no store at" in out.output
    out = run("import", str(tmp_path), "--data-dir", str(store_dir))
    assert out.exit_code == 2 and "neither a store" in out.output


def test_export_leaves_out_sessions_with_neither_task_nor_goal_unless_asked(tmp_path):
    """A studio session nobody gave a task or a goal teaches nothing: `data export` skips it
    (in SQL, so --limit counts what is exported), `--include-untasked` brings it in."""
    with Store(tmp_path / "store") as store:
        made = {}
        for name, task, prompt in (("bare", None, None), ("blank", None, "  "),
                                   ("goal", None, "a red mug"), ("task", "fam:1:0", None)):
            rec = store.begin_episode(task_id=task, source="human", prompt=prompt)
            rec.add_step(tool="add_primitive", args={"kind": "cube"}, result={"name": "Cube"},
                         scene_hash="h")
            made[name] = rec.finish(final_message="Done.").id
    where = ["--data-dir", str(tmp_path / "store"), "--json"]

    def exported(folder: str, *flags: str) -> set[str]:
        out = run("export", "--out", str(tmp_path / folder), *where, *flags)
        assert out.exit_code == 0, out.output
        table = datasets.load_dataset("parquet", split="train",
                                      data_files=str(tmp_path / folder / "episodes.parquet"))
        ids = {made_name for made_name, eid in made.items() if eid in table["episode_id"]}
        assert json.loads(out.output)["episodes"] == len(ids)
        return ids

    assert exported("default") == {"goal", "task"}
    assert exported("limited", "--limit", "1") == {"goal"}  # the first exportable one, not "bare"
    assert exported("all", "--include-untasked") == {"bare", "blank", "goal", "task"}
    manifest = json.loads((tmp_path / "all" / "manifest.json").read_text())
    assert manifest["include_untasked"] is True and manifest["episodes"] == 4
    # from Python, episodes named one by one are the caller's choice: exported as named
    from agents.store import EpisodeFilter
    from agents.store.export import export_parquet

    with Store(tmp_path / "store") as store:
        named = export_parquet(store, tmp_path / "named", EpisodeFilter(ids=(made["bare"], made["task"])))
        assert named.episodes == 2
        assert export_parquet(store, tmp_path / "by-source", EpisodeFilter(source="human")).episodes == 2
