"""Replay: an episode recorded through the real tool runtime (Blender + CadQuery workers)
re-executes hash for hash; a tampered episode fails at the tampered step."""

from __future__ import annotations

import json
import sqlite3

import pytest
from typer.testing import CliRunner

from agents.store import Store
from agents.store.replay import replay_episode
from tools import ToolSession, catalogue

SETUP = [{"tool": "add_primitive", "args": {"kind": "cube", "name": "Base", "dimensions": [2, 2, 0.2]}}]
PLAN = [
    ("add_primitive", {"kind": "cylinder", "name": "Post", "dimensions": [0.3, 0.3, 1.0]}),
    ("transform", {"name": "Post", "location": [0, 0, 0.6]}),
    ("add_primitive", {"kind": "no-such-kind", "name": "Bad", "dimensions": [1, 1, 1]}),  # fails: replay must fail too
    ("set_material", {"name": "Post", "color": "#3366ff"}),
    ("cad_box", {"name": "Plate", "length": 1.0, "width": 0.5, "height": 0.1}),
]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("store")
    with ToolSession() as s, Store(data_dir) as store:
        s.reset()
        for call in SETUP:
            assert s.call(call["tool"], call["args"]).ok
        rec = store.begin_episode(task_id="replay_demo:1:0", source="oracle", tools=catalogue(),
                                  prompt="A post on a base.", setup=SETUP,
                                  initial_scene_hash=s.scene_hash())
        for k, (tool, args) in enumerate(PLAN):
            r = s.call(tool, args)
            frame = s.render(size=64).images[0] if k % 2 == 0 else None
            rec.add_step(tool=tool, args=args, result=r, frame=frame)
        rec.finish(success=True)
        steps = store.steps(rec.episode_id)
    assert [st.ok for st in steps] == [True, True, False, True, True], [st.result_text for st in steps]
    # a call refused by validation never reaches the worker: no hash (replay checks its ok-ness)
    assert steps[2].scene_hash is None and len({st.scene_hash for st in steps} - {None}) == 4
    return data_dir, rec.episode_id


def _tamper(data_dir, episode_id, index, args):
    conn = sqlite3.connect(data_dir / "index.sqlite3")
    conn.execute("UPDATE steps SET args = ? WHERE episode_id = ? AND idx = ?",
                 (json.dumps(args), episode_id, index))
    conn.commit()
    conn.close()


def test_replay_matches_hash_for_hash(recorded):
    data_dir, eid = recorded
    with Store(data_dir) as store:
        report = replay_episode(store, eid)
    assert report.matched, report.summary()
    assert (report.steps_total, report.steps_replayed, report.steps_checked) == (5, 5, 4)


def test_a_tampered_episode_fails_at_the_right_step_and_the_cli_says_so(recorded, tmp_path):
    import shutil

    from studio.cli import build_app

    data_dir = tmp_path / "copy"
    shutil.copytree(recorded[0], data_dir)
    eid = recorded[1]
    app = build_app()  # its one error handler sets the exit codes (tools/cli/exits.py)
    runner = CliRunner()
    ok = runner.invoke(app, ["data", "replay", eid, "--data-dir", str(data_dir)])
    assert ok.exit_code == 0, ok.output
    assert "replay matches (4 of 5 steps hash-checked)" in ok.output

    _tamper(data_dir, eid, 3, {"name": "Post", "color": "#ff0000"})  # another colour
    bad = runner.invoke(app, ["data", "replay", eid, "--data-dir", str(data_dir), "--json"])
    assert bad.exit_code == 1
    div = json.loads(bad.output)["divergence"]
    assert (div["step"], div["tool"], div["where"]) == (3, "set_material", "step")
    assert div["expected_hash"] != div["actual_hash"]

    _tamper(data_dir, eid, 3, {"name": "Post", "color": "#3366ff"})  # restored
    _tamper(data_dir, eid, 2, {"kind": "cube", "name": "Bad", "dimensions": [1, 1, 1]})  # the failed call now works
    bad = runner.invoke(app, ["data", "replay", eid, "--data-dir", str(data_dir)])
    assert bad.exit_code == 1, bad.output
    assert "step 2 (add_primitive) failed when recorded but succeeded on replay" in bad.output

    missing = runner.invoke(app, ["data", "replay", "nope", "--data-dir", str(data_dir)])
    assert missing.exit_code == 2 and "no episode 'nope'" in missing.output
