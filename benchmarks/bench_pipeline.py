"""The real-base pipeline's two costliest loops, each against its baseline in the same run.

    .venv/bin/python benchmarks/bench_pipeline.py [--quick] [--episodes 18] [--steps 6]

- eval: greedy episodes of the packaged base (zero-shot, the pipeline config's tools, prompts
  and 96-token turns) on validation seeds through the eval harness, one at a time
  (`eval.batch: 1`) against waves of 6 whose turns are generated as one left-padded batch
  (`eval.batch: 6`, `LockstepBatcher`); episodes/min and the ratio, and in how many episodes
  the two agree on reward, steps and calls (a left-padded batch changes bf16 rounding, which
  can flip a near-tie in a long, unsure zero-shot reply; a trained adapter's short calls are
  the case the tests pin);
- SFT: LoRA steps of the pipeline's SFT settings (bf16, r 16, 2 rows a step) on oracle
  demonstrations of the pipeline's families, TRL's fused LM head scoring every position (its
  CPU default) against the positions the loss counts (`score_loss_positions_only`); seconds
  per step after the first and the ratio, with both runs' per-step losses.

Both on `cpu_threads` 2, the machine otherwise idle. `--quick` runs 3 episodes and 2 steps: a
check of the script, not the machine's speed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONFIG = ROOT / "configs" / "pipeline-smollm2-cpu.yaml"


def eval_rows(config, model, processor, episodes: int) -> dict:
    from training.eval.run_eval import evaluate_loaded

    per = max(1, episodes // len(config.eval.families))
    out = {}
    for batch in (1, 6):
        spec = config.eval.model_copy(update={"batch": batch, "per_family": per,
                                              "split": "validation"})  # fmt: skip
        start = time.perf_counter()
        report = evaluate_loaded(config.model_copy(update={"eval": spec}), model, processor,
                                 label="bench")  # fmt: skip
        wall = time.perf_counter() - start
        seen = sorted((e["task"], e["reward"], e["steps"], e["calls"]) for e in report["episodes"])
        out[batch] = {"wall_s": wall, "episodes": len(seen), "per_min": 60 * len(seen) / wall,
                      "seen": seen, "valid": report["schema_valid_calls"]}  # fmt: skip
    return out


def sft_rows(config, model_dir: Path, work: Path, steps: int) -> dict:
    import trl.trainer.utils as trl_utils
    from trl.kernels.chunked_logprob import _use_triton

    import training.sft.trainer as trainer
    from training.pipeline import collect_demos

    demos = config.demos.model_copy(update={"per_family": 2, "workers": 1})
    collect_demos(config.model_copy(update={"demos": demos}), work)
    out = {}
    for mode in ("every position", "loss positions"):
        if mode == "every position":  # TRL's own choice on a CPU
            trl_utils._use_triton = _use_triton
            patch, trainer.score_loss_positions_only = trainer.score_loss_positions_only, lambda: None
        sft = config.sft.model_copy(update={"data": [str(work / "demos.parquet")],
                                            "max_steps": steps})  # fmt: skip
        cfg = config.model_copy(update={"sft": sft, "run": config.run.model_copy(
            update={"report_to": [], "save_steps": 10_000})})  # fmt: skip
        run = work / mode.replace(" ", "-")
        shutil.rmtree(run, ignore_errors=True)
        trainer.run_sft(cfg, run, model_path=model_dir)
        if mode == "every position":
            trainer.score_loss_positions_only = patch
        logs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        logs = [r for r in logs if "loss" in r and "elapsed_s" in r]
        elapsed = [r["elapsed_s"] for r in logs]
        per_step = (elapsed[-1] - elapsed[0]) / max(1, len(elapsed) - 1)
        out[mode] = {"step_s": per_step, "losses": [round(r["loss"], 4) for r in logs]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 episodes and 2 steps: a check")
    ap.add_argument("--episodes", type=int, default=18, help="eval episodes per mode")
    ap.add_argument("--steps", type=int, default=6, help="SFT steps per mode")
    args = ap.parse_args()
    episodes, steps = (3, 2) if args.quick else (args.episodes, args.steps)

    from training.pipeline import base_folder
    from training.runs import set_cpu_threads
    from training.sft.trainer import load_model
    from training.train_config import load_config

    config = load_config(CONFIG)
    set_cpu_threads(config.run.cpu_threads)
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        work = Path(tmp)
        model_dir = base_folder(config, work)
        model, processor = load_model(config.model, work, model_dir)
        model.eval()
        ev = eval_rows(config, model, processor, episodes)
        del model
        sft = sft_rows(config, model_dir, work, steps)

    one, six = ev[1], ev[6]
    note = "; --quick: a check, not the speed" if args.quick else ""
    print(f"SmolLM2-135M-Instruct, bf16, 2 threads{note}\n")
    print("| eval, zero-shot, validation seeds | episodes | wall (s) | episodes/min |")
    print("| --- | ---: | ---: | ---: |")
    for label, row in (("one by one (`eval.batch: 1`)", one), ("waves of 6 (`eval.batch: 6`)", six)):
        print(f"| {label} | {row['episodes']} | {row['wall_s']:.1f} | {row['per_min']:.1f} |")
    agree = sum(a == b for a, b in zip(one["seen"], six["seen"], strict=True))
    mean = {k: sum(r[1] for r in row["seen"]) / len(row["seen"]) for k, row in ev.items()}
    print(f"\nwaves / one by one: x{six['per_min'] / one['per_min']:.2f} episodes/min; "
          f"reward, steps and calls agree in {agree} of {len(one['seen'])} episodes "
          f"(mean reward {mean[1]:.4f} one by one, {mean[6]:.4f} in waves)\n")
    print("| SFT step, TRL's fused head | s/step (after the first) | losses |")
    print("| --- | ---: | --- |")
    for mode, row in sft.items():
        print(f"| {mode} | {row['step_s']:.2f} | {', '.join(map(str, row['losses']))} |")
    a, b = sft["every position"]["step_s"], sft["loss positions"]["step_s"]
    print(f"\nloss positions / every position: x{a / b:.2f} faster per step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
