"""A fine-tune from the studio works for a newcomer (offscreen Qt, real runtime, real training
subprocesses, the real packaged base): the shipped studio config runs offline in a fresh folder;
demonstrations recorded in the studio become an SFT run of the base in a few clicks and its adapter,
on that base, drives the Agent dock; eval gets its arguments; a failed run shows its real error;
the log can be made tall."""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ["QT_QPA_PLATFORM"] = "offscreen"

import pytest  # noqa: E402
import yaml  # noqa: E402
from studio_support import send_ok, studio_window  # noqa: E402

from tools import ToolSession  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "assets" / "configs" / "sft-studio-demos.yaml"
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
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


def with_base(data_dir: Path, base_data_dir: Path) -> None:
    """`data_dir` holding the packaged base as if built there (a link to the session's copy:
    the conversion is ~10-20 s of a loaded CPU)."""
    from agents.models.registry import BASE_NAME

    link = data_dir / "models" / BASE_NAME
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(base_data_dir / "models" / BASE_NAME, target_is_directory=True)


def test_demonstrations_to_an_adapter_that_drives_the_agent(studio, qtbot, tmp_path, base_data_dir,
                                                           monkeypatch, one_torch_thread):
    from agents.models.registry import BASE_NAME

    w, c, dock = studio, studio.controller, studio.training
    with_base(Path(c.data_dir), base_data_dir)
    # The studio's own data dir must reach the training process and the agent's model lookup:
    # the environment's points at a file, where any lookup fails.
    (tmp_path / "not-a-dir").write_text("")
    monkeypatch.setenv("MODELWRIGHT_DATA_DIR", str(tmp_path / "not-a-dir"))
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
    assert raw["model"]["path"] == BASE_NAME and raw["sft"]["filter"] == {"success_only": False}
    # The test's budget, 1 step with a checkpoint at step 1: the code the shipped 80 steps (a
    # checkpoint every 20) run. A step of this demonstration's ~3,200 tokens is ~55 s of the real
    # base on one thread here (a second step added nothing the test reads).
    raw["sft"]["max_steps"], raw["run"]["save_steps"] = 1, 1
    config.write_text(yaml.safe_dump(raw))
    assert launch_and_wait(qtbot, dock) == 0, dock.log.toPlainText()[-2000:]  # click 2
    adapter = Path(dock.out.text()) / "adapter"
    assert (Path(dock.out.text()) / "checkpoint-1").is_dir()
    written = json.loads((adapter / "adapter_config.json").read_text())
    assert written["r"] == 16 and set(written["target_modules"]) == set(TARGETS)
    trained_on = written["base_model_name_or_path"]
    base = Path(c.data_dir) / "models" / BASE_NAME
    assert Path(trained_on).resolve() == base.resolve()  # the base, in the studio's data dir
    assert dock.use_in_agent()  # click 3
    assert w.agent.policy.currentText() == "hf" and w.agent.model.text() == BASE_NAME
    assert Path(w.agent.adapter.text()) == adapter
    listed = [w.agent.local.itemData(i) for i in range(w.agent.local.count())]
    assert {"model": BASE_NAME, "adapter": str(adapter.resolve())} in listed  # under its base
    from studio.agent.runner import AgentRequest

    request = w.agent.request()
    assert request.policy == f"hf:{BASE_NAME}" and request.options == {"adapter": str(adapter)}
    request.goal, request.max_steps = "a red cube", 1
    request.options = {**request.options, "max_tokens": 24}  # one short turn is the point
    with qtbot.waitSignal(w.agent.sig_finished, timeout=300_000) as done:
        w.agent.run(AgentRequest(**{**request.__dict__}))
    summary = done.args[0]
    assert summary["status"] not in ("fatal", "refused"), summary
    # what the run loaded: the base from the studio's data dir with the run's adapter on it
    assert Path(summary["model"]) == base and summary["adapter"] == str(adapter)
    assert summary["policy"] == f"hf:{BASE_NAME}" and summary["tokens_out"] > 0
    assert c.store().episode(summary["episode_id"]).policy == f"hf:{BASE_NAME}"
    # the model's turn is in the steps list, its prose shortened there (the record keeps it all)
    shown = [w.agent.steps.item(i).text() for i in range(w.agent.steps.count())]
    from studio.agent.dock import REPLY_CHARS

    turn = [t for t in shown if t.startswith(("model: ", "call "))]
    assert turn and all(len(t) <= len("model: ") + REPLY_CHARS + 1 for t in turn), shown


def test_eval_gets_its_arguments_and_a_failure_shows_its_error(studio, qtbot, tmp_path):
    dock = studio.training
    dock.kind.setCurrentText("eval")
    dock.out.setText(str(tmp_path / "eval"))
    dock.extra.setText("--policy oracle --per-family 1 --families composition --split validation")
    assert launch_and_wait(qtbot, dock) == 0, dock.log.toPlainText()[-2000:]
    report = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert report["overall"]["episodes"] == 1 if "overall" in report else report
    bad = tmp_path / "bad.yaml"
    bad.write_text(SHIPPED.read_text().replace("path: smollm2-135m-instruct", "path: ./no/such/model"))
    dock.kind.setCurrentText("sft")
    dock.config.setText(str(bad))
    dock.out.setText(str(tmp_path / "bad-run"))
    dock.extra.clear()
    assert launch_and_wait(qtbot, dock, 120_000) == 2
    assert dock.error.isVisible() or not dock.isVisible()
    assert "model.path" in dock.error.text() and "no model folder" in dock.error.text()
    assert "Traceback" not in dock.log.toPlainText()
    assert dock.log.maximumHeight() > 10_000  # no fixed two-line box: the splitter sizes it


def test_the_shipped_studio_config_loads_offline_in_a_fresh_folder(tmp_path, worker_pool,
                                                                  base_data_dir, monkeypatch):
    """A fresh folder, no network: demonstrations exported where the shipped config expects them
    are what `modelwright train sft --config assets/configs/sft-studio-demos.yaml` would read,
    and its model resolves to the packaged base. (Training itself on a copy of this file, as the
    studio writes it, is the test above: one real SFT run of the base covers both.)"""
    from agents.loop.start_state import StartState
    from agents.loop.turns import HumanTurns
    from agents.store import Store
    from agents.store.export import export_parquet
    from training.cli.train import _load
    from training.sft.data import load_conversations

    with Store(tmp_path / "data", durable=False) as store, ToolSession(worker_pool) as session:
        session.reset()

        def begin(**meta):
            return store.begin_episode(source="human", **meta)

        turns = HumanTurns.begin(session, begin, "a red box", StartState(keep=True))
        turns.call(session, "add_primitive", {"kind": "cube", "name": "Box", "dimensions": [1, 1, 1]})
        turns.call(session, "set_material", {"name": "Box", "color": "#D03030"})
        turns.recorder.finish(success=True, reward=1.0, final_message="Done.")
        export_parquet(store, tmp_path / "runs" / "studio-demos")
    for key, value in OFFLINE.items():
        if key != "PYTHONPATH":
            monkeypatch.setenv(key, value)
    monkeypatch.setenv("MODELWRIGHT_DATA_DIR", str(base_data_dir))  # where the base was built
    monkeypatch.chdir(tmp_path)
    cfg = _load(SHIPPED, "sft")  # what the command checks before anything slow starts
    assert cfg.model.path == "smollm2-135m-instruct" and cfg.model.dtype == "bfloat16"
    assert cfg.sft.max_steps == 80 and cfg.run.save_steps == 20
    assert cfg.lora.r == 16 and set(cfg.lora.target_modules) == set(TARGETS)
    rows = load_conversations(cfg.sft.data)  # the relative path, from the fresh folder
    assert len(rows) == 1 and "a red box" in json.dumps(rows[0]["messages"])
