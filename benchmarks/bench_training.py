"""GRPO on CPU: rollout episodes/min (one rollout at a time, then the scheduler with 1 and 2
tool workers, all in this run) and the time split of a GRPO step (rollout wall, generation,
tools, start states, reward (the verifier), update), and the SFT collator's cost per step
with and without its encoding cache.

    .venv/bin/python benchmarks/bench_training.py [--pipeline-dir DIR] [--steps N] [--groups G]
        [--dry-run]

Rollouts are `EpisodeLoop` episodes (`training/rl/rollouts.py`) with an `HFPolicy` sampling at
temperature 1.0. The sequential baseline runs the same episodes one after another in this
thread on one tool session; the scheduler runs them as jobs on N workers, a fresh one per
episode from the pool's spares (one worker, one episode), so one rollout's tool calls overlap another's generation (generation itself is one at a time per
process: `GENERATE_LOCK`); "+batch" rows sample each group's first turns as one `generate`
(`grpo.batch_first_turn`, the default). With --pipeline-dir (a finished `train pipeline --out
DIR`) the policy is that pipeline's SFT model, so rollouts really call tools; otherwise the tiny
model is built and taught the call format with a short SFT first. --dry-run checks the setup.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

FAMILIES = ["primitive_placement", "materials", "scene_editing"]
TOOLS = ["add_primitive", "set_material", "delete"]
GROUP = 4  # rollouts per group


def teach(tmp: Path, model: Path) -> Path:
    """Oracle demonstrations -> 120 SFT steps, as the pipeline does (smaller)."""
    from training.pipeline import collect_demos
    from training.sft.trainer import run_sft
    from training.train_config import TrainConfig

    cfg = TrainConfig.model_validate(
        {
            "kind": "pipeline",
            "name": "bench",
            "model": {"path": str(model)},
            "tools": TOOLS,
            "lora": {
                "r": 16,
                "alpha": 32,
                "modules_to_save": ["lm_head"],
                "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
            },
            "run": {"report_to": [], "save_steps": 1000},
            "demos": {"families": FAMILIES, "per_family": 6},
            "sft": {"data": [str(tmp / "demos.parquet")], "max_steps": 120, "learning_rate": 1e-2},
            "grpo": {},
            "eval": {"families": FAMILIES},
        }
    )
    collect_demos(cfg, tmp)
    return run_sft(cfg, tmp / "sft", model_path=model).adapter_dir


def grpo_split(model: Path, adapter: Path | None, out: Path, workers: int, steps: int) -> dict:
    """A short GRPO run; the mean per-step split after the first step (which starts workers)."""
    from training.rl.grpo import run_grpo

    cfg = grpo_config(model, workers, steps)
    start = time.perf_counter()
    run_grpo(cfg, out, adapter=adapter)
    wall = time.perf_counter() - start
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "time/update_s" in r]
    rows = rows[1:] or rows  # steady state
    keys = ("rollout", "generate", "tools", "start", "reward", "update")
    split = {k: statistics.fmean(r[f"time/{k}_s"] for r in rows) for k in keys}
    return {"workers": workers, "steps": len(rows), "wall_s": round(wall, 1),
            "split_s": {k: round(v, 3) for k, v in split.items()},
            "zero_spread_share": statistics.fmean(r["rollout/zero_spread_share"] for r in rows),
            "logprob_mismatch": statistics.fmean(r["rollout/logprob_mismatch"] for r in rows)}


def grpo_config(model: Path | None, workers: int, steps: int):
    """The benchmark's GRPO config (model None: the tiny model, for --dry-run)."""
    from training.train_config import TrainConfig

    return TrainConfig.model_validate({
        "kind": "grpo", "name": f"bench-{workers}",
        "model": {"path": str(model)} if model else {"build_tiny": True},
        "tools": TOOLS, "run": {"report_to": [], "save_steps": 1000, "seed": 0},
        "grpo": {"tasks": {"families": FAMILIES, "levels": [1]}, "max_steps": steps,
                 "per_device_train_batch_size": 16, "num_generations": 4,
                 "max_completion_length": 128, "max_turns": 2, "temperature": 1.0,
                 "rollout_workers": workers, "rollout_store": "off"},
    })  # fmt: skip


def load_policy_model(model: Path, adapter: Path | None):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(model)
    loaded = AutoModelForImageTextToText.from_pretrained(model)
    if adapter:
        from peft import PeftModel

        loaded = PeftModel.from_pretrained(loaded, str(adapter))
    return loaded.eval(), processor


def rollout_rates(model: Path, adapter: Path | None, groups: int) -> list[dict]:
    """Episodes/min for the same rollouts: sequential, then the scheduler with 1 and 2 slots,
    each with every turn generated alone and with each group's first turns as one batch."""
    from agents.loop.scheduler import Scheduler
    from agents.policies.hf_policy import HFPolicy
    from tools import ToolSession
    from training.eval.harness import run_spec, task_spec
    from training.rl.curriculum import Curriculum
    from training.rl.rollouts import rollout_seed, run_groups

    loaded, processor = load_policy_model(model, adapter)
    config = _loop_config()
    curriculum = Curriculum(FAMILIES, [1], "train", 0)
    slots = [(i, curriculum.task_for(i)) for i in range(groups)]

    def policy_for(seed: int) -> HFPolicy:
        return HFPolicy.from_loaded(loaded, processor, model=model.name, max_tokens=128,
                                    temperature=1.0, seed=seed, tools=TOOLS)  # fmt: skip

    out = []
    with ToolSession() as session:
        session.status()  # the worker is up before the clock starts
        start = time.perf_counter()
        calls = 0
        for slot, task_id in slots:
            for i in range(GROUP):
                rec = run_spec(task_spec(task_id), policy_for(rollout_seed(0, slot, i)), session,
                               config=config)  # fmt: skip
                calls += rec["calls"]
        wall = time.perf_counter() - start
    n = groups * GROUP
    out.append({"mode": "sequential", "episodes": n, "wall_s": round(wall, 2), "generate_s": None,
                "episodes_per_min": round(n * 60 / wall, 2), "calls": calls})  # fmt: skip
    for workers, batched in ((1, False), (2, False), (1, True), (2, True)):
        with Scheduler(workers) as scheduler:
            scheduler.wait_warm()  # spares up before the clock, as in a run's steady state
            start = time.perf_counter()
            done = run_groups(scheduler, slots, GROUP, policy_for, config,
                              batch_first_turn=batched)  # fmt: skip
            wall = time.perf_counter() - start
        calls = sum(r.record["calls"] for g in done for r in g)
        gen_s = sum(s.latency_ms for g in done for r in g for s in r.result.steps) / 1e3
        out.append({"mode": f"scheduler x{workers}" + (" +batch" if batched else ""),
                    "episodes": n, "wall_s": round(wall, 2), "generate_s": round(gen_s, 2),
                    "episodes_per_min": round(n * 60 / wall, 2), "calls": calls})  # fmt: skip
    return out


def batched_generate_gain(model: Path, adapter: Path | None, n: int) -> dict:
    """What generating `n` rollouts' turns as one left-padded batch would save (not built):
    n first-turn prompts (goal, tools, a montage), 64 new tokens each, greedy, sequential vs
    one `generate` call."""
    from PIL import Image

    from agents.loop.episode_loop import DEFAULT_SYSTEM, openai_tools
    from agents.policies.hf_policy import encode_prompt, shown_tools, to_template_messages
    from tools import catalogue

    loaded, processor = load_policy_model(model, adapter)
    tok = processor.tokenizer
    tools = shown_tools(openai_tools(catalogue()), TOOLS)
    prompts = [[{"role": "system", "content": DEFAULT_SYSTEM},
                {"role": "user", "content": [{"type": "text", "text": f"Goal: a cube named A{i}"},
                                             {"type": "image",
                                              "image": Image.new("RGB", (256, 256), (90 + i,) * 3)}]}]
               for i in range(n)]  # fmt: skip
    gen = {"max_new_tokens": 64, "min_new_tokens": 64, "do_sample": False,
           "pad_token_id": tok.pad_token_id}  # fmt: skip

    def one_by_one() -> None:
        for m in prompts:
            loaded.generate(**encode_prompt(processor, m, tools), **gen)

    def batch() -> None:
        rendered = [to_template_messages(m) for m in prompts]
        texts = [processor.apply_chat_template(t, tools=tools, tokenize=False,
                                               add_generation_prompt=True) for t, _ in rendered]
        images = [i for _, ims in rendered for i in ims]
        tok.padding_side = "left"
        loaded.generate(**processor(text=texts, images=images, return_tensors="pt",
                                    padding=True), **gen)  # fmt: skip

    import torch

    out = {}
    with torch.no_grad():
        for name, fn in (("sequential_s", one_by_one), ("batched_s", batch)):
            fn()  # warm-up
            start = time.perf_counter()
            fn()
            out[name] = round(time.perf_counter() - start, 3)
    return out


def sft_collation(model: Path, demos: Path, steps: int, batch: int = 4) -> dict:
    """The SFT collator over `steps` batches drawn as the trainer draws them (shuffled epochs
    over the demonstrations), re-encoding every row (the baseline, `cache_bytes=0`) and with
    the encoding cache (the default), in this run."""
    import random

    from transformers import AutoProcessor

    from training.sft.data import ConversationCollator, load_conversations

    data = load_conversations(demos)
    processor = AutoProcessor.from_pretrained(str(model))
    order: list[int] = []
    rng = random.Random(0)
    while len(order) < steps * batch:
        epoch = list(range(len(data)))
        rng.shuffle(epoch)
        order += epoch
    batches = [order[i * batch : (i + 1) * batch] for i in range(steps)]
    out = {"rows": len(data), "steps": steps, "batch": batch}
    for name, cache in (("reencode_s", 0), ("cached_s", 1 << 30)):
        collator = ConversationCollator(processor, cache_bytes=cache)
        start = time.perf_counter()
        for b in batches:
            collator([data[i] for i in b])
        out[name] = round(time.perf_counter() - start, 2)
    return out


def _loop_config():
    from agents.loop.episode_loop import LoopConfig

    return LoopConfig(max_steps=2, render_size=256, record_artifacts=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipeline-dir", type=Path)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--groups", type=int, default=3, help="groups of 4 rollouts per rate")
    ap.add_argument("--sft-steps", type=int, default=150,
                    help="SFT batches of 4 rows for the collation figures")  # fmt: skip
    ap.add_argument("--dry-run", action="store_true", help="check the setup, run nothing")
    args = ap.parse_args()
    if args.dry_run:
        grpo_config(None, 2, args.steps)
        print("bench_training: configuration ok (dry run)")
        return
    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        if args.pipeline_dir and (args.pipeline_dir / "sft" / "model").is_dir():
            model, adapter = args.pipeline_dir / "sft" / "model", None  # full fine-tune SFT
        elif args.pipeline_dir:
            model, adapter = args.pipeline_dir / "model", args.pipeline_dir / "sft" / "adapter"
        else:
            from training.sft.tiny_model import build_tiny_model

            model = build_tiny_model(tmp / "model")
            adapter = teach(tmp, model)
        demos = (args.pipeline_dir / "demos.parquet") if args.pipeline_dir else tmp / "demos.parquet"
        collation = sft_collation(model, demos, args.sft_steps)
        gain = batched_generate_gain(model, adapter, GROUP)
        rates = rollout_rates(model, adapter, args.groups)
        split = grpo_split(model, adapter, tmp / "grpo", 2, args.steps)
    base = rates[0]["episodes_per_min"]
    print(f"Rollout episodes/min ({rates[0]['episodes']} episodes of up to 2 turns, same seeds):")
    for r in rates:
        gen = "" if r["generate_s"] is None else f", generation {r['generate_s']} s"
        print(f"  {r['mode']:<19} {r['episodes_per_min']:7.2f}  (x{r['episodes_per_min'] / base:.2f}"
              f" vs sequential; {r['calls']} tool calls, {r['wall_s']} s{gen})")
    print("  (+batch: each group's first turns sampled as one generate, grpo.batch_first_turn)")
    print(f"{GROUP} turns of different prompts generated one by one {gain['sequential_s']} s vs "
          f"as one left-padded batch {gain['batched_s']} s "
          f"(x{gain['sequential_s'] / gain['batched_s']:.2f}; not built)")
    s = split["split_s"]
    print(f"GRPO step (2 workers, 2 groups x 4 rollouts x 2 turns, mean of {split['steps']} steps "
          f"after the first): rollout {s['rollout']:.2f} s (generation {s['generate']:.2f}, "
          f"tools {s['tools']:.2f}, start states {s['start']:.2f}, reward {s['reward']:.2f}, "
          f"summed over rollouts), update {s['update']:.2f} s; "
          f"zero-spread groups {split['zero_spread_share']:.2f}, "
          f"logprob mismatch {split['logprob_mismatch']:.2e}")
    c = collation
    print(f"SFT collation, {c['steps']} batches of {c['batch']} over {c['rows']} demonstration rows: "
          f"re-encoding every row {c['reencode_s']} s, with the encoding cache {c['cached_s']} s "
          f"(x{c['reencode_s'] / max(c['cached_s'], 1e-9):.2f}; "
          f"{(c['reencode_s'] - c['cached_s']) / c['steps'] * 1e3:.0f} ms saved per step)")
    print(json.dumps({"rates": rates, "grpo": split, "batched_generate": gain,
                      "sft_collation": collation}))


if __name__ == "__main__":
    main()
