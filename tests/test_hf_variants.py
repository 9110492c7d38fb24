"""The hf policy's variants: `standard` (the weights as trained) and `fast` (the adapter merged,
int8 linear layers but the MLPs' output projections; agents/policies/hf_policy.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from agents import PolicyError
from agents.policies.hf_policy import HFPolicy, HFPolicyConfig, load_model
from studio.cli import build_app


def _dynamic_int8(module) -> bool:
    return type(module).__module__.startswith("torch.ao.nn.quantized.dynamic")


def test_the_fast_variant_is_int8_but_for_the_mlp_outputs_and_acts(tiny_text_dir):
    import torch

    config = HFPolicyConfig(model=str(tiny_text_dir), max_tokens=12, variant="fast", tools=["delete"])
    model, processor = load_model(config)
    kinds = {name: _dynamic_int8(m) for name, m in model.named_modules()
             if isinstance(m, torch.nn.Linear) or _dynamic_int8(m)}  # fmt: skip
    assert kinds["lm_head"] and kinds["model.layers.0.self_attn.q_proj"]
    assert kinds["model.layers.0.mlp.up_proj"]
    assert not kinds["model.layers.0.mlp.down_proj"]  # float32: its inputs' outliers
    policy = HFPolicy(config, model=model, processor=processor)
    assert policy.reuses_kv() and policy.turns_stand_alone()
    messages = [{"role": "user", "content": "Remove the cube named A."}]
    one = policy.act(messages, [])
    two = HFPolicy(config, model=model, processor=processor).act(messages, [])
    assert one.raw["completion_ids"] == two.raw["completion_ids"]  # greedy: the same each time
    assert one.tokens_out > 0


def test_an_unknown_variant_is_one_line(tiny_text_dir):
    with pytest.raises(PolicyError, match="unknown variant 'faster': choose standard or fast"):
        load_model(HFPolicyConfig(model=str(tiny_text_dir), variant="faster"))
    result = CliRunner().invoke(build_app(), [
        "run", "--task", "primitive_placement:1:100000", "--policy", "hf", "--model",
        str(tiny_text_dir), "--variant", "faster", "--no-record"])  # fmt: skip
    assert result.exit_code != 0
    assert "unknown variant 'faster'" in result.output and "Traceback" not in result.output
