"""A person and the agent on one scene, in the real studio window (offscreen Qt, real runtime):
the agent continues a hand-made model, its run is one undo step, the person edits and lets it
go on in the same episode, and the episode replays from its recorded start state."""

from __future__ import annotations

import json
import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"

import pytest  # noqa: E402
from studio_support import fresh_scene, send, send_ok, studio_window  # noqa: E402

from tools import ToolSession  # noqa: E402


@pytest.fixture(scope="module")
def studio(qapp, worker_pool, tmp_path_factory, request):
    with studio_window(worker_pool, tmp_path_factory.mktemp("comodel"), request) as window:
        yield window


@pytest.fixture
def fresh(studio, qtbot):
    fresh_scene(studio, qtbot)
    studio.agent.approval.setChecked(False)
    studio.agent.new_scene.setChecked(False)
    return studio


def script(tmp_path, name, calls) -> str:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"tool": t, "args": a}) + "\n" for t, a in calls))
    return f"script:{path}"


def run_agent(qtbot, window, policy, goal):
    from studio.agent.runner import AgentRequest

    with qtbot.waitSignal(window.agent.sig_finished, timeout=90_000) as done:
        window.agent.run(AgentRequest(policy=policy, goal=goal, max_steps=10))
    assert done.args[0]["status"] == "done", done.args[0]
    return done.args[0]


def _labels(form) -> set[str]:
    from PySide6.QtWidgets import QLabel

    return {label.text() for label in form.findChildren(QLabel)}


def sizes(window) -> dict[str, str]:
    tree = window.outliner.tree
    return {tree.topLevelItem(i).text(0): tree.topLevelItem(i).text(2)
            for i in range(tree.topLevelItemCount())}


def test_the_agent_continues_a_hand_made_model_in_one_undo_step_and_replays(
        fresh, qtbot, tmp_path, worker_pool):
    from agents.store.replay import replay_episode

    w, c = fresh, fresh.controller
    send_ok(qtbot, w, "add_primitive", kind="cube", name="Base", dimensions="1, 1, 1", location="0, 0, 0.5")
    send_ok(qtbot, w, "cad_box", name="Plate", length="100", width="70", height="10")
    qtbot.waitUntil(lambda: w.outliner.names() == ["Base", "Plate"], timeout=20_000)
    # one unit for every row: a part authored in mm makes the project show mm (issue #33)
    assert sizes(w) == {"Base": "1000 × 1000 × 1000 mm", "Plate": "100 × 70 × 10 mm"}
    labels = _labels(w.palette.select("cad_hole"))  # every value with its unit
    assert {"diameter (mm) *", "positions (mm)", "depth (mm)"} <= labels
    # the project shows mm; a metre tool's lengths are still typed in metres, as labelled
    assert {"location (m)", "rotation_deg (°)"} <= _labels(w.palette.select("add_primitive"))
    c.finish_demonstration(check=False)  # the hand-made model is now just the current scene
    hand = list(c.journal.calls)
    undo_before = c.undo_stack.count()

    handle = script(tmp_path, "handle", [
        ("add_primitive", {"kind": "cylinder", "name": "Handle", "dimensions": [0.1, 0.1, 0.4],
                           "location": [0, 0, 1.2]}),
        ("set_material", {"name": "Handle", "color": "#D03030"})])
    summary = run_agent(qtbot, w, handle, "add a red handle on top")
    qtbot.waitUntil(lambda: w.outliner.names() == ["Base", "Handle", "Plate"], timeout=20_000)
    assert sizes(w)["Plate"] == "100 × 70 × 10 mm"  # the hand-made objects are untouched
    episode_id = summary["episode_id"]
    assert c.demo.active and c.demo.episode_id == episode_id  # the episode stays open
    assert c.undo_stack.count() == undo_before + 1  # the whole run is one undo step
    assert c.undo_stack.text(c.undo_stack.count() - 1).startswith("agent: add a red handle")

    with qtbot.waitSignal(c.sig_call, timeout=30_000):
        w.history.undo_button.click()  # the run, taken back in one step
    qtbot.waitUntil(lambda: w.outliner.names() == ["Base", "Plate"], timeout=20_000)
    with qtbot.waitSignal(c.sig_call, timeout=30_000):
        w.history.redo_button.click()
    qtbot.waitUntil(lambda: w.outliner.names() == ["Base", "Handle", "Plate"], timeout=20_000)

    # the person edits by hand, then lets the agent go on: all in the same episode
    send_ok(qtbot, w, "set_material", name="Base", color="#3050D0")
    lid = script(tmp_path, "lid", [
        ("add_primitive", {"kind": "cube", "name": "Lid", "dimensions": [1, 1, 0.05],
                           "location": [0, 0, 1.025]})])
    again = run_agent(qtbot, w, lid, "put a thin lid on the base")
    assert again["episode_id"] == episode_id
    qtbot.waitUntil(lambda: "Lid" in w.outliner.names(), timeout=20_000)
    c.finish_demonstration(check=False)

    store = c.store()
    episode = store.episode(episode_id)
    assert episode.status == "finished" and episode.source == "agent"
    assert episode.setup == hand and episode.initial_scene_hash
    steps = store.steps(episode_id)
    actors = [(s.actor, s.tool) for s in steps]
    assert actors[:2] == [("agent", "add_primitive"), ("agent", "set_material")]
    assert ("human", "undo") in actors and ("human", "set_material") in actors
    assert actors[-1] == ("agent", "add_primitive")
    assert all(s.frame for s in steps if s.actor == "human")  # the renders the agent would see
    turns = [s.turn for s in steps]
    assert turns == sorted(turns) and len(set(turns)) == len(turns)  # one call per turn here
    report = replay_episode(store, episode_id, session_factory=lambda: ToolSession(worker_pool, deadline_s=60))
    assert report.matched, report.summary()
    assert report.steps_checked == len(steps)
    # replayed in the studio, the episode's end is the start the next run records
    w.episodes.last_replay = None
    w.episodes.replay(episode_id)
    qtbot.waitUntil(lambda: w.episodes.last_replay is not None, timeout=60_000)
    assert w.episodes.last_replay.matched
    assert c.journal.calls == hand + [{"tool": s.tool, "args": s.args} for s in steps]


def test_the_oracle_without_a_task_says_so_and_changes_nothing(fresh, qtbot):
    w, c = fresh, fresh.controller
    send_ok(qtbot, w, "add_primitive", kind="cube", name="Mine", dimensions="1, 1, 1")
    qtbot.waitUntil(lambda: w.outliner.names() == ["Mine"], timeout=20_000)
    count, hash_before = c.undo_stack.count(), c.scene.scene_hash
    w.agent.policy.setCurrentText("oracle")
    w.agent.goal.setPlainText("make it nicer")
    with qtbot.waitSignal(c.sig_error, timeout=5_000) as err:
        w.agent.run()
    assert "needs a task" in err.args[0] and "Task dock" in err.args[0]
    assert "--task" not in err.args[0]
    assert not w.agent.running and w.agent.run_button.isEnabled()
    qtbot.wait(200)
    assert w.outliner.names() == ["Mine"] and c.undo_stack.count() == count
    assert c.scene.scene_hash == hash_before


def test_scripted_hand_then_agent_is_one_episode_with_both_actors(tmp_path):
    """`modelwright studio --hand F --goal G --autorun`: what the README screenshots run."""
    import subprocess
    import sys
    from pathlib import Path

    from agents.store import Store

    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(repo)}
    args = [sys.executable, "-m", "studio.cli", "studio", "--hand",
            str(repo / "assets/demo/stool-by-hand.jsonl"), "--goal", "three more legs",
            "--policy", f"script:{repo / 'assets/demo/stool-agent.jsonl'}", "--autorun",
            "--exit-when-done", "--data-dir", str(tmp_path / "data"),
            "--settings", str(tmp_path / "s.ini"), "--screenshot", str(tmp_path / "after.png")]
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    assert summary["status"] == "done" and (tmp_path / "after.png").is_file()
    with Store(tmp_path / "data") as store:
        steps = store.steps(summary["episode_id"])
        episode = store.episode(summary["episode_id"])
    assert [s.actor for s in steps] == ["human"] * 2 + ["agent"] * 4
    assert episode.prompt == "three more legs"  # the goal typed for the run, not empty
    bad = subprocess.run([*args[:5], "--task", "composition:1:1"], env=env, capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert bad.returncode == 2 and "--hand" in bad.stderr and "Traceback" not in bad.stderr


TASK = "primitive_placement:1:42"


def test_a_task_run_records_the_tasks_prompt_and_every_dock_shows_the_same_numbers(
        fresh, qtbot, tmp_path):
    """A stale goal in the box never stands in for the chosen task's prompt; the Agent dock,
    the Task dock, the Episodes list and `data show` report the loop's steps and reward (a
    failed call first: the reward is below 1 and counts every recorded call)."""
    from typer.testing import CliRunner

    from studio.cli import build_app

    w, c = fresh, fresh.controller
    w.agent.goal.setPlainText("a goal typed for an earlier run")
    with qtbot.waitSignal(c.sig_task_ready, timeout=120_000):
        c.load_task(TASK)
    w.agent.policy.setCurrentText(script(tmp_path, "globe", [
        ("add_primitive", {"kind": "blob", "name": "Globe", "dimensions": [1, 1, 1]}),
        ("add_primitive", {"kind": "cylinder", "name": "Globe", "dimensions": [0.9, 0.9, 1.1],
                           "location": [0.45, 3.2, 0.55]})]))
    w.agent.use_task.setChecked(True)
    with qtbot.waitSignal(w.agent.sig_finished, timeout=120_000) as done:
        w.agent.run()
    summary = done.args[0]
    assert summary["success"] and summary["reward"] < 1, summary
    qtbot.waitUntil(lambda: "recorded step" in w.tasks.steps.text(), timeout=20_000)
    task_steps = w.tasks.steps.text()
    with qtbot.waitSignal(c.sig_episode_saved, timeout=120_000) as saved:
        assert w.tasks.review.finish()
    episode_id = saved.args[0]
    assert episode_id == summary["episode_id"]
    ep = c.store().episode(episode_id)
    assert ep.prompt == c.task.prompt and ep.status == "finished"
    assert ep.final_message == summary["final_message"] and ep.final_message
    out = CliRunner().invoke(build_app(), ["data", "show", episode_id, "--json",
                                           "--data-dir", str(c.store().data_dir)])
    shown = json.loads(out.output)
    steps, reward = shown["n_steps"], f"reward {shown['reward']:.3f}"
    assert steps == len(shown["steps"]) and shown["prompt"] == c.task.prompt
    assert f"{steps} steps" in w.agent.status.text() and reward in w.agent.status.text()
    assert task_steps.startswith(f"demonstration: {steps} recorded step")
    assert w.tasks.reward.text().startswith(reward)
    row = {e.id: e for e in w.episodes.episodes}[episode_id]  # the list refreshed on Finish
    assert (row.status, row.n_steps, row.reward) == ("finished", steps, shown["reward"])


def test_dropped_steps_leave_the_export_redo_records_what_it_did_and_the_replay_matches(
        fresh, qtbot, tmp_path, worker_pool):
    import pyarrow.parquet as pq
    from PySide6.QtCore import Qt

    from agents.store import EpisodeFilter
    from agents.store.export import export_parquet
    from agents.store.replay import replay_episode

    w, c = fresh, fresh.controller
    send_ok(qtbot, w, "add_primitive", kind="cube", name="A", dimensions="1, 1, 1")
    for _ in range(2):  # the same failing call sent twice by mistake
        assert not send(qtbot, w, "set_material", name="Nope", color="#FF0000").ok
    send_ok(qtbot, w, "add_primitive", kind="cube", name="B", dimensions="1, 1, 1", location="2, 0, 0")
    send_ok(qtbot, w, "transform", name="B", location="3, 0, 0")  # rotation and scale unset
    with qtbot.waitSignal(c.sig_call, timeout=30_000):
        w.history.undo_button.click()
    with qtbot.waitSignal(c.sig_call, timeout=30_000):
        w.history.redo_button.click()
    qtbot.waitUntil(lambda: w.outliner.names() == ["A", "B"], timeout=20_000)
    review = w.tasks.review
    qtbot.waitUntil(lambda: review.steps.count() == 7, timeout=20_000)
    episode_id = c.demo.episode_id
    recorded = c.store().steps(episode_id)
    assert recorded[6].tool == "transform"  # redo: the call as the person made it, no nulls
    assert recorded[4].args == recorded[6].args and "rotation_deg" not in recorded[6].args

    assert not review.prompt.isHidden()  # a person's free-form episode asks for its prompt
    with qtbot.waitSignal(c.sig_error, timeout=5_000) as refused:
        assert not review.finish()
    assert "prompt" in refused.args[0] and c.demo.active
    review.prompt.setText("two cubes side by side")
    review.drop(0)  # A is what everything after it was built on: refused, nothing closed
    with qtbot.waitSignal(c.sig_error, timeout=5_000) as refused:
        assert not review.finish()
    assert "step 1 (add_primitive)" in refused.args[0] and c.demo.active
    review.steps.item(0).setCheckState(Qt.CheckState.Checked)
    review.drop(1, 2)
    with qtbot.waitSignal(c.sig_episode_saved, timeout=30_000):
        assert review.finish()
    store = c.store()
    steps = store.steps(episode_id)
    assert [s.tool for s in steps] == ["add_primitive", "add_primitive", "transform", "undo", "transform"]
    episode = store.episode(episode_id)
    assert (episode.n_steps, episode.n_errors, episode.prompt) == (5, 0, "two cubes side by side")
    export_parquet(store, tmp_path / "out", EpisodeFilter(ids=(episode_id,)))
    exported = pq.read_table(tmp_path / "out" / "steps.parquet").to_pylist()
    assert [r["tool"] for r in exported] == [s.tool for s in steps]
    messages = pq.read_table(tmp_path / "out" / "episodes.parquet").to_pylist()[0]["messages"]
    called = [t["function"]["name"] for m in messages for t in (m["tool_calls"] or [])]
    assert called == [s.tool for s in steps]  # the training rows: no dropped call in them
    assert messages[1]["content"][0]["text"].startswith("two cubes")
    report = replay_episode(store, episode_id, session_factory=lambda: ToolSession(worker_pool, deadline_s=60))
    assert report.matched and report.steps_checked == 5, report.summary()


def test_run_and_send_never_keep_the_focus_and_the_default_policy_is_the_local_model(
        fresh, qtbot, tmp_path):
    from PySide6.QtCore import QSettings, Qt

    from agents.models.registry import BASE_NAME
    from studio.agent.dock import AgentDock

    w = fresh
    for button in (w.agent.run_button, w.agent.stop_button, w.palette.send_button):
        assert button.focusPolicy() == Qt.FocusPolicy.NoFocus and not button.autoDefault()
    from PySide6.QtWidgets import QApplication

    send_ok(qtbot, w, "add_primitive", kind="cube", name="Once", dimensions="1, 1, 1")
    seen: list[str] = []
    w.controller.sig_call.connect(lambda r, _origin: seen.append(r.args.get("name")))
    with qtbot.waitSignal(w.controller.sig_call, timeout=30_000):  # sent again: it fails
        qtbot.mouseClick(w.palette.send_button, Qt.MouseButton.LeftButton)
    assert not w.palette.send_button.hasFocus()
    qtbot.keyClick(QApplication.focusWidget() or w, Qt.Key.Key_Space)  # re-sends nothing
    with qtbot.waitSignal(w.controller.sig_call, timeout=30_000):  # queued after any re-send
        w.controller.send("add_primitive", {"kind": "cube", "name": "Last", "dimensions": [1, 1, 1]})
    assert seen == ["Once", "Last"]
    blank = QSettings(str(tmp_path / "blank.ini"), QSettings.Format.IniFormat)
    dock = AgentDock(w.controller, blank)
    assert dock.policy.currentText() == "hf" and dock.request().policy == f"hf:{BASE_NAME}"
    blank.setValue("server/endpoint", "http://127.0.0.1:8000")
    assert AgentDock(w.controller, blank).policy.currentText() == "openai"
    dock.deleteLater()
