"""The packaged base (SmolLM2-135M-Instruct) on this machine: generation and training speed in
fp32 and bf16, GRPO's batched first turns, and what bf16 does to GRPO's log-probs.

    .venv/bin/python benchmarks/bench_base.py [--quick] [--task primitive_placement:1:0]
        [--threads 2]

All on one real first-turn prompt: the task's episode runs through the eval harness (one tool
worker) and the prompt the loop shows is rendered as the hf policy renders it (`encode_prompt`,
the Hermes format, the pipeline config's tool list). In one run, each figure next to its
baseline measured here:

- generation: greedy, a fixed number of new tokens (`min_new_tokens`), tokens/s including the
  prompt's prefill, and one forward pass over the prompt; bf16 against fp32;
- LoRA SFT step (r 16, alpha 32, every linear projection, AdamW) on the SFT row the pipeline
  trains on for this turn: the prompt and the oracle's first call, `encode_training`, loss on
  the assistant turn only; seconds per step and tokens/s; bf16 (base weights bf16, adapter
  fp32 as PEFT keeps it) against fp32;
- GRPO group: the first turns of 4 rollouts sampled at temperature 0.7 through `HFPolicy.act`,
  as one batched `generate` (`GroupSampler`, `num_return_sequences=4`) against 4 policies
  generating in turn, fixed seeds; the ratio of wall times (the issue expects x1.6-2.2);
- log-prob mismatch: for the batched group's completions (sampled in bf16), per-token log-probs
  at the sampling temperature as GRPO scores them, mean and max |difference| between the bf16
  forward and the fp32 forward, and between the sampling-time log-probs and each forward.

torch runs on `--threads` threads (the pipeline's `cpu_threads`: 2). `--quick` measures a few
tokens and one step, to check the script; its figures are not the machine's speed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_prompts import MODEL, ROOT, config_tools, first_turns  # noqa: E402

LORA_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
GROUP = 4
TEMPERATURE = 0.7
DTYPES = ("float32", "bfloat16")
FULL = {"gen_tokens": 64, "repeats": 3, "sft_steps": 5, "group_tokens": 96}
QUICK = {"gen_tokens": 8, "repeats": 1, "sft_steps": 1, "group_tokens": 8}


def load(path: str, dtype: str):
    import torch

    from agents.policies.hf_policy import load_pretrained

    tok, model = load_pretrained(path, dtype=getattr(torch, dtype), local_files_only=True)
    return tok, model.eval()


def timed(fn, repeats: int) -> float:
    """Median seconds of `repeats` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def generation(model, tok, inputs, new: int, repeats: int) -> dict:
    import torch

    gen = {"max_new_tokens": new, "min_new_tokens": new, "do_sample": False,
           "pad_token_id": tok.pad_token_id}  # fmt: skip
    with torch.no_grad():
        gen_s = timed(lambda: model.generate(**inputs, **gen), repeats)
        fwd_s = timed(lambda: model(**inputs), repeats)
    return {"gen_s": gen_s, "tokens_per_s": new / gen_s, "forward_s": fwd_s}


def group_first_turns(model, tok, messages, tools, listed, new: int, repeats: int) -> dict:
    """4 rollouts' first turns: one batched generate against 4 in turn (same seeds each run)."""
    from agents.policies.hf_policy import GroupSampler, HFPolicy

    def policies():
        out = []
        for i in range(GROUP):
            p = HFPolicy.from_loaded(model, tok, model=MODEL, tools=listed, max_tokens=new,
                                     temperature=TEMPERATURE, seed=i)  # fmt: skip
            p.reset({})
            out.append(p)
        return out

    replies: dict[str, list] = {}

    def batched():
        group = GroupSampler(GROUP, seed=7)
        ps = policies()
        for i, p in enumerate(ps):
            p.share_first_turn(group, i)
        replies["batched"] = [p.act(messages, tools) for p in ps]

    def sequential():
        replies["sequential"] = [p.act(messages, tools) for p in policies()]

    out = {}
    for mode, fn in (("sequential", sequential), ("batched", batched)):
        wall = timed(fn, repeats)
        tokens = sum(r.tokens_out for r in replies[mode])
        out[mode] = {"wall_s": wall, "tokens": tokens, "tokens_per_s": tokens / wall}
    out["ratio"] = out["sequential"]["wall_s"] / out["batched"]["wall_s"]
    out["completions"] = [r.tokens for r in replies["batched"]]
    return out


def forward_logprobs(model, prompt: list[int], completion: list[int]) -> list[float]:
    """Per-token log-probs of `completion` after `prompt`, logits / temperature (GRPO's loss)."""
    import torch

    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[0].float()
    step = torch.log_softmax(logits[len(prompt) - 1 : -1] / TEMPERATURE, dim=-1)
    return step.gather(1, torch.tensor(completion).unsqueeze(1)).squeeze(1).tolist()


def mismatch(models: dict, completions: list) -> dict:
    pairs: dict[str, list[float]] = {"bf16 vs fp32 forward": [],
                                     "bf16 sampling vs bf16 forward": [],
                                     "bf16 sampling vs fp32 forward": []}  # fmt: skip
    for turn in completions:
        ids = list(turn.completion_ids)
        if not ids:
            continue
        fp32 = forward_logprobs(models["float32"], turn.prompt_ids, ids)
        bf16 = forward_logprobs(models["bfloat16"], turn.prompt_ids, ids)
        for key, a, b in (("bf16 vs fp32 forward", bf16, fp32),
                          ("bf16 sampling vs bf16 forward", turn.logprobs, bf16),
                          ("bf16 sampling vs fp32 forward", turn.logprobs, fp32)):  # fmt: skip
            pairs[key] += [abs(x - y) for x, y in zip(a, b, strict=True)]
    return {k: {"tokens": len(v), "mean": statistics.fmean(v), "max": max(v)}
            for k, v in pairs.items() if v}  # fmt: skip


def sft_row(tok, messages, tools, task_id: str) -> dict:
    """The pipeline's SFT row for this turn: the prompt, then the oracle's first call."""
    import json

    from agents.policies.chat_format import encode_training
    from training.tasks import get_task

    step = get_task(task_id).oracle[0]
    call = {"type": "function", "function": {"name": step["tool"],
                                             "arguments": json.dumps(step["args"])}}  # fmt: skip
    reply = {"role": "assistant", "content": None, "tool_calls": [call]}
    return encode_training(tok, [*messages, reply], tools)


def lora_step(model, row: dict, steps: int) -> dict:
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    peft = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                                            target_modules=LORA_MODULES, task_type="CAUSAL_LM"))  # fmt: skip
    peft.train()
    opt = torch.optim.AdamW([p for p in peft.parameters() if p.requires_grad], lr=1e-4)
    losses = []

    def step():
        loss = peft(**row).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach().item())

    seconds = timed(step, steps)
    tokens = int(row["input_ids"].shape[1])
    return {"step_s": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds,
            "loss_first": losses[0], "loss_last": losses[-1]}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a few tokens and one step: a check")
    ap.add_argument("--task", default="primitive_placement:1:0", help="the level-1 task")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (the pipeline's)")
    ap.add_argument("--config", default=str(ROOT / "configs/pipeline-smollm2-cpu.yaml"))
    args = ap.parse_args()
    size = QUICK if args.quick else FULL

    from agents import resolve_model
    from agents.policies.hf_policy import encode_prompt, shown_tools

    listed = config_tools(Path(args.config))
    messages, offered = first_turns([args.task])[args.task]
    tools = shown_tools(offered, listed)
    path = resolve_model(MODEL, probe=False).name

    import torch

    torch.set_num_threads(args.threads)
    loaded = {d: load(path, d) for d in DTYPES}
    tok = loaded["float32"][0]
    inputs = encode_prompt(tok, messages, tools)
    prompt_len = int(inputs["input_ids"].shape[1])
    row = sft_row(tok, messages, tools, args.task)
    print(f"{MODEL} on {args.task}: prompt {prompt_len} tokens, SFT row "
          f"{int(row['input_ids'].shape[1])} tokens; torch {torch.__version__}, "
          f"{args.threads} threads{'; --quick: a check, not the speed' if args.quick else ''}\n")  # fmt: skip

    gen = {d: generation(m, tok, inputs, size["gen_tokens"], size["repeats"])
           for d, (_, m) in loaded.items()}  # fmt: skip
    group = {d: group_first_turns(m, tok, messages, offered, listed, size["group_tokens"],
                                  size["repeats"]) for d, (_, m) in loaded.items()}  # fmt: skip
    drift = mismatch({d: m for d, (_, m) in loaded.items()}, group["bfloat16"]["completions"])
    sft = {d: lora_step(m, row, size["sft_steps"]) for d, (_, m) in loaded.items()}

    base = "float32"
    print("| | fp32 | bf16 | bf16 / fp32 |\n| --- | ---: | ---: | ---: |")
    lines = [
        (f"greedy generation, {size['gen_tokens']} new tokens (s)", gen, "gen_s", "{:.2f}"),
        ("generation tokens/s (incl. prefill)", gen, "tokens_per_s", "{:.1f}"),
        (f"forward pass, {prompt_len} tokens (s)", gen, "forward_s", "{:.2f}"),
        (f"LoRA SFT step, {sft[base]['tokens']} tokens (s)", sft, "step_s", "{:.2f}"),
        ("LoRA SFT tokens/s", sft, "tokens_per_s", "{:.0f}"),
    ]
    for label, table, key, fmt in lines:
        a, b = table[base][key], table["bfloat16"][key]
        print(f"| {label} | {fmt.format(a)} | {fmt.format(b)} | x{b / a:.2f} |")
    print(f"\nGRPO group of {GROUP} first turns, temperature {TEMPERATURE}, up to "
          f"{size['group_tokens']} new tokens each\n")  # fmt: skip
    print("| dtype | 4 in turn (s) | tokens | one batch (s) | tokens | batched speed-up |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for d, g in group.items():
        s, b = g["sequential"], g["batched"]
        print(f"| {d} | {s['wall_s']:.2f} | {s['tokens']} | {b['wall_s']:.2f} | {b['tokens']} "
              f"| x{g['ratio']:.2f} |")  # fmt: skip
    print(f"\nlog-prob mismatch on the bf16 group's completions (temperature {TEMPERATURE})\n")
    print("| pair | tokens | mean abs diff | max abs diff |\n| --- | ---: | ---: | ---: |")
    for key, m in drift.items():
        print(f"| {key} | {m['tokens']} | {m['mean']:.4f} | {m['max']:.4f} |")
    print("\nSFT loss (first, last step): " + ", ".join(
        f"{d} {s['loss_first']:.3f} -> {s['loss_last']:.3f}" for d, s in sft.items()))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
