"""GRPO on CPU: time split per step (generation / tools / reward / update) and rollout episodes
per minute with 1 and 2 tool workers (the 1-worker run is the baseline of the same run).

    .venv/bin/python benchmarks/bench_training.py [--pipeline-dir DIR] [--steps N] [--swap-only]

It first measures what rollouts sharing a worker pay to swap states (`ToolSession.switch`)
against the replay that swap replaces (baseline measured in the same run).

With --pipeline-dir (a finished `train pipeline --out DIR`) it starts from that pipeline's SFT
model (DIR/sft/model, or DIR/model + DIR/sft/adapter), so rollouts really call tools; otherwise it builds the tiny model and
teaches it the call format with a short SFT first.
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


def teach(tmp: Path, model: Path) -> Path:
    """Oracle demonstrations -> 120 SFT steps, as the pipeline does (smaller)."""
    from training.pipeline import collect_demos
    from training.sft import run_sft
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


def grpo_split(model: Path, adapter: Path, out: Path, workers: int, steps: int) -> dict:
    from training.grpo import run_grpo
    from training.train_config import TrainConfig

    cfg = TrainConfig.model_validate(
        {
            "kind": "grpo",
            "name": f"bench-{workers}",
            "model": {"path": str(model)},
            "tools": TOOLS,
            "run": {"report_to": [], "save_steps": 1000, "seed": 0},
            "grpo": {
                "tasks": {"families": FAMILIES, "levels": [1]},
                "max_steps": steps,
                "per_device_train_batch_size": 4,
                "num_generations": 4,
                "max_completion_length": 800,
                "max_turns": 2,
                "temperature": 1.0,
                "rollout_workers": workers,
            },
        }
    )
    start = time.perf_counter()
    run_grpo(cfg, out, adapter=adapter)
    wall = time.perf_counter() - start
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "time/update_s" in r]
    startup_tools_s = rows[0]["time/tools_s"]  # the first step also starts the workers
    rows = rows[1:] or rows  # steady state
    split = {
        k: statistics.fmean(r[f"time/{k}_s"] for r in rows)
        for k in ("generation", "tools", "reward", "scoring", "update")
    }
    rollout_s = split["generation"] + split["tools"] + split["reward"] + split["scoring"]
    return {
        "workers": workers,
        "steps": len(rows),
        "wall_s": round(wall, 1),
        "split_s": {k: round(v, 3) for k, v in split.items()},
        "rollout_episodes_per_min": round(4 * 60 / rollout_s, 2),
        "first_step_tools_s": round(startup_tools_s, 2),
        "replays": rows[-1].get("rollout/replays", 0),
        "switches": rows[-1].get("rollout/switches", 0),
        "calls_per_rollout": round(
            statistics.fmean(r.get("reward/calls_per_rollout", 0) for r in rows), 2
        ),
    }


def switch_vs_replay(repeats: int = 20) -> dict:
    """Bringing a rollout's state back onto a shared worker: one `switch` (park the live state,
    take the rollout's) against the replay it replaces (reset, task setup, the rollout's
    calls), on the same worker, for a primitive_placement rollout that made 2 calls."""
    from tools import ToolSession
    from training.tasks import get_task

    task = get_task("primitive_placement:1:3")
    calls = task.oracle[:1] + [
        {
            "tool": "add_primitive",
            "args": {"kind": "cube", "name": "Extra", "dimensions": [1, 1, 1]},
        }
    ]

    def replay(s) -> None:  # as the rollout runtime replays: drop the live state, rebuild
        s.switch(park=None, take=None)
        task.setup(s)
        for c in calls:
            s.call(c["tool"], c["args"])

    with ToolSession() as s:
        replay(s)
        s.switch(park="a", take=None)
        task.setup(s)
        for c in calls:
            s.call(c["tool"], c["args"])
        s.switch(park="b", take="a")  # warm-up; a is live, b parked
        switch_ms, replay_ms = [], []
        for i in range(repeats):
            start = time.perf_counter()
            s.switch(park="b" if i % 2 else "a", take="a" if i % 2 else "b")
            switch_ms.append((time.perf_counter() - start) * 1e3)
        for _ in range(max(3, repeats // 4)):
            start = time.perf_counter()
            replay(s)  # drops the live state (switch with park=None), then rebuilds it
            replay_ms.append((time.perf_counter() - start) * 1e3)
    return {"switch_ms": statistics.median(switch_ms), "replay_ms": statistics.median(replay_ms)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipeline-dir", type=Path)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--swap-only", action="store_true", help="only the switch vs replay figure")
    args = ap.parse_args()
    swap = switch_vs_replay()
    print(
        f"rollout state back on a shared worker: switch {swap['switch_ms']:.1f} ms vs replay "
        f"{swap['replay_ms']:.1f} ms (x{swap['replay_ms'] / swap['switch_ms']:.1f} faster)"
    )
    if args.swap_only:
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
            from agents.tinymodel import build_tiny_model

            model = build_tiny_model(tmp / "model")
            adapter = teach(tmp, model)
        results = [grpo_split(model, adapter, tmp / f"grpo{w}", w, args.steps) for w in (1, 2)]
    base = results[0]
    print("GRPO step time split on CPU (mean seconds per step after the first, 4 rollouts of")
    print("up to 2 turns;")
    print("scoring = prompt tokenisation, image processing and log-prob passes):")
    for r in results:
        s = r["split_s"]
        total = sum(s.values())
        print(
            f"  workers={r['workers']}: generation {s['generation']:.2f}  tools {s['tools']:.2f}  "
            f"reward {s['reward']:.2f}  scoring {s['scoring']:.2f}  update {s['update']:.2f}  "
            f"(total {total:.2f} s; "
            f"{r['calls_per_rollout']} calls per rollout; state swaps {r['switches']}, "
            f"replays {r['replays']}; first step's tools {r['first_step_tools_s']} s "
            "incl. worker start)"
        )
        print(
            f"    rollout episodes/min {r['rollout_episodes_per_min']}  "
            f"(x{r['rollout_episodes_per_min'] / base['rollout_episodes_per_min']:.2f} vs 1 worker)"
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
