"""`score_loss_positions_only` (training/runs.py): on a CPU, TRL's fused LM head scores
only the positions the loss counts, as it does on a GPU, and the loss, per-token log-probs and
gradients are those of scoring every position. A tiny Llama built from a config, seeded."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("one_torch_thread")

_ORIGINAL: dict = {}


def _model():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=512, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)  # fmt: skip
    return LlamaForCausalLM(config).float()


def _scored(monkeypatch, compact: bool):
    import torch
    import trl.trainer.utils as trl_utils
    from trl.trainer.utils import add_fused_lm_head

    from training.runs import score_loss_positions_only

    if compact:
        score_loss_positions_only()
    else:  # TRL's own choice: every position on a CPU
        from trl.kernels.chunked_logprob import _use_triton

        monkeypatch.setattr(trl_utils, "_use_triton", _use_triton)
    rows = []
    # The class's own `apply` (monkeypatch restores it after the test; the first call saw it).
    apply = _ORIGINAL.setdefault("apply", trl_utils._ChunkedLogProbFunction.apply)

    def counting(hidden, *args):
        rows.append(hidden.shape[0])
        return apply(hidden, *args)

    monkeypatch.setattr(trl_utils._ChunkedLogProbFunction, "apply", counting)
    model = _model()
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    ids = torch.randint(0, 512, (2, 40), generator=torch.Generator().manual_seed(1))
    labels = ids.clone()
    labels[0, :30] = -100  # a prompt, then the reply the loss counts
    labels[1, :25] = -100
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels,
                fused_lm_head=True)  # fmt: skip
    out.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out, grads, rows


def test_scoring_the_loss_positions_only_keeps_loss_and_gradients(monkeypatch):
    import torch

    full, full_grads, full_rows = _scored(monkeypatch, compact=False)
    part, part_grads, part_rows = _scored(monkeypatch, compact=True)
    assert full_rows == [2 * 39]  # every shifted position went through the head
    assert part_rows == [10 + 15]  # only the positions with a label (after the shift)
    torch.testing.assert_close(part.loss, full.loss)
    torch.testing.assert_close(part.log_probs, full.log_probs)
    torch.testing.assert_close(part.entropy, full.entropy)
    assert part_grads.keys() == full_grads.keys() and full_grads
    for name, grad in full_grads.items():
        torch.testing.assert_close(part_grads[name], grad, msg=name)
