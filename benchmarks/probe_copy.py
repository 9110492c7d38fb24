"""Can the tiny model learn to copy a quoted name, and how does the prompt's length change that?

A diagnostic behind the CPU pipeline's figures (README, "The CPU pipeline, measured"): SFT's
calls parse but name the wrong object, because the tiny model never learns to copy the goal's
name into the call. Here a fresh tiny Qwen3-VL (`agents.tinymodel`, seed 0, random weights,
local tokenizer) learns one thing only, on prompts of the pipeline's shape:

    <prefix> Goal: make 'Bead' red. Scene: {"objects":[{"name":"Globe"},{"name":"Bead"}]} call:
    -> {"name": "Bead"}

with the names the task families use and a prefix cut from the real tool schemas the pipeline
shows (the part of a real prompt that is the same in every row). One run trains one model per
prefix length, with the same steps, batch and seed, and prints the share of unseen prompts whose
name it copies exactly (teacher-forced argmax), next to the shortest prefix measured in the
same run. Chance is about 1/16.

    .venv/bin/python benchmarks/probe_copy.py [--prefix-tokens 0,300,1200] [--steps 300]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


PIPELINE = Path(__file__).resolve().parents[1] / "configs" / "pipeline-tiny-cpu.yaml"


def schema_prefix(tok, n_tokens: int) -> list[int]:
    """The first `n_tokens` tokens of the shipped pipeline's tool schemas, repeated as needed."""
    from agents.loop import openai_tools
    from tools import catalogue
    from training.train_config import load_config

    shown = set(load_config(PIPELINE).tools or ())
    text = "\n".join(
        json.dumps(t) for t in openai_tools(catalogue()) if t["function"]["name"] in shown
    )
    ids = tok(text)["input_ids"]
    out: list[int] = []
    while len(out) < n_tokens:
        out += ids
    return out[:n_tokens]


def run_one(prefix_tokens: int, steps: int, batch: int, lr: float, rope_theta: float | None):
    import torch
    from transformers import Qwen3VLForConditionalGeneration

    from agents.tinymodel import tiny_config, train_tokenizer
    from training.tasks.scene_families import COLOURS, NAMES

    torch.manual_seed(0)
    tok = train_tokenizer(0)
    cfg = tiny_config(tok, "tiny")
    if rope_theta is not None:
        cfg.text_config.rope_parameters["rope_theta"] = rope_theta
    model = Qwen3VLForConditionalGeneration(cfg)
    prefix = schema_prefix(tok, prefix_tokens)

    def sample(r: random.Random) -> tuple[list[int], list[int]]:
        a, b = r.sample(NAMES, 2)
        first, second = (a, b) if r.random() < 0.5 else (b, a)
        colour = r.choice(sorted(COLOURS))
        text = (
            f" Goal: make '{a}' {colour}. Scene: "
            f'{{"objects":[{{"name":"{first}"}},{{"name":"{second}"}}]}} call:'
        )
        return prefix + tok(text)["input_ids"], tok(f' {{"name": "{a}"}}')["input_ids"]

    rng, held = random.Random(0), random.Random(12345)
    test = [sample(held) for _ in range(64)]
    opt = torch.optim.AdamW(model.parameters(), lr=lr)

    def accuracy() -> float:
        model.eval()
        ok = 0
        with torch.no_grad():
            for p, c in test:
                logits = model(input_ids=torch.tensor([p + c])).logits[0]
                ok += logits[len(p) - 1 : len(p) + len(c) - 1].argmax(-1).tolist() == c
        model.train()
        return ok / len(test)

    curve = []
    for step in range(1, steps + 1):
        rows = [sample(rng) for _ in range(batch)]
        width = max(len(p) + len(c) for p, c in rows)
        ids = torch.full((batch, width), tok.pad_token_id)
        labels = torch.full((batch, width), -100)
        mask = torch.zeros((batch, width), dtype=torch.long)
        for i, (p, c) in enumerate(rows):
            ids[i, : len(p) + len(c)] = torch.tensor(p + c)
            labels[i, len(p) : len(p) + len(c)] = torch.tensor(c)
            mask[i, : len(p) + len(c)] = 1
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
        if step % max(1, steps // 6) == 0:
            curve.append((step, accuracy()))
    return len(test[0][0]), curve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefix-tokens", default="0,300,1200",
                    help="comma-separated prefix lengths (the pipeline's first-turn prompt has ~890 tokens before the goal)")  # fmt: skip
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=5e-3, help="the pipeline's SFT learning rate")
    ap.add_argument("--rope-theta", type=float, default=None,
                    help="override the tiny model's rope_theta (1e6)")  # fmt: skip
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    lengths = [int(x) for x in args.prefix_tokens.split(",")]
    print(f"copy-probe: {args.steps} steps x {args.batch} rows, lr {args.lr:g}, "
          f"rope_theta {args.rope_theta or 'default'}; chance ~{1 / 16:.2f}")  # fmt: skip
    base = None
    for n in lengths:
        tokens, curve = run_one(n, args.steps, args.batch, args.lr, args.rope_theta)
        final = sum(a for _, a in curve[-3:]) / len(curve[-3:])
        base = final if base is None else base
        ratio = f"x{final / base:.2f} of the shortest" if base else "n/a"
        shown = ", ".join(f"{s}:{a:.2f}" for s, a in curve)
        print(f"prefix {n:5d} tokens (prompt {tokens}): copied {final:.2f} "
              f"(last 3 checks) {ratio}; by step {shown}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
