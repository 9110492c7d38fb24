"""Adapters shipped with Modelwright (assets/agents, agents/models/shipped.py): shipping one from
an adapter folder or a pipeline run pins its files and measured table; the registry lists it on
the packaged base with its report; the Local agent's default is it; a changed, missing or
added file is refused in one line naming it (models show, run --policy hf) before any model
loads. No model runs here: the adapters are small safetensors files written with numpy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from agents.models.registry import BASE_NAME, list_adapters
from agents.models.shipped import (
    ENV_VAR,
    capability,
    default_shipped,
    list_shipped,
    ship,
    shipped_at,
    verify,
)
from tools.cli.exits import UserError

REPO = Path(__file__).resolve().parents[1]
TOOLS = ["add_primitive", "set_material", "delete", "transform"]
STAGES = {"untrained": {"episodes": 60, "valid_call_rate": 0.0, "success_rate": 0.0,
                        "mean_reward": -0.085},
          "sft": {"episodes": 60, "valid_call_rate": 0.983, "success_rate": 0.817,
                  "mean_reward": 0.936},
          "grpo": {"episodes": 60, "valid_call_rate": 1.0, "success_rate": 0.967,
                   "mean_reward": 0.987, "success_rate_ci95": [0.89, 0.99]}}
HELD = {"split": "test", "families": ["primitive_placement", "materials", "scene_editing"],
        "levels": [1]}


def adapter(folder: Path, base: str = f"/home/someone/.local/share/modelwright/models/{BASE_NAME}"
            ) -> Path:
    """A structurally sound LoRA adapter folder as PEFT writes one (tiny weights)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text(json.dumps({
        "base_model_name_or_path": base, "peft_type": "LORA", "r": 2, "lora_alpha": 4,
        "target_modules": ["q_proj"], "task_type": "CAUSAL_LM"}))
    rng = np.random.default_rng(0)
    save_file({"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight":
               rng.standard_normal((2, 8)).astype(np.float32)},
              str(folder / "adapter_model.safetensors"))
    return folder


def pipeline_run(root: Path) -> Path:
    """The layout `modelwright train pipeline` leaves: OUT/{sft,grpo}/adapter, the stages'
    config.yaml (the config as run, with its `tools:`), OUT/report.json."""
    for stage in ("sft", "grpo"):
        adapter(root / stage / "adapter")
        (root / stage / "config.yaml").write_text(json.dumps({"kind": "pipeline", "tools": TOOLS}))
    (root / "report.json").write_text(json.dumps({"held_out": HELD, "stages": STAGES}))
    return root


@pytest.fixture
def agents_dir(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "agents"
    monkeypatch.setenv(ENV_VAR, str(root))
    return root


def test_a_pipeline_run_ships_its_grpo_adapter_pinned_with_its_table(tmp_path, agents_dir):
    run = pipeline_run(tmp_path / "run")
    shipped = ship(run, None, "smollm2-level1")
    folder = agents_dir / "smollm2-level1"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert sorted(manifest["files"]) == ["adapter_config.json", "adapter_model.safetensors",
                                         "report.json"]
    assert manifest["base"] == BASE_NAME and manifest["tools"] == TOOLS
    assert manifest["source"]["adapter"] == str((run / "grpo" / "adapter").resolve())
    measured = manifest["measured"]
    assert measured["stage"] == "grpo" and measured["success_rate"] == 0.967
    assert [r["stage"] for r in measured["table"]] == ["untrained", "sft", "grpo"]
    # the base is named by registry name, not the trainer's own folder
    config = json.loads((folder / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == BASE_NAME
    assert (agents_dir / "DEFAULT").read_text().strip() == "smollm2-level1"
    assert shipped.default and default_shipped() == shipped
    assert verify(folder)["name"] == "smollm2-level1"
    assert shipped.can_do() == ("one-call edits: add a primitive, set a material, delete, move; "
                                "~97 % of its 60 test tasks solved (primitive_placement, "
                                "materials, scene_editing, level 1)")


def test_an_adapter_folder_and_its_report_ship_with_the_stage_of_its_run(tmp_path, agents_dir):
    run = pipeline_run(tmp_path / "run")
    shipped = ship(run / "sft" / "adapter", run / "report.json", "sft-one", make_default=False)
    assert shipped.measured["stage"] == "sft" and shipped.measured["success_rate"] == 0.817
    assert shipped.tools == TOOLS and not shipped.default and default_shipped() is None
    assert shipped_at("sft-one") == shipped and shipped_at(str(agents_dir / "sft-one")) == shipped
    eval_report = tmp_path / "eval.json"  # `modelwright eval --json`: an overall and families
    eval_report.write_text(json.dumps({"overall": {"episodes": 20, "success_rate": 0.5,
                                                   "mean_reward": 0.4},
                                       "families": {"materials": {}}}))
    other = ship(adapter(tmp_path / "mine"), eval_report, "mine", tools=["set_material"])
    assert other.measured["success_rate"] == 0.5 and other.tools == ["set_material"]
    assert default_shipped().name == "mine"  # shipped last, made the default


def test_the_registry_lists_it_on_the_packaged_base_with_its_report(tmp_path, agents_dir):
    ship(pipeline_run(tmp_path / "run"), None, "smollm2-level1")
    entry = next(a for a in list_adapters(tmp_path / "data") if a.name == "smollm2-level1")
    assert entry.base_name == BASE_NAME and entry.shipped and entry.default
    assert entry.report == str(agents_dir / "smollm2-level1" / "report.json")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    listed = subprocess.run([sys.executable, "-m", "studio.cli", "models", "list", "--json",
                             "--data-dir", str(tmp_path / "data")],
                            capture_output=True, text=True, env=env, timeout=120)
    assert listed.returncode == 0, listed.stderr
    (row,) = [a for a in json.loads(listed.stdout)["adapters"] if a["name"] == "smollm2-level1"]
    assert row["base_name"] == BASE_NAME and row["shipped"] and row["default"]
    assert row["report"].endswith("smollm2-level1/report.json")
    assert row["tools"] == TOOLS
    text = subprocess.run([sys.executable, "-m", "studio.cli", "models", "list", "--data-dir",
                           str(tmp_path / "data")], capture_output=True, text=True, env=env,
                          timeout=120).stdout
    under_base = text.split(BASE_NAME, 1)[1]
    assert "adapter smollm2-level1" in under_base and "shipped, the Local agent's default" in text
    shown = subprocess.run([sys.executable, "-m", "studio.cli", "models", "show",
                            "smollm2-level1", "--json", "--data-dir", str(tmp_path / "data")],
                           capture_output=True, text=True, env=env, timeout=120)
    assert json.loads(shown.stdout)["measured"]["stage"] == "grpo"


@pytest.mark.parametrize("damage", ["changed", "missing", "added"])
def test_a_tampered_shipped_file_is_refused_in_one_line_naming_it(tmp_path, agents_dir, damage):
    ship(pipeline_run(tmp_path / "run"), None, "smollm2-level1")
    folder = agents_dir / "smollm2-level1"
    named = {"changed": folder / "adapter_model.safetensors",
             "missing": folder / "report.json", "added": folder / "adapter_model.bin"}[damage]
    if damage == "changed":  # same size, one byte different: still a sound safetensors file
        data = bytearray(named.read_bytes())
        data[-1] ^= 0x01
        named.write_bytes(bytes(data))
    elif damage == "missing":
        named.unlink()
    else:
        named.write_bytes(b"\0" * 64)
    with pytest.raises(UserError) as refused:
        verify(folder)
    assert str(named) in str(refused.value) and "\n" not in str(refused.value)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    shown = subprocess.run([sys.executable, "-m", "studio.cli", "models", "show",
                            "smollm2-level1", "--data-dir", str(tmp_path / "data")],
                           capture_output=True, text=True, env=env, timeout=120)
    (line,) = shown.stderr.strip().splitlines()
    assert shown.returncode == 2 and line.startswith("error: ") and str(named) in line


def test_run_with_a_tampered_default_adapter_stops_in_one_line_before_any_model(tmp_path,
                                                                               agents_dir):
    """`run --policy hf` with no model is the shipped adapter on the base: its files are
    checked before the base is resolved (an empty data dir: nothing is built) or workers start."""
    ship(pipeline_run(tmp_path / "run"), None, "smollm2-level1")
    weights = agents_dir / "smollm2-level1" / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-4] + b"\0\0\0\0")
    env = {**os.environ, "PYTHONPATH": str(REPO), "MODELWRIGHT_DATA_DIR": str(tmp_path / "d")}
    proc = subprocess.run([sys.executable, "-m", "studio.cli", "run", "--task",
                           "primitive_placement:1:0", "--policy", "hf", "--no-record"],
                          capture_output=True, text=True, env=env, timeout=300)
    (line,) = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert line.startswith("error: ") and str(weights) in line and "pinned" in line
    assert not (tmp_path / "d" / "models").exists()  # the base was not built for it


def test_a_shipped_adapter_on_another_model_is_refused_in_one_line(tmp_path, agents_dir):
    ship(pipeline_run(tmp_path / "run"), None, "smollm2-level1")
    other = tmp_path / "other-model"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "llama"}))
    env = {**os.environ, "PYTHONPATH": str(REPO), "MODELWRIGHT_DATA_DIR": str(tmp_path / "d")}
    proc = subprocess.run([sys.executable, "-m", "studio.cli", "run", "--task",
                           "primitive_placement:1:0", "--policy", "hf", "--model", str(other),
                           "--adapter", "smollm2-level1", "--no-record"],
                          capture_output=True, text=True, env=env, timeout=300)
    (line,) = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and line == (
        f"error: the shipped adapter smollm2-level1 belongs to {BASE_NAME}, not {other}; "
        f"leave out --model (or name {BASE_NAME})"), proc.stderr


def test_shipping_bad_input_is_one_line(tmp_path, agents_dir):
    script = [sys.executable, str(REPO / "scripts" / "ship_adapter.py")]
    env = {**os.environ, ENV_VAR: str(agents_dir)}
    helped = subprocess.run([*script, "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert helped.returncode == 0 and "--name" in helped.stdout and "--stage" in helped.stdout
    (tmp_path / "empty").mkdir()
    cases = [([str(tmp_path / "nowhere"), "--name", "x"], "no folder at"),
             ([str(tmp_path / "empty"), "--name", "x"], "neither an adapter folder"),
             ([str(adapter(tmp_path / "lone")), "--name", "x"], "no report"),
             ([str(pipeline_run(tmp_path / "run")), "--name", "a/b"], "is not a name")]
    for args, words in cases:
        proc = subprocess.run([*script, *args], capture_output=True, text=True, env=env,
                              timeout=60)
        (line,) = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and words in line, (args, proc.stderr)
    assert list_shipped() == []
    ok = subprocess.run([*script, str(tmp_path / "run"), "--name", "lvl1"], capture_output=True,
                        text=True, env=env, timeout=60)
    assert ok.returncode == 0 and "shipped lvl1 on smollm2-135m-instruct" in ok.stdout


def test_capability_words():
    assert capability(TOOLS, {}) == "edits: add a primitive, set a material, delete, move"
    assert capability(["cad_box"], {"levels": [1], "success_rate": 0.5, "episodes": 4}) == (
        "one-call edits: make a CAD box; ~50 % of its 4 test tasks solved")


def test_a_run_whose_prompts_showed_each_familys_toolbox_ships_the_goal_rule(tmp_path, agents_dir):
    run = pipeline_run(tmp_path / "run")
    for stage in ("sft", "grpo"):  # the curriculum's config: no `tools:` list
        (run / stage / "config.yaml").write_text(json.dumps({"kind": "pipeline"}))
    with pytest.raises(UserError, match="no `tools:` list"):
        ship(run, None, "x")
    cad = ["cad_box", "cad_hole"]
    rule = {"tools": TOOLS, "toolboxes": [{"name": "cad", "words": ["hole", "plate"],
                                           "tools": cad}]}
    shipped = ship(run, None, "smollm2-curriculum", per_family=rule)
    manifest = json.loads((agents_dir / "smollm2-curriculum" / "manifest.json").read_text())
    assert manifest["tools"] == TOOLS and manifest["toolboxes"] == rule["toolboxes"]
    assert shipped.tools == TOOLS and shipped.toolboxes == rule["toolboxes"]
    assert shipped.tools_for("Drill a 6 mm hole in 'Base'") == cad
    assert shipped.tools_for("Add a cube named 'Plate'") == TOOLS  # a name, not a word
    assert "(cad goals: its cad tools)" in shipped.can_do()
    kept = ship(pipeline_run(tmp_path / "run2"), None, "lvl1", per_family=rule)
    assert kept.tools == TOOLS and kept.toolboxes == []  # a run's own list wins
