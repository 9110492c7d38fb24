"""GRPO's update with activation checkpointing (#47): the shipped CPU pipeline turns it on to
bound the update's memory; the gradient must be the one without it, to the bit, and the
tensors kept for the backward must be far fewer."""

from __future__ import annotations

import pytest


def _grads(model_dir, checkpointing: bool):
    import torch
    from peft import LoraConfig, get_peft_model
    from trl.trainer.utils import add_fused_lm_head

    from agents.policies.hf_policy import load_pretrained

    torch.manual_seed(0)
    _, model = load_pretrained(str(model_dir), dtype=torch.float32, local_files_only=True)
    add_fused_lm_head(model, temperature=1.0, outputs=("log_probs", "entropy"))
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, init_lora_weights=False,
                                             target_modules=["q_proj", "v_proj", "down_proj"]))
    model.train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    vocab = model.config.get_text_config().vocab_size
    ids = torch.randint(10, vocab - 10, (4, 48), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[0, :7] = 0  # a left-padded row, as GRPO's batches have
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-12] = -100  # only the completion is scored
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        saved_in_forward = sum(saved)
    out.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.loss.detach(), grads, saved_in_forward


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_checkpointing_keeps_the_gradient_to_the_bit_and_saves_less(tiny_model_dir):
    import torch

    loss, grads, saved = _grads(tiny_model_dir, checkpointing=False)
    loss_c, grads_c, saved_c = _grads(tiny_model_dir, checkpointing=True)
    assert torch.equal(loss, loss_c)
    assert grads and grads.keys() == grads_c.keys()
    for name, grad in grads.items():
        assert torch.equal(grad, grads_c[name]), name
    # What the forward keeps for the backward: the layers' inputs instead of every activation.
    assert saved_c * 3 < saved, (saved_c, saved)
