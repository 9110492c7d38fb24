"""`sft.share_prefix`: a step's rows run their common prefix once and their own tokens alone,
with the loss and gradients of the rows apart (training/sft/shared_prefix.py), on a real
(tiny, random) Llama under LoRA with TRL's fused LM head, and through a real TRL run."""

from __future__ import annotations

import json
import math

import pytest

from tests.test_sft_packing import _rows, family_rows

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _model(tiny_text_dir):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(tiny_text_dir), dtype=torch.float32)
    add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj",
                                                                               "down_proj"]))
    for name, p in model.named_parameters():  # LoRA's B starts at zero: give it a value
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.02)
    model.train()
    return model


def test_a_shared_prefix_gives_the_loss_gradients_and_metrics_of_the_rows_apart(tiny_text_dir):
    import torch

    from training.sft.shared_prefix import Counter, SharedPrefix, shared_length

    model = _model(tiny_text_dir)
    rows, labels = _rows()
    rows, labels = rows[:3], labels[:3]  # one episode's three turns
    width = max(map(len, rows)) + 3  # and some padding past the longest
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    lab = torch.tensor([x + [-100] * (width - len(x)) for x in labels])

    def run(call) -> tuple[float, dict, dict]:
        model.zero_grad()
        out = call(input_ids=ids, attention_mask=mask, labels=lab, fused_lm_head=True, use_cache=False)
        loss = -out.log_probs.sum() / out.label_mask.sum()  # as TRL's compute_loss
        loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        fields = {k: getattr(out, k).detach().clone() for k in ("log_probs", "entropy", "is_top1",
                                                                 "label_mask")}
        return float(loss), grads, fields

    apart, grads_apart, fields_apart = run(model)
    counter = Counter()
    shared, grads_shared, fields_shared = run(SharedPrefix(model, counter))
    prefix = shared_length(rows, labels)
    assert prefix == 37  # the system + goal of turn 1, up to one token before its reply
    assert counter.row_tokens == sum(map(len, rows))
    assert counter.tokens_run == prefix + sum(len(r) - prefix for r in rows) < counter.row_tokens
    assert abs(shared - apart) < 1e-5, (shared, apart)
    assert grads_apart and set(grads_shared) == set(grads_apart)
    assert all("lora" in n for n in grads_apart)
    for name, grad in grads_apart.items():
        assert torch.allclose(grads_shared[name], grad, atol=1e-6, rtol=1e-4), name
    for name, value in fields_apart.items():
        assert fields_shared[name].shape == value.shape, name
        assert torch.allclose(fields_shared[name].float(), value.float(), atol=1e-5), name
    # rows of other families share too little: they run as TRL runs them
    other = [rows[0], _rows(seed=1)[0][3]]
    assert shared_length(other, [labels[0], [-100] * len(other[1])]) < 16


def test_sft_with_share_prefix_trains_through_trl_and_runs_fewer_tokens(tmp_path, tiny_text_dir):
    """A real TRL SFT run with `sft.share_prefix`: each step's rows from one family, fewer
    tokens run than the rows hold, a finite loss; `pack` and `share_prefix` together, or with
    gradient checkpointing, are a config error."""
    from training.sft.trainer import run_sft
    from training.train_config import TrainConfig

    data = family_rows(tmp_path)
    sft = {"data": [data], "max_steps": 3, "per_device_train_batch_size": 2,
           "share_prefix": True, "learning_rate": 1e-3}  # fmt: skip
    cfg = TrainConfig.model_validate({
        "kind": "sft", "model": {"path": str(tiny_text_dir)}, "lora": {"r": 4, "alpha": 8},
        "sft": sft, "run": {"save_steps": 100, "report_to": []},
    })  # fmt: skip
    result = run_sft(cfg, tmp_path / "run")
    assert result.steps == 3 and result.final_loss is not None and math.isfinite(result.final_loss)
    counted = json.loads((tmp_path / "run" / "shared_prefix.json").read_text())
    assert 0 < counted["tokens_run"] < counted["row_tokens"]
    steps = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    for step in steps:
        assert len(step["ids"]) == 2 and len({s.split("-")[0] for s in step["ids"]}) == 1, step
    for extra in ({"pack": True}, {"gradient_checkpointing": True}):
        with pytest.raises(ValueError, match="share_prefix"):
            TrainConfig.model_validate({"kind": "sft", "model": {"path": str(tiny_text_dir)},
                                        "sft": {**sft, **extra}})
