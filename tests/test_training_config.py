"""Training configs: every shipped YAML parses, bad ones name the field, launch lines render."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.launch import render, train_command, vllm_server_command
from training.train_config import ConfigError, load_config

REAL_BASE = Path(__file__).resolve().parents[1] / "configs" / "pipeline-smollm2-cpu.yaml"

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_parse(path):
    cfg = load_config(path)
    assert cfg.kind in ("sft", "grpo", "pipeline")
    assert cfg.name == path.stem


def _write(tmp_path, text: str) -> Path:
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    return p


BASE = "kind: grpo\nmodel: {path: /m}\ngrpo:\n"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (BASE + "  num_generations: 1\n", "grpo.num_generations"),
        (BASE + "  learning_rate: fast\n", "grpo.learning_rate"),
        (BASE + "  loss_typ: dapo\n", "grpo.loss_typ"),
        (BASE + "  loss_type: ppo\n", "grpo.loss_type"),
        (BASE + "  tasks: {levels: one}\n", "grpo.tasks.levels"),
        ("kind: grpo\nmodel: {path: /m}\nlora: {r: 0}\ngrpo: {}\n", "lora.r"),
        (
            "kind: sft\nmodel: {path: /m}\nsft: {data: [a.parquet], max_steps: -3}\n",
            "sft.max_steps",
        ),
        ("kind: sft\nmodel: {}\nsft: {data: [a.parquet]}\n", "model"),
        ("kind: dpo\nmodel: {path: /m}\n", "kind"),
    ],
)
def test_a_bad_config_names_the_field(tmp_path, body, field):
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, body))
    assert f"{field}:" in str(err.value), str(err.value)
    assert "bad.yaml" in str(err.value)


def test_group_size_must_divide_the_batch(tmp_path):
    body = BASE + "  per_device_train_batch_size: 6\n  num_generations: 4\n"
    with pytest.raises(ConfigError, match="multiple of num_generations"):
        load_config(_write(tmp_path, body))


def test_a_greedy_member_is_refused_in_server_mode(tmp_path):
    body = BASE + "  greedy_member: true\n  generation: server\n"
    with pytest.raises(ConfigError, match="greedy_member: in-process generation only"):
        load_config(_write(tmp_path, body))
    from training.train_config import GRPOSpec

    assert GRPOSpec(greedy_member=True).greedy_member  # in-process: allowed


def test_gpu_grpo_config_renders_the_rollout_server_and_accelerate_lines():
    cfg = load_config(CONFIGS / "grpo-qwen3-vl-8b-vllm.yaml")
    server = render(vllm_server_command(cfg, tensor_parallel=1, gpus="7"))
    assert server.startswith(
        "env CUDA_VISIBLE_DEVICES=7 modelwright serve --model Qwen/Qwen3-VL-8B-Instruct"
    )
    assert "--port 8000" in server and "--lora" in server and "--max-lora-rank 64" in server
    train = render(train_command(cfg, "configs/grpo-qwen3-vl-8b-vllm.yaml"))
    assert train.startswith("accelerate launch --config_file configs/accelerate/fsdp-8gpu.yaml")
    assert "--num_processes 7" in train and train.endswith(
        "-m studio.cli train grpo --config configs/grpo-qwen3-vl-8b-vllm.yaml --resume"
    )
    from training.rl.grpo import grpo_args

    args = grpo_args(cfg.grpo, cfg.run, Path("/tmp/unused-run"), use_cpu=True)
    assert (args.use_vllm, args.num_generations, args.loss_type, args.epsilon_high) == (
        False, 8, "dapo", 0.28)  # fmt: skip
    assert (CONFIGS.parent / cfg.accelerate.config_file).is_file()


def test_a_tensor_parallel_rollout_server_is_refused_not_dropped():
    """`modelwright serve` has no tensor-parallel option: asking for one is an error that
    says so, never a line that silently runs vLLM on one GPU."""
    cfg = load_config(CONFIGS / "grpo-qwen3-vl-8b-vllm.yaml")
    with pytest.raises(ValueError, match="--tensor-parallel 2: .*no tensor-parallel option"):
        vllm_server_command(cfg, tensor_parallel=2, gpus="6,7")


def test_grpo_dry_run_prints_the_server_mode_plan():
    """`train grpo --dry-run` validates the GPU config on this CPU machine, starts nothing."""
    import json
    import subprocess
    import sys

    root = CONFIGS.parent
    out = subprocess.run(
        [sys.executable, "-m", "studio.cli", "train", "grpo", "--dry-run",
         "--config", str(CONFIGS / "grpo-qwen3-vl-8b-vllm.yaml")],
        cwd=root, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout.strip().splitlines()[-1])
    assert plan["generation"] == "server" and plan["server_url"].endswith(":8000/v1")
    assert (plan["groups_per_step"], plan["groups_run_per_step"], plan["max_staleness"]) == (2, 4, 1)
    assert plan["rows_per_step"] == 2 * 8 * 12


def test_build_tiny_with_a_path_is_where_the_model_will_be_built(tmp_path):
    """`model: {build_tiny: true, path: DIR}` builds the tiny model into DIR on first use
    (training/sft/trainer.py base_model_path), so the CLI's model check must not ask for DIR
    first."""
    import json

    from typer.testing import CliRunner

    from studio.cli import build_app

    cfg = tmp_path / "grpo.yaml"
    cfg.write_text(f"kind: grpo\nmodel: {{build_tiny: true, path: {tmp_path / 'tiny'}}}\n"
                   "grpo: {per_device_train_batch_size: 2, num_generations: 2, max_turns: 1}\n")
    result = CliRunner().invoke(build_app(), ["train", "grpo", "--dry-run", "--config", str(cfg)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1])["rows_per_step"] == 2
    assert not (tmp_path / "tiny").exists()  # a dry run builds nothing


def test_rows_per_step_must_hold_whole_groups_of_turns(tmp_path):
    body = BASE + "  per_device_train_batch_size: 8\n  num_generations: 4\n  max_turns: 3\n"
    with pytest.raises(ConfigError, match="num_generations x max_turns"):
        load_config(_write(tmp_path, body))


def test_multi_node_sft_line_carries_rank_and_main_address():
    cfg = load_config(CONFIGS / "sft-qwen3-vl-8b.yaml")
    line = render(train_command(cfg, "c.yaml", machine_rank=1))
    for flag in (
        "--num_machines 2",
        "--machine_rank 1",
        "--main_process_ip 10.0.0.1",
        "--main_process_port 29500",
        "--config_file configs/accelerate/deepspeed-zero3.yaml",
    ):
        assert flag in line
    assert vllm_server_command(cfg) == []
    import yaml

    for acc in sorted((CONFIGS / "accelerate").glob("*.yaml")):
        data = yaml.safe_load(acc.read_text())
        assert data["distributed_type"] in ("FSDP", "DEEPSPEED") and data["num_processes"] >= 1


def test_pipeline_refuses_a_tool_list_that_hides_an_oracle_tool():
    """Demonstrations must never teach calls to a tool the prompt does not show."""
    from training.pipeline import check_shown_tools

    cfg = load_config(CONFIGS / "pipeline-tiny-cpu.yaml")
    check_shown_tools(cfg)  # the shipped list covers every oracle of its families
    hidden = cfg.model_copy(update={"tools": [t for t in cfg.tools if t != "transform"]})
    with pytest.raises(ConfigError, match=r"transform \(for scene_editing\)"):
        check_shown_tools(hidden)


def test_held_out_families_show_their_declared_toolbox_not_a_hand_written_list(tmp_path):
    """#49: the held-out eval shows each task its family's declared toolbox (the rule every
    family follows); a config that still writes `eval.held_out_tools` is told so in one line."""
    from training.eval.spec import task_spec
    from training.pipeline import held_out_config
    from training.tasks import FAMILIES
    from training.tasks.base import family_tools

    for path in (CONFIGS / "pipeline-tiny-cpu.yaml", REAL_BASE):
        cfg = load_config(path)
        held = held_out_config(cfg)
        assert cfg.tools is not None and held.tools is None  # no list: each task's toolbox
        assert all(FAMILIES[f].held_out for f in held.eval.families)
        for family in held.eval.families:
            spec = task_spec(f"{family}:1:110000")
            assert spec.task_info["tools"] == list(family_tools(family))
            assert set(cfg.tools) <= set(family_tools(family))  # the basics it was trained on
    old = (CONFIGS / "pipeline-tiny-cpu.yaml").read_text().replace(
        "  held_out_per_family: 10\n", "  held_out_per_family: 10\n  held_out_tools: [cad_box]\n")
    assert "held_out_tools" in old
    with pytest.raises(ConfigError, match=r"eval: held_out_tools is gone .*declared toolbox"):
        load_config(_write(tmp_path, old))


def test_model_path_is_a_hub_id_or_a_folder_by_the_one_rule_resolve_model_uses(
        tmp_path, monkeypatch):
    """`org/name` is a hub id (nothing asked of the network while parsing); `runs/model`
    under an existing `runs/` is a missing folder, in the config as when the model loads."""
    from agents.models.source import ModelNotFound, resolve_model

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    sft = "kind: sft\nmodel: {{path: {}}}\nsft: {{data: [a.parquet]}}\n"
    assert load_config(_write(tmp_path, sft.format("Qwen/Qwen3-VL-2B-Instruct"))).model.path
    assert not resolve_model("Qwen/Qwen3-VL-2B-Instruct", probe=False).local
    with pytest.raises(ConfigError, match=r"model\.path:.*no model folder at 'runs/model'"):
        load_config(_write(tmp_path, sft.format("runs/model")))
    with pytest.raises(ModelNotFound, match="no model folder at runs/model"):
        resolve_model("runs/model", probe=False)


def test_quick_applies_the_configs_own_overrides_key_by_key(tmp_path):
    shipped = load_config(REAL_BASE)
    quick = load_config(REAL_BASE, quick=True)
    assert quick.name == f"{shipped.name}-quick"
    assert (quick.sft.max_steps, quick.grpo.max_steps, quick.eval.per_family) == (6, 1, 2)
    # Keys the overrides do not name keep the full run's values.
    assert quick.sft.learning_rate == shipped.sft.learning_rate
    assert quick.eval.families == shipped.eval.families and quick.tools == shipped.tools
    assert shipped.model.path == "smollm2-135m-instruct"  # a registered name, not a folder
    bare = tmp_path / "bare.yaml"
    bare.write_text("kind: sft\nmodel: {build_tiny: true}\nsft: {}\n")
    with pytest.raises(ConfigError, match="quick"):
        load_config(bare, quick=True)


def test_the_pipeline_eval_can_score_held_out_phrasings_apart(tmp_path):
    """`eval.phrasing: both` (#49): the eval's tasks in the wordings training shows, then the
    same tasks in held-out phrasings; the report's `phrasings` sets them apart."""
    from training.eval.run_eval import task_ids

    text = (CONFIGS / "pipeline-tiny-cpu.yaml").read_text()
    assert load_config(CONFIGS / "pipeline-tiny-cpu.yaml").eval.phrasing == "seen"
    both = load_config(_write(tmp_path, text.replace(
        "  held_out_per_family: 10\n", "  held_out_per_family: 10\n  phrasing: both\n")))
    spec = both.eval
    ids = task_ids(spec.families, spec.levels, spec.split, 2, spec.phrasing)
    seen = task_ids(spec.families, spec.levels, spec.split, 2)
    assert ids == seen + [f"{i}:unseen" for i in seen]
    with pytest.raises(ConfigError, match=r"eval\.phrasing"):
        load_config(_write(tmp_path, text.replace(
            "  held_out_per_family: 10\n", "  held_out_per_family: 10\n  phrasing: loud\n")))
