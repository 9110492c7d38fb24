"""A fine-tune saves a usable adapter early and regularly (RUN/adapter-latest, training/runs.py):
every `run.adapter_every_steps` steps or `run.adapter_every_s` seconds, whichever comes first,
never at the last step (the final adapter is saved then); the registry lists it while a run has
no final adapter; the studio's Training dock names the newest one on "Use in agent" and puts it
in the Agent dock while the run still trains. Real TRL/PEFT on the tiny model, real training
subprocess, offscreen Qt."""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

from training.runs import LATEST, newest_adapter  # noqa: E402


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> Path:
    from test_training_sft import demo_rows

    from training.sft.demos import write_rows

    path = tmp_path_factory.mktemp("demos") / "demos.parquet"
    write_rows(demo_rows(6), path)
    return path


def sft_config(folder: Path, model: Path, demos: Path, steps: int, every_steps: int) -> Path:
    cfg = folder / "sft.yaml"
    cfg.write_text(
        f"kind: sft\nmodel: {{path: {model}}}\nlora: {{r: 4, alpha: 8}}\n"
        f"run: {{seed: 3, save_steps: 1000, report_to: [], adapter_every_steps: {every_steps}, "
        f"adapter_every_s: 0}}\n"
        f"sft: {{data: [{demos}], max_steps: {steps}, learning_rate: 1.0e-3}}\n")
    return cfg


def test_an_adapter_is_saved_before_the_last_step(tmp_path, tiny_model_dir, demos,
                                                  one_torch_thread):
    from peft import PeftModel
    from safetensors.torch import load_file

    from agents.policies.hf_policy import load_pretrained
    from training.sft.trainer import run_sft
    from training.train_config import load_config

    run = tmp_path / "run"
    result = run_sft(load_config(sft_config(tmp_path, tiny_model_dir, demos, steps=5,
                                            every_steps=2)), run)
    assert result.steps == 5
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    saved = [r["step"] for r in rows if r.get("adapter_saved") == LATEST]
    assert saved == [2, 4]  # every 2 steps, before the last (5: the final adapter)
    latest = run / LATEST
    assert json.loads((latest / "saved.json").read_text())["step"] == 4
    weights = load_file(str(latest / "adapter_model.safetensors"))
    assert any(float(t.abs().sum()) > 0 for k, t in weights.items() if "lora_B" in k)  # trained
    final = load_file(str(run / "adapter" / "adapter_model.safetensors"))
    assert any(not bool((weights[k] == final[k]).all()) for k in final)  # one more step since
    _, model = load_pretrained(str(tiny_model_dir), local_files_only=True)
    assert PeftModel.from_pretrained(model, str(latest)).peft_config  # usable as it is
    assert newest_adapter(run) == (run / "adapter", None)  # the final one, written last
    assert not list(run.glob(f".{LATEST}*"))  # no half-written folder left


def test_the_registry_lists_a_runs_newest_adapter_until_its_final_one(tmp_path):
    from agents.models.registry import list_adapters, remember_adapter

    run = tmp_path / "data" / "runs" / "studio-sft"
    (run / LATEST).mkdir(parents=True)
    (run / LATEST / "adapter_config.json").write_text(json.dumps({"r": 4}))
    (run / LATEST / "saved.json").write_text(json.dumps({"step": 10}))
    assert [(a.name, a.path) for a in list_adapters(tmp_path / "data")
            if not a.shipped] == [("studio-sft-latest", str(run / LATEST))]
    assert newest_adapter(run) == (run / LATEST, 10)
    (run / "adapter").mkdir()
    (run / "adapter" / "adapter_config.json").write_text(json.dumps({"r": 4}))
    assert [a.name for a in list_adapters(tmp_path / "data") if not a.shipped] == ["studio-sft"]
    elsewhere = tmp_path / "runs" / "mine" / LATEST  # a run folder outside the data dir
    elsewhere.mkdir(parents=True)
    (elsewhere / "adapter_config.json").write_text(json.dumps({"r": 4}))
    assert remember_adapter(elsewhere, tmp_path / "data").name == "mine-latest"


def test_use_in_agent_takes_the_newest_adapter_while_the_run_trains(
        qapp, qtbot, worker_pool, tiny_model_dir, demos, tmp_path, request):
    from studio_support import studio_window

    with studio_window(worker_pool, tmp_path / "studio", request) as window:
        dock = window.training
        assert not dock.use_in_agent()  # nothing saved yet: said, nothing changed
        dock.kind.setCurrentText("sft")
        # far more steps than the test waits for: it acts while the run trains, then stops it
        dock.config.setText(str(sft_config(tmp_path, tiny_model_dir, demos, steps=100_000,
                                           every_steps=2)))
        out = tmp_path / "run"
        dock.out.setText(str(out))
        dock.launch()
        qtbot.waitUntil(lambda: "(step " in dock.use_button.text(), timeout=600_000)
        assert dock.running, dock.log.toPlainText()[-2000:]
        step = int(dock.use_button.text().split("(step ")[1].rstrip(")"))
        assert step >= 2 and step % 2 == 0
        assert dock.use_in_agent()
        agent = window.agent
        assert agent.policy.currentText() == "hf" and agent.model.text() == str(tiny_model_dir)
        assert Path(agent.adapter.text()) == out / LATEST
        assert (out / LATEST / "adapter_config.json").is_file()
        assert not (out / "adapter").exists()  # the run has not ended
        listed = [agent.local.itemData(i) for i in range(agent.local.count())]
        assert any(d and Path(d["adapter"] or "/").resolve() == (out / LATEST).resolve()
                   for d in listed)  # registered: the Local list names it
        with qtbot.waitSignal(dock.sig_stopped, timeout=120_000):
            dock.stop()
