"""The shipped adapter drives the studio's Local agent in a real window (Xvfb): a person types a
one-step goal into the Agent dock and presses Run with nothing else chosen, and the scene
changes. The dock said beforehand which shipped agent it is and what it can do.

It runs against the shipped-adapter folder (assets/agents, agents/models/shipped.py). With the
real trained adapter shipped there (scripts/ship_adapter.py; assets/agents/DEFAULT names it)
the test uses it as it is. Until then the fixture teaches a LoRA adapter on the packaged base
to answer this goal (tests/support/teach_adapter.py), ships it with the same code into a
temporary folder and points MODELWRIGHT_AGENTS_DIR at it. Real workers, the real base, a real
X server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from studio_support import run_on_display, xvfb_display  # noqa: F401  (the fixture)

from agents.models.registry import BASE_NAME
from agents.models.shipped import ENV_VAR, agents_dir, default_shipped, ship

# The goal a new user typed in issue #50, as typed: no size (1 m), a bare position, a colour.
GOAL = "add a red cube named Box at 1, 0, 0.5"
CALL = ('<tool_call>\n{"name": "add_primitive", "arguments": {"kind": "cube", "name": "Box", '
        '"dimensions": [1, 1, 1], "location": [1, 0, 0.5]}}\n</tool_call>')
TOOLS = ["add_primitive", "set_material", "delete", "transform"]


@pytest.fixture(scope="module")
def shipped_env(base_data_dir, worker_pool, tmp_path_factory) -> dict:
    """The environment of the studio child: the real shipped adapter when one is shipped, else
    one taught here and shipped into a temporary folder."""
    real = default_shipped(agents_dir())
    if real is not None:
        return {}
    import torch
    from support.teach_adapter import capture_turns, teach_adapter

    from tools import ToolSession

    root = tmp_path_factory.mktemp("shipped")
    with ToolSession(worker_pool, deadline_s=120) as session:
        session.reset()
        lessons = capture_turns(session, GOAL, [CALL, "Done."], TOOLS)
    run = root / "run"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a loaded 2-core machine: two threads spin against each other
    try:
        teach_adapter(base_data_dir / "models" / BASE_NAME, run / "sft" / "adapter", lessons)
    finally:
        torch.set_num_threads(threads)
    (run / "sft" / "config.yaml").write_text(json.dumps({"tools": TOOLS}))
    # what measured it: the lessons it was taught, as a pipeline report of one stage
    (run / "report.json").write_text(json.dumps({
        "held_out": {"split": "taught", "families": ["this test's goal"], "levels": [1]},
        "stages": {"sft": {"episodes": 1, "success_rate": 1.0, "valid_call_rate": 1.0,
                           "mean_reward": 1.0}}}))
    ship(run / "sft" / "adapter", None, "test-agent", dest=root / "agents")
    return {ENV_VAR: str(root / "agents")}


CHILD = r"""
import json, os, sys
from pathlib import Path
from PySide6.QtCore import Qt, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from studio.app import StudioOptions, build

root, base, goal = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
link = root / "data" / "models" / base.name  # the packaged base, as if built in this data dir
link.parent.mkdir(parents=True, exist_ok=True)
if not link.exists():
    link.symlink_to(base, target_is_directory=True)
app = QApplication(sys.argv[:1])
# unattended (no Save/Discard question when the window closes), at the scripted runs' size
options = StudioOptions(data_dir=str(root / "data"), settings_file=str(root / "settings.ini"),
                        exit_when_done=True)
window, controller = build(options)
window.show()
dock = window.agent
out = {}

def finished(summary):
    out["summary"] = {k: summary.get(k) for k in ("status", "calls", "tool_errors", "error",
                                                   "model", "adapter", "policy")}
    out["objects"] = sorted(o["name"] for o in controller.scene.objects)
    out["box"] = next(({k: o.get(k) for k in ("location", "dimensions", "material")}
                       for o in controller.scene.objects if o["name"] == "Box"), None)
    out["steps"] = [dock.steps.item(i).text() for i in range(dock.steps.count())]
    print(json.dumps(out), flush=True)
    window.close()
    app.exit(0)

def go():
    if not controller.ready:
        QTimer.singleShot(200, go)
        return
    out["policy"] = dock.policy.currentText()
    out["fields"] = [dock.model.text(), dock.adapter.text()]
    out["about"] = dock.about.text()
    out["objects_before"] = sorted(o["name"] for o in controller.scene.objects)
    dock.approval.setChecked(False)
    dock.goal.setFocus()
    QTest.keyClicks(dock.goal, goal)  # typed, as a person types it
    dock.sig_finished.connect(finished)
    QTest.mouseClick(dock.run_button, Qt.MouseButton.LeftButton)

QTimer.singleShot(0, go)
sys.exit(app.exec())
"""


@pytest.mark.timeout(1500)  # a loaded 2-core machine: teaching, a studio, the base's turns
def test_a_typed_one_step_goal_changes_the_scene_with_the_shipped_agent(
        xvfb_display, shipped_env, base_data_dir, tmp_path, monkeypatch):  # noqa: F811
    for key, value in shipped_env.items():
        monkeypatch.setenv(key, value)
    shipped = default_shipped()
    assert shipped is not None and shipped.base == BASE_NAME
    proc, out = run_on_display(CHILD, xvfb_display, str(tmp_path), str(base_data_dir / "models" /
                                                                        BASE_NAME), GOAL,
                               timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # nothing chosen: the default local agent, which the dock named before the run
    assert out["policy"] == "hf" and out["fields"] == ["", ""]
    assert out["about"].startswith(f"Local agent {shipped.name} (shipped, on {BASE_NAME}) can do")
    summary = out["summary"]
    assert summary["status"] != "fatal" and summary["calls"] >= 1, (summary, out["steps"])
    assert summary["adapter"] == shipped.path and summary["policy"] == f"hf:{BASE_NAME}"
    assert out["objects_before"] == [] and "Box" in out["objects"], out
    # where the goal put it, at the size it left unsaid (the colour, a second call, is not
    # asked of it: docs/TRAINING.md says what the shipped agent does with colour words)
    assert all(abs(a - b) <= 0.05 for a, b in zip(out["box"]["location"], [1, 0, 0.5], strict=True)), out["box"]
    assert all(abs(a - 1) <= 0.05 for a in out["box"]["dimensions"]), out["box"]
    assert any(t.startswith("call add_primitive") for t in out["steps"]), out["steps"]
    assert not any(t.startswith("No tool call was made") for t in out["steps"])


def test_the_fixture_ships_what_the_script_ships(shipped_env):
    """The adapter under test is one the shipping code wrote and pinned: the repository's
    default agent, every file the one its manifest pins, or else the one taught here."""
    from agents.models.shipped import verify

    if not shipped_env:  # the real shipped adapter is the one the studio child ran
        real = default_shipped(agents_dir())
        manifest = verify(real.path)
        assert (manifest["name"], manifest["base"]) == (real.name, BASE_NAME)
        assert manifest["tools"] == real.tools and manifest["files"]
        return
    assert verify(Path(shipped_env[ENV_VAR]) / "test-agent")["tools"] == TOOLS
