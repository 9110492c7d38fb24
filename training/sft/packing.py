"""SFT rows that share a prefix, run as one sequence: each shared token once (`sft.pack`).

The rows of one task family begin alike (system prompt, the family's tool schemas), and the
turns of one episode share their goal and early history too: in the curriculum's
demonstrations a row is ~1,700 tokens, and the rows of one family hold ~3x fewer distinct
prefix-tree tokens than tokens. A step's compute is its tokens, so a batch whose rows come
from one family is run as one packed sequence: the first row whole, each next row only past
its longest common prefix with the one before it (rows in sorted order), every token attending
to its own row's tokens only (a 4D mask) at its position in its row (position ids).

The loss is exactly that of the rows apart: each token's hidden state sees the same context
at the same positions, each scored token keeps its label, and a row is forked no later than
one token before its first scored token, so a scored token is never shared (counted once, as
apart) and its predecessor is its own row's. Tests compare the loss and the gradients.

`pack_order` orders the rows so that each step's batch comes from one family (whole episodes
in turn order where they fit), seeded; `PrefixPacker` is a forward pre-hook on the model (no
trainer internals): it packs the batch the collator padded, for text-only models with a 2D
mask, in training forwards only.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any


def pack_order(keys: list[tuple[str, str, int]], batch: int, seed: int) -> list[int]:
    """Row indices, ordered so that each run of `batch` rows comes from one family.

    `keys[i]` is row i's (family, episode, turn). Each family's rows, in episode and turn
    order, are cut into batches of `batch` rows (a family's last batch may be short: the
    trainer then fills it from the next family's rows); the batches are shuffled with `seed`."""
    families: dict[str, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        families[key[0]].append(i)
    rng = random.Random(seed)
    chunks = []
    for family in sorted(families):
        rows = families[family]
        episodes = sorted({keys[i][1] for i in rows})
        rng.shuffle(episodes)  # which of a family's episodes share a batch: seeded
        ordered = sorted(rows, key=lambda i: (episodes.index(keys[i][1]), keys[i][2]))
        chunks += [ordered[k : k + batch] for k in range(0, len(ordered), batch)]
    rng.shuffle(chunks)
    return [i for chunk in chunks for i in chunk]


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def pack_rows(rows: list[list[int]], labels: list[list[int]]) -> dict:
    """The prefix tree of `rows` laid out flat: ids, labels, each token's position in its row,
    and for each token the flat indices it attends to (its row's tokens up to itself).

    Rows go in sorted order; a row shares the previous row's first `fork` tokens, where `fork`
    is their common prefix cut to one token before the row's first scored token."""
    order = sorted(range(len(rows)), key=lambda i: rows[i])
    flat_ids: list[int] = []
    flat_labels: list[int] = []
    positions: list[int] = []
    sees: list[list[int]] = []
    prev_row: list[int] = []
    prev_path: list[int] = []
    for i in order:
        row, lab = rows[i], labels[i]
        first_scored = next((k for k, v in enumerate(lab) if v != -100), len(row))
        fork = min(common_prefix(prev_row, row), max(0, first_scored - 1))
        path = prev_path[:fork]
        for m in range(fork, len(row)):
            path.append(len(flat_ids))
            flat_ids.append(row[m])
            flat_labels.append(lab[m])
            positions.append(m)
            sees.append(list(path))
        prev_row, prev_path = row, path
    return {"input_ids": flat_ids, "labels": flat_labels, "position_ids": positions, "sees": sees}


class PrefixPacker:
    """A forward pre-hook that runs a training batch of padded rows as one packed sequence
    (`pack_rows`). Counts the row tokens it was given and the tokens it ran."""

    def __init__(self) -> None:
        self.tokens_in = 0
        self.tokens_run = 0

    def attach(self, module: Any) -> Any:
        return module.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module: Any, args: tuple, kwargs: dict):
        import torch

        ids, mask, labels = kwargs.get("input_ids"), kwargs.get("attention_mask"), kwargs.get("labels")
        if args or ids is None or mask is None or labels is None or not torch.is_grad_enabled():
            return None
        if mask.dim() != 2 or ids.shape[0] < 2 or kwargs.get("position_ids") is not None:
            return None
        if any(k in kwargs for k in ("pixel_values", "mm_token_type_ids", "past_key_values")):
            return None
        lengths = mask.sum(dim=1).tolist()
        if any(mask[b, : int(n)].sum() != n for b, n in enumerate(lengths)):
            return None  # not right-padded rows
        rows = [ids[b, : int(n)].tolist() for b, n in enumerate(lengths)]
        labs = [labels[b, : int(n)].tolist() for b, n in enumerate(lengths)]
        packed = pack_rows(rows, labs)
        n = len(packed["input_ids"])
        self.tokens_in += int(sum(lengths))
        self.tokens_run += n
        allowed = torch.zeros(n, n, dtype=torch.bool)
        for q, seen in enumerate(packed["sees"]):
            allowed[q, seen] = True
        config = getattr(module, "config", None)
        if getattr(config, "_attn_implementation", "sdpa") == "sdpa":
            mask4 = allowed
        else:  # eager attention adds the mask to its scores
            dtype = next(module.parameters()).dtype
            mask4 = torch.zeros(n, n, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
        device = ids.device
        kwargs["input_ids"] = torch.tensor([packed["input_ids"]], device=device)
        kwargs["labels"] = torch.tensor([packed["labels"]], device=device)
        kwargs["position_ids"] = torch.tensor([packed["position_ids"]], device=device)
        kwargs["attention_mask"] = mask4[None, None].to(device)
        return args, kwargs
