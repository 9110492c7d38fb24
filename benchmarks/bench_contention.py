"""Training and inference beside a CPU-bound neighbour, old settings against new, in one run.

    .venv/bin/python benchmarks/bench_contention.py [--quick] [--steps 2] [--tokens 48] \\
        [--wave 2] [--workers-episodes 4] [--skip-workers] [--skip-contention] [--now-only] \
        [--agent base|shipped] [--families primitive_placement,...]

Part 1, contention. Each of four children (a fresh process each: libgomp reads its wait policy
once, when torch loads it) loads the packaged base SmolLM2-135M-Instruct as the pipeline does
(configs/pipeline-smollm2-cpu.yaml: bf16, LoRA r 16) and measures, after a warm-up of each:

- an SFT step: forward, backward and AdamW step of the pipeline's LoRA on 2 rows of 600 tokens
  (the pipeline's batch and prompt length; random token ids, seeded: a step's cost does not
  depend on which tokens), seconds per step, median of `--steps`;
- generation: a greedy turn of exactly `--tokens` new tokens after a 600-token prompt, new
  tokens per second of the turn (the prompt's prefill included, as in an episode's turn);
- an eval wave: `--wave` greedy level-1 episodes (primitive_placement, validation seeds, the
  pipeline's tools and 96-token turns) through `evaluate_loaded` as one lockstep wave on
  `--wave` tool workers, seconds.

The settings: **old** = torch's default OpenMP wait policy (libgomp spins ~300k iterations at a
barrier) and the config's `cpu_threads` (2) whatever the machine does; **new** = what the
product does now (agents/models/cpu.py): `OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=0` and the
thread count chosen for the machine as it is (at most the config's 2). Each runs idle and
beside one neighbour (`python -c "while True: pass"`, started before the child, ended after).
Printed: the figures, neighbour/idle per setting, and old/new, with the load average.

Part 2, `eval --workers`: the CLI's in-process hf policy on `--workers-episodes` level-1 episodes
per family of `--families`, 1 worker against 2, as `modelwright eval` runs them now (one model
shared by the episodes; with 2 workers, a float32 text model's turns side by side, each from its
KV cache, otherwise each wave's turns generated as one batch) and, as the baseline, as it ran
them before (a model loaded for each episode, the workers' generations queued one at a time).
`--agent base` is the bare packaged base (it writes prose to its token budget), `--agent
shipped` the default Local agent (the shipped adapter on it, float32: it calls tools).

`--nice -10` (as root) runs the benchmark, its neighbour and their workers above the other
jobs of a shared machine, so that "idle" means the benchmark alone; the neighbour competes with
it on equal terms.

`--quick`: 1 step, 8 tokens, a wave of 1, 2 eval episodes: a check of the script, not of the
machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONFIG = ROOT / "configs" / "pipeline-smollm2-cpu.yaml"
SPIN_KEYS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


# -- the child: one setting, one condition --------------------------------------------------


def child(setting: str, steps: int, tokens: int, wave: int) -> dict:
    import torch

    from agents.models.cpu import ThreadGovernor, wait_policy
    from training.pipeline import base_folder
    from training.sft.trainer import load_model, peft_config
    from training.train_config import load_config

    config = load_config(CONFIG)
    cap = config.run.cpu_threads

    def threads() -> int:  # old: the config's count; new: the product's choice now
        if setting == "old":
            torch.set_num_threads(cap)
            return cap
        return ThreadGovernor(cap=cap).apply()

    out: dict = {"setting": setting, "wait_policy": wait_policy(), "threads": {}}
    with tempfile.TemporaryDirectory(prefix="bench-contention-") as tmp:
        work = Path(tmp)
        model_dir = base_folder(config, work)
        model, processor = load_model(config.model, work, model_dir)

        # SFT steps: the pipeline's LoRA, 2 rows of 600 tokens
        from peft import get_peft_model

        out["threads"]["sft"] = threads()
        torch.manual_seed(0)
        lora = get_peft_model(model, peft_config(config.lora))
        lora.train()
        opt = torch.optim.AdamW([p for p in lora.parameters() if p.requires_grad], lr=1e-4)
        ids = torch.randint(100, 40_000, (2, 600), generator=torch.Generator().manual_seed(0))
        times = []
        for _ in range(steps + 1):
            start = time.perf_counter()
            loss = lora(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            times.append(time.perf_counter() - start)
        out["sft_step_s"] = statistics.median(times[1:])
        model = lora.unload()  # the base again, for generation and the eval wave
        model.eval()
        del opt, lora

        # generation: exactly `tokens` new tokens after a 600-token prompt
        out["threads"]["generate"] = threads()
        prompt = ids[:1]
        with torch.no_grad():
            for n in (4, tokens):
                start = time.perf_counter()
                model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt),
                               max_new_tokens=n, min_new_tokens=n, do_sample=False,
                               pad_token_id=processor.pad_token_id)  # fmt: skip
                wall = time.perf_counter() - start
        out["generate_tok_s"] = tokens / wall

        # an eval wave: `wave` episodes as one lockstep batch on `wave` workers
        from training.eval.run_eval import evaluate_loaded

        out["threads"]["eval"] = threads()
        spec = config.eval.model_copy(update={
            "families": ["primitive_placement"], "levels": [1], "split": "validation",
            "per_family": wave, "batch": wave})  # fmt: skip
        start = time.perf_counter()
        report = evaluate_loaded(config.model_copy(update={"eval": spec}), model, processor,
                                 label="bench")  # fmt: skip
        out["eval_wave_s"] = time.perf_counter() - start
        out["eval_rewards"] = [e["reward"] for e in report["episodes"]]
    return out


def run_child(setting: str, neighbour: bool, args: argparse.Namespace) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in SPIN_KEYS}
    env.pop("MODELWRIGHT_THREADS", None)
    if setting == "new":
        from agents.models.cpu import child_env

        env = child_env(env)
    busy = None
    if neighbour:
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(1.0)
    load_before = os.getloadavg()[0]
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--child", setting, "--steps", str(args.steps),
             "--tokens", str(args.tokens), "--wave", str(args.wave)],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"the {setting} child failed ({done.returncode})")
    row = json.loads(done.stdout.strip().splitlines()[-1])
    row["load"] = (round(load_before, 2), round(os.getloadavg()[0], 2))
    row["neighbour"] = neighbour
    return row


# -- part 2: eval --workers ----------------------------------------------------------------


def workers_rows(episodes: int, modes: tuple[str, ...] = ("now", "before"), agent: str = "base",
                 families: tuple[str, ...] = ("primitive_placement",)) -> dict:
    """Wall seconds of the same episodes on 1 and 2 workers, now and as before. `agent`:
    "base", the packaged base (it writes prose to its token budget: generation-bound), or
    "shipped", the shipped adapter on it (the default Local agent: it calls tools, so its
    episodes are generation and tool work, as a user's eval of a trained agent)."""
    from agents import LoopConfig
    from agents.models.cpu import prepare_openmp
    from agents.policies.hf_policy import make_hf
    from training.cli.eval import shared_model_policies
    from training.eval.harness import evaluate, task_spec
    from training.eval.run_eval import task_ids
    from training.train_config import load_config

    prepare_openmp()  # as `modelwright` does before any torch import
    config = load_config(CONFIG)
    options = {"tools": config.tools, "max_tokens": config.eval.max_tokens}
    ids = task_ids(list(families), [1], "validation", episodes)
    specs = [task_spec(i) for i in ids]
    loop = LoopConfig(max_steps=config.eval.max_steps)
    model = config.model.path
    if agent == "shipped":
        from agents.models.shipped import default_shipped

        shipped = default_shipped()
        if shipped is None:
            raise SystemExit("no shipped adapter in assets/agents")
        model, options["adapter"] = shipped.base, shipped.path
    built = make_hf(model, **options)
    out: dict = {}
    for mode, workers in [(m, w) for m in modes for w in (1, 2)]:
        if mode == "now":
            factory, shared = shared_model_policies(built, specs, workers, loop.max_steps)
        else:
            factory, shared = (lambda: make_hf(model, **options)), None
            import torch

            torch.set_num_threads(config.run.cpu_threads)  # the config's count, as before
        start = time.perf_counter()
        progress = None
        if shared is not None and shared["batcher"] is not None:
            batcher = shared["batcher"]

            def progress(record, _done, _total, b=batcher):
                b.finish(record.get("task", ""))

        report = evaluate(specs, factory, workers=workers, config=loop, progress=progress)
        out[(mode, workers)] = {
            "wall_s": time.perf_counter() - start,
            "rewards": [e["reward"] for e in report["episodes"]],
            "threads": (shared or {}).get("cpu", {}) and shared["cpu"]["cpu_threads"],
            "load": round(os.getloadavg()[0], 2),
        }
        print(f"  eval {mode}, {workers} worker(s): {json.dumps(out[(mode, workers)])}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a check of the script")
    ap.add_argument("--steps", type=int, default=2, help="SFT steps measured (after one)")
    ap.add_argument("--tokens", type=int, default=48, help="new tokens generated")
    ap.add_argument("--wave", type=int, default=2, help="episodes in the eval wave")
    ap.add_argument("--workers-episodes", type=int, default=4, help="episodes per eval run")
    ap.add_argument("--skip-workers", action="store_true", help="part 1 only")
    ap.add_argument("--skip-contention", action="store_true", help="part 2 only")
    ap.add_argument("--agent", choices=["base", "shipped"], default="base",
                    help="part 2's model: the bare packaged base (generation-bound) or the "
                    "shipped adapter on it (the default Local agent: calls tools)")
    ap.add_argument("--families", default="primitive_placement",
                    help="part 2's level-1 families, comma-separated")
    ap.add_argument("--now-only", action="store_true",
                    help="part 2 without the before-the-change baseline rows")
    ap.add_argument("--nice", type=int, default=None,
                    help="run everything (children, neighbour, workers) at this nice value: "
                         "negative (as root) shields the figures from other jobs on a shared box")
    ap.add_argument("--child", choices=["old", "new"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.steps, args.tokens, args.wave, args.workers_episodes = 1, 8, 1, 2
    if args.nice is not None and not args.child:
        os.setpriority(os.PRIO_PROCESS, 0, args.nice)  # inherited by all it starts
    if args.child:
        print(json.dumps(child(args.child, args.steps, args.tokens, args.wave)))
        return 0

    print(f"{os.cpu_count()} cores, nice {os.getpriority(os.PRIO_PROCESS, 0)}; load average at "
          f"the start {tuple(round(x, 2) for x in os.getloadavg())}"
          f"{'; --quick: a check, not the speed' if args.quick else ''}\n")  # fmt: skip
    if not args.skip_contention:
        rows = {}
        for setting in ("old", "new"):
            for neighbour in (False, True):
                rows[(setting, neighbour)] = r = run_child(setting, neighbour, args)
                print(f"  {setting}, {'neighbour' if neighbour else 'idle'}: {json.dumps(r)}",
                      flush=True)  # fmt: skip
        print("\n| setting | beside | threads (sft, gen, eval) | SFT s/step | generation tok/s "
              "| eval wave s | load before, after |")
        print("| --- | --- | --- | ---: | ---: | ---: | --- |")
        for (setting, neighbour), r in rows.items():
            t = r["threads"]
            print(f"| {setting} ({r['wait_policy']}) | {'1 busy neighbour' if neighbour else 'nothing'} "
                  f"| {t['sft']}, {t['generate']}, {t['eval']} | {r['sft_step_s']:.2f} "
                  f"| {r['generate_tok_s']:.2f} | {r['eval_wave_s']:.1f} | {r['load'][0]}, {r['load'][1]} |")
        print("\n| slower beside the neighbour | SFT step | generation | eval wave |")
        print("| --- | ---: | ---: | ---: |")
        for setting in ("old", "new"):
            idle, busy = rows[(setting, False)], rows[(setting, True)]
            print(f"| {setting} | x{busy['sft_step_s'] / idle['sft_step_s']:.2f} "
                  f"| x{idle['generate_tok_s'] / busy['generate_tok_s']:.2f} "
                  f"| x{busy['eval_wave_s'] / idle['eval_wave_s']:.2f} |")
        print("\n| new / old, faster by | SFT step | generation | eval wave |")
        print("| --- | ---: | ---: | ---: |")
        for neighbour in (False, True):
            old, new = rows[("old", neighbour)], rows[("new", neighbour)]
            print(f"| {'beside the neighbour' if neighbour else 'idle'} "
                  f"| x{old['sft_step_s'] / new['sft_step_s']:.2f} "
                  f"| x{new['generate_tok_s'] / old['generate_tok_s']:.2f} "
                  f"| x{old['eval_wave_s'] / new['eval_wave_s']:.2f} |")
    if not args.skip_workers:
        w = workers_rows(args.workers_episodes, ("now",) if args.now_only else ("now", "before"),
                         args.agent, tuple(args.families.split(",")))
        print(f"\n| eval, hf policy, {args.workers_episodes} level-1 episodes | workers "
              "| wall (s) | torch threads | rewards | load after |")
        print("| --- | ---: | ---: | ---: | --- | ---: |")
        for (mode, workers), r in w.items():
            print(f"| {mode} | {workers} | {r['wall_s']:.1f} | {r['threads'] or '-'} "
                  f"| {r['rewards']} | {r['load']} |")
        for mode in sorted({m for m, _ in w}, reverse=True):
            print(f"\n{mode}: 2 workers / 1 worker: x{w[(mode, 1)]['wall_s'] / w[(mode, 2)]['wall_s']:.2f} "
                  "faster")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
