"""Can the tiny model learn to copy a quoted name, and how does the prompt's length change that?

A diagnostic behind the CPU pipeline's figures (README, "The CPU pipeline, measured"): SFT's
calls parse but name the wrong object, because the tiny model never learns to copy the goal's
name into the call. Here a fresh tiny Qwen3-VL (`training.sft.tiny_model`, seed 0, random weights,
local tokenizer) learns one thing only, on prompts of the pipeline's shape:

    <prefix> Goal: make 'Bead' red. Scene: {"objects":[{"name":"Globe"},{"name":"Bead"}]} call:
    -> {"name": "Bead"}

with the names the task families use and a prefix cut from the real tool schemas the pipeline
shows (the part of a real prompt that is the same in every row). One run trains one model per
prefix length, with the same steps, batch and seed, and prints the share of unseen prompts whose
name it copies exactly (teacher-forced argmax), next to the shortest prefix measured in the
same run. Chance is about 1/16.

    .venv/bin/python benchmarks/probe_copy.py [--prefix-tokens 0,300,1200] [--steps 300]

`--layout` trains on whole first-turn prompts instead, rendered by the tiny model's own chat
template: the default system prompt, the goal as `materials` words it, the montage's 16 image
tokens and a scene JSON of 2 or 3 objects as the loop writes it; the model completes a
`set_material` call whose name it must copy. Prompt tokens as measured: `schemas` shows the
pipeline's tool schemas (1,222, as in the pipeline), `no-schemas` leaves them out (453),
`no-scene` also the scene JSON (200), `no-system` the system prompt, `bare` is the goal alone
(65); `goal-last` is the real prompt with the goal moved after the scene JSON, next to the reply
(1,222). `--curriculum bare:150,no-scene:150` trains those layouts first, then `--steps` on the
layout scored:

    .venv/bin/python benchmarks/probe_copy.py --layout bare,no-scene,no-schemas --steps 400
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
    from agents.loop.episode_loop import openai_tools
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

    from training.sft.tiny_model import tiny_config, train_tokenizer
    from training.tasks.recipes.scene import COLOURS, NAMES

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
    curve = []
    for step in range(1, steps + 1):
        train_step(model, opt, tok, [sample(rng) for _ in range(batch)])
        if step % max(1, steps // 6) == 0:
            curve.append((step, copy_rate(model, test)))
    return len(test[0][0]), curve


def copy_rate(model, test: list[tuple[list[int], list[int]]]) -> float:
    """Share of `test` whose completion is the argmax at every position (teacher-forced)."""
    import torch

    model.eval()
    ok = 0
    with torch.no_grad():
        for p, c in test:
            logits = model(input_ids=torch.tensor([p + c])).logits[0]
            ok += logits[len(p) - 1 : len(p) + len(c) - 1].argmax(-1).tolist() == c
    model.train()
    return ok / len(test)


def train_step(model, opt, tok, rows: list[tuple[list[int], list[int]]]) -> None:
    """One optimiser step on right-padded rows, the loss on the completions only."""
    import torch

    width = max(len(p) + len(c) for p, c in rows)
    ids = torch.full((len(rows), width), tok.pad_token_id)
    labels = torch.full((len(rows), width), -100)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (p, c) in enumerate(rows):
        ids[i, : len(p) + len(c)] = torch.tensor(p + c)
        labels[i, len(p) : len(p) + len(c)] = torch.tensor(c)
        mask[i, : len(p) + len(c)] = 1
    model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
    opt.step()
    opt.zero_grad()


LAYOUTS = ("schemas", "goal-last", "no-schemas", "no-system", "no-scene", "bare")


def layout_sampler(tok, layout: str):
    """`sample(rng) -> (prompt ids, name-and-close ids)` for a first-turn prompt of `layout`."""
    from agents.loop.config import DEFAULT_SYSTEM
    from agents.loop.episode_loop import openai_tools
    from tools import catalogue
    from training.tasks.recipes.scene import COLOURS, random_items
    from training.train_config import load_config

    if layout not in LAYOUTS:
        raise SystemExit(f"--layout: unknown {layout!r}; one of {', '.join(LAYOUTS)}")
    shown = set(load_config(PIPELINE).tools or ())
    tools = [t for t in openai_tools(catalogue()) if t["function"]["name"] in shown]
    image = "<|image_pad|>" * 16  # a 256 px montage is 16 tokens for the tiny processor

    def sample(r: random.Random) -> tuple[list[int], list[int]]:
        items = random_items(r, r.choice((2, 3)))
        it, colour = r.choice(items), r.choice(sorted(COLOURS))
        goal = f"Goal: Set materials: make '{it['name']}' {colour} ({COLOURS[colour]})."
        objects = [{"name": x["name"], "type": "mesh", "source": "blender",
                    "location": x["location"], "rotation_deg": x["rotation_deg"],
                    "dimensions": x["dimensions"]} for x in items]  # fmt: skip
        scene = json.dumps({"objects": objects, "changed": [items[-1]["name"]]},
                           separators=(",", ":"))  # fmt: skip
        content = [{"type": "text", "text": goal}]
        if layout != "bare":
            content.append({"type": "image"})
        if layout not in ("bare", "no-scene"):
            content.append({"type": "text", "text": f"Scene: {scene}"})
        if layout == "goal-last":  # the goal after the scene, next to the reply
            content.append(content.pop(0))
        messages = [{"role": "user", "content": content}]
        if layout not in ("bare", "no-system"):
            messages.insert(0, {"role": "system", "content": DEFAULT_SYSTEM})
        shows_tools = layout in ("schemas", "goal-last")
        text = tok.apply_chat_template(messages, tools=tools if shows_tools else None,
                                       tokenize=False, add_generation_prompt=True)  # fmt: skip
        text = text.replace("<|image_pad|>", image)
        head = '<tool_call>\n{"name": "set_material", "arguments": {"color": "%s", "name": "'
        prompt = tok(text + head % COLOURS[colour], add_special_tokens=False)["input_ids"]
        return prompt, tok(it["name"] + '"}}', add_special_tokens=False)["input_ids"]

    return sample


def run_layout(layout: str, steps: int, batch: int, lr: float, curriculum: list[tuple[str, int]],
               pool: int | None = None):  # fmt: skip
    """Train a fresh tiny model on the `curriculum` layouts, then `steps` on `layout`; the curve
    is the exact-copy share on 64 unseen prompts of `layout`, checked through all the steps.
    With `pool`, every phase draws its rows from the same `pool` tasks (as SFT repeats its
    demonstrations) instead of fresh ones."""
    import torch
    from transformers import Qwen3VLForConditionalGeneration

    from training.sft.tiny_model import tiny_config, train_tokenizer

    torch.manual_seed(0)
    tok = train_tokenizer(0)
    model = Qwen3VLForConditionalGeneration(tiny_config(tok, "tiny"))
    held = random.Random(12345)
    scored = layout_sampler(tok, layout)
    test = [scored(held) for _ in range(64)]
    plan = [(layout_sampler(tok, name), n) for name, n in curriculum] + [(scored, steps)]
    total = sum(n for _, n in plan)
    rng = random.Random(0)
    if pool:
        # One pool of tasks, each phase showing them in its own layout: the same seeds.
        def pooled(sample):
            rows = [sample(random.Random(i)) for i in range(pool)]
            return lambda r: r.choice(rows)

        plan = [(pooled(sample), n) for sample, n in plan]
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    curve, step = [], 0
    for sample, n in plan:
        for _ in range(n):
            step += 1
            train_step(model, opt, tok, [sample(rng) for _ in range(batch)])
            if step % max(1, total // 6) == 0:
                curve.append((step, copy_rate(model, test)))
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
    ap.add_argument("--layout", default=None,
                    help=f"comma-separated whole-prompt layouts ({', '.join(LAYOUTS)}) instead of prefixes")  # fmt: skip
    ap.add_argument("--pool", type=int, default=None,
                    help="draw training rows from this many fixed tasks (SFT's demonstrations) instead of fresh ones")  # fmt: skip
    ap.add_argument("--curriculum", default="",
                    help="layout:steps,... trained before --steps on each --layout")  # fmt: skip
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    if args.layout:
        curriculum = []
        for part in filter(None, args.curriculum.split(",")):
            name, _, n = part.partition(":")
            if name not in LAYOUTS or not n.isdigit():
                raise SystemExit(f"--curriculum: {part!r} is not LAYOUT:STEPS")
            curriculum.append((name, int(n)))
        print(f"copy-probe: {args.curriculum or 'no curriculum'}, then {args.steps} steps x "
              f"{args.batch} rows from {args.pool or 'fresh'} tasks, lr {args.lr:g}; chance ~{1 / 16:.2f}")  # fmt: skip
        for layout in args.layout.split(","):
            tokens, curve = run_layout(layout, args.steps, args.batch, args.lr, curriculum,
                                       args.pool)  # fmt: skip
            shown = ", ".join(f"{s}:{a:.2f}" for s, a in curve)
            print(f"layout {layout:10s} (prompt {tokens}): copied by step {shown}", flush=True)
        return
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
