"""A fine-tune from the studio works for a newcomer (offscreen Qt, real runtime, real training
subprocesses): the shipped studio config runs offline in a fresh folder; demonstrations recorded in the
studio become an SFT run in a few clicks and its adapter drives the Agent dock; eval gets its
arguments; a failed run shows its real error; the log can be made tall."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

os.environ["QT_QPA_PLATFORM"] = "offscreen"

import pytest  # noqa: E402
import yaml  # noqa: E402
from studio_support import send_ok, studio_window  # noqa: E402

from tools import ToolSession  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "assets" / "configs" / "sft-studio-demos.yaml"
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def studio(qapp, worker_pool, tmp_path_factory, request):
    with studio_window(worker_pool, tmp_path_factory.mktemp("finetune"), request) as window:
        yield window


def launch_and_wait(qtbot, dock, timeout_ms=600_000) -> int:
    with qtbot.waitSignal(dock.sig_stopped, timeout=timeout_ms) as stopped:
        dock.launch()
    return stopped.args[0]


def test_demonstrations_to_an_adapter_that_drives_the_agent(studio, qtbot, tmp_path):
    w, c, dock = studio, studio.controller, studio.training
    c.new_scene()
    qtbot.waitUntil(lambda: not c.scene.objects, timeout=20_000)
    assert not dock.from_demonstrations()  # nothing recorded yet: said, nothing written
    send_ok(qtbot, w, "add_primitive", kind="cube", name="Box", dimensions="1, 1, 1")
    send_ok(qtbot, w, "set_material", name="Box", color="#D03030")
    c.finish_demonstration(check=False)
    dock.out.setText(str(tmp_path / "runs"))
    assert dock.from_demonstrations()  # click 1
    config = Path(dock.config.text())
    assert dock.kind.currentText() == "sft" and config.is_file()
    raw = yaml.safe_load(config.read_text())
    assert raw["model"]["build_tiny"] and raw["sft"]["filter"] == {"success_only": False}
    raw["sft"]["max_steps"] = 4  # the test's budget
    config.write_text(yaml.safe_dump(raw))
    assert launch_and_wait(qtbot, dock) == 0, dock.log.toPlainText()[-2000:]  # click 2
    assert (Path(dock.out.text()) / "adapter" / "adapter_config.json").is_file()
    assert dock.use_in_agent()  # click 3
    assert w.agent.policy.currentText() == "hf" and w.agent.adapter.text().endswith("adapter")
    from studio.agent.runner import AgentRequest

    request = w.agent.request()
    assert request.policy.startswith("hf:") and request.options["adapter"]
    request.goal, request.max_steps = "a red cube", 1
    with qtbot.waitSignal(w.agent.sig_finished, timeout=300_000) as done:
        w.agent.run(AgentRequest(**{**request.__dict__}))
    assert done.args[0]["status"] not in ("fatal", "refused"), done.args[0]


def test_eval_gets_its_arguments_and_a_failure_shows_its_error(studio, qtbot, tmp_path):
    dock = studio.training
    dock.kind.setCurrentText("eval")
    dock.out.setText(str(tmp_path / "eval"))
    dock.extra.setText("--policy oracle --per-family 1 --families composition --split validation")
    assert launch_and_wait(qtbot, dock) == 0, dock.log.toPlainText()[-2000:]
    report = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert report["overall"]["episodes"] == 1 if "overall" in report else report
    bad = tmp_path / "bad.yaml"
    bad.write_text(SHIPPED.read_text().replace("build_tiny: true", "path: ./no/such/model"))
    dock.kind.setCurrentText("sft")
    dock.config.setText(str(bad))
    dock.out.setText(str(tmp_path / "bad-run"))
    dock.extra.clear()
    assert launch_and_wait(qtbot, dock, 120_000) == 2
    assert dock.error.isVisible() or not dock.isVisible()
    assert "model.path" in dock.error.text() and "no model folder" in dock.error.text()
    assert "Traceback" not in dock.log.toPlainText()
    assert dock.log.maximumHeight() > 10_000  # no fixed two-line box: the splitter sizes it


def test_the_shipped_studio_config_runs_offline_in_a_fresh_folder(tmp_path, worker_pool):
    """A fresh folder, no network: export demonstrations where the config expects them, then
    `modelwright train sft` with assets/configs/sft-studio-demos.yaml (its step budget cut)
    trains the tiny model."""
    from agents.start_state import StartState
    from agents.store import Store
    from agents.store.export import export_parquet
    from agents.turns import HumanTurns

    with Store(tmp_path / "data", durable=False) as store, ToolSession(worker_pool) as session:
        session.reset()

        def begin(**meta):
            return store.begin_episode(source="human", **meta)

        turns = HumanTurns.begin(session, begin, "a red box", StartState(keep=True))
        turns.call(session, "add_primitive", {"kind": "cube", "name": "Box", "dimensions": [1, 1, 1]})
        turns.call(session, "set_material", {"name": "Box", "color": "#D03030"})
        turns.recorder.finish(success=True, reward=1.0, final_message="Done.")
        export_parquet(store, tmp_path / "runs" / "studio-demos")
    # The shipped file with one change, the step budget: its 100 steps are ~1.4 s each on an
    # idle 2-core machine (each example is ~5k tokens with its screenshots), and steps 21-100
    # run no code that steps 1-20 (one checkpoint at save_steps 20 included) do not.
    raw = yaml.safe_load(SHIPPED.read_text())
    assert raw["sft"]["max_steps"] == 100 and raw["run"]["save_steps"] == 20
    raw["sft"]["max_steps"] = 20
    config = tmp_path / SHIPPED.name
    config.write_text(yaml.safe_dump(raw))
    p = subprocess.run([sys.executable, "-m", "studio.cli", "train", "sft", "--config",
                        str(config), "--out", str(tmp_path / "runs" / "studio-sft")],
                       cwd=tmp_path, env=OFFLINE, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    result = json.loads(p.stdout.strip().splitlines()[-1])
    assert result["steps"] == 20 and Path(result["adapter"]).is_dir()
    assert (tmp_path / "runs" / "studio-sft" / "checkpoint-20").is_dir()
    assert (tmp_path / "runs" / "studio-sft" / "base-model" / "config.json").is_file()
