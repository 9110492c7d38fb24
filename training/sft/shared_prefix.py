"""SFT rows that begin alike, their common prefix run once a step (`sft.share_prefix`).

The rows of one task family start with the same system prompt and the family's tool
signatures (~880 of a curriculum row's ~1,700 tokens), and the turns of one episode share
their goal and early history as well. A step's batch (rows ordered so that it comes from one
family, `packing.pack_order`) runs here as:

1. the rows' common prefix once, through the backbone, its key/value cache kept with its
   autograd graph;
2. each row's own tokens alone (no padding), attending to that cache and to themselves, at
   their positions in the row.

The prefix stops one token before the first scored token of any row, so every scored token
and its predecessor are the row's own, as apart. The gradient reaching the prefix from each
row adds up in its one graph: loss and gradients are those of the rows apart, to rounding
(`tests/test_sft_shared_prefix.py`). Unlike `sft.pack`, no 4D mask is built: a row's tokens
take torch's CPU flash attention with the cache's offset, and nothing is padded.

`SharedPrefix` stands in for the model in TRL's `compute_loss` (it reads only the fused LM
head's per-token outputs), so the trainer's loss, metrics and token counts are TRL's own.
"""

from __future__ import annotations

from typing import Any

# Below this many shared tokens the batch runs as TRL runs it (rows padded into one forward).
MIN_SHARED = 16
FIELDS = ("log_probs", "entropy", "log_sum_sq_probs", "mean_logits", "is_top1", "label_mask")


def shared_length(rows: list[list[int]], labels: list[list[int]]) -> int:
    """How many leading tokens every row has in common, cut to one token before the first
    scored token of any row."""
    first = min(next((k for k, v in enumerate(lab) if v != -100), len(lab)) for lab in labels)
    n = min(len(r) for r in rows)
    for k in range(n):
        token = rows[0][k]
        if any(r[k] != token for r in rows[1:]):
            n = k
            break
    return max(0, min(n, first - 1))


class Counter:
    """Tokens the batches held (rows unpadded) and tokens run."""

    def __init__(self) -> None:
        self.row_tokens = 0
        self.tokens_run = 0


class SharedPrefix:
    """The model, called as TRL's `compute_loss` calls it (`fused_lm_head=True`), with each
    batch's common prefix run once. Any other call goes to the model as it is."""

    def __init__(self, model: Any, counter: Counter) -> None:
        self.model, self.counter = model, counter

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import torch

        ids, mask, labels = kwargs.get("input_ids"), kwargs.get("attention_mask"), kwargs.get("labels")
        plain = (args or not kwargs.get("fused_lm_head") or ids is None or mask is None
                 or labels is None or mask.dim() != 2 or ids.shape[0] < 2
                 or kwargs.get("position_ids") is not None or kwargs.get("shift_labels") is not None
                 or any(k in kwargs for k in ("pixel_values", "past_key_values", "cache")))  # fmt: skip
        lengths = [] if plain else [int(n) for n in mask.sum(dim=1).tolist()]
        if not plain and any(int(mask[b, :n].sum()) != n for b, n in enumerate(lengths)):
            plain = True  # not right-padded rows
        if plain:
            return self.model(*args, **kwargs)
        rows = [ids[b, :n].tolist() for b, n in enumerate(lengths)]
        labs = [labels[b, :n].tolist() for b, n in enumerate(lengths)]
        shared = shared_length(rows, labs)
        self.counter.row_tokens += sum(lengths)
        if shared < MIN_SHARED:
            self.counter.tokens_run += ids.shape[0] * ids.shape[1]
            return self.model(*args, **kwargs)
        self.counter.tokens_run += shared + sum(n - shared for n in lengths)
        return self._run(ids, labels, lengths, shared, kwargs, torch)

    def _backbone(self) -> Any:
        inner = self.model
        if hasattr(inner, "get_base_model"):  # PEFT: the LoRA layers sit inside the backbone
            inner = inner.get_base_model()
        return inner.base_model

    def _run(self, ids, labels, lengths, shared, kwargs, torch) -> Any:
        from transformers import DynamicCache

        device = ids.device
        prefix = self._backbone()(input_ids=ids[:1, :shared],
                                  attention_mask=torch.ones(1, shared, dtype=torch.long, device=device),
                                  use_cache=True)  # fmt: skip
        kept = getattr(prefix, "cache", None) or prefix.past_key_values
        layers = kept.layers
        passed = {k: v for k, v in kwargs.items()
                  if k not in ("input_ids", "attention_mask", "labels", "use_cache")}  # fmt: skip
        width = ids.shape[1] - 1  # the fused head's per-token fields: (batch, seq_len - 1)
        fields: dict[str, list] = {}
        out = None
        for b, n in enumerate(lengths):
            cache = DynamicCache(config=self._backbone().config)
            for i, layer in enumerate(layers):  # the prefix's tensors, not copies: one graph
                cache.update(layer.keys, layer.values, i)
            own = ids[b : b + 1, shared:n]
            out = self.model(input_ids=own,
                             attention_mask=torch.ones(1, n, dtype=torch.long, device=device),
                             position_ids=torch.arange(shared, n, device=device)[None],
                             cache=cache, labels=labels[b : b + 1, shared:n],
                             **passed)  # fmt: skip
            for name in FIELDS:
                value = getattr(out, name, None)
                if value is None:
                    continue
                # label k of the row's own tokens (k >= 1) is label shared + k of the row,
                # field index shared + k - 1
                before = value.new_zeros(1, shared)
                after = value.new_zeros(1, width - shared - value.shape[1])
                fields.setdefault(name, []).append(torch.cat([before, value, after], dim=1))
        joined = {name: torch.cat(parts, dim=0) for name, parts in fields.items()}
        for name, value in joined.items():
            setattr(out, name, value)
            out[name] = value
        out.loss = None
        return out
