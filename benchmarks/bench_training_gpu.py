"""GRPO in server mode on a GPU machine: rollout tokens/s, episodes/min with 1, 2, 4 and 8 tool
workers on the local backend and on the Ray backend (one node of 1, 2, 4 and 8 slots, on
127.0.0.1, against the same server), a GRPO step's split (rollout / generation / tools / start
states / reward / update) and staleness.

    python benchmarks/bench_training_gpu.py --model DIR [--steps 3] [--groups 4] [--port 8011]
    python benchmarks/bench_training_gpu.py --model DIR --dry-run   # CPU: check, start nothing
    python benchmarks/bench_training_gpu.py --check-ray   # CPU: the Ray rows' path, oracle policy

DIR is a local Qwen3-VL folder vLLM can serve (`benchmarks/gpu_check.sh` builds a small random
one; or a real checkpoint). It starts `modelwright serve --model DIR --lora` on --port, runs the
same rollouts (groups x 4, up to 2 turns, temperature 1.0, token ids and log-probs from the
server) on N tool workers, then a short GRPO run whose adapter is hot-loaded into the server
after every step. UNTESTED on a GPU: written on a CPU-only machine, where only --dry-run ran.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FAMILIES = ["primitive_placement", "materials", "scene_editing"]
TOOLS = ["add_primitive", "set_material", "delete", "transform"]
GROUP = 4


def config(model: Path | None, url: str, steps: int, workers: int):
    """The benchmark's GRPO config (model None: the tiny model, for a dry run without one)."""
    from training.train_config import TrainConfig

    source = {"path": str(model), "dtype": "bfloat16"} if model else {"build_tiny": True}
    return TrainConfig.model_validate({
        "kind": "grpo", "name": "bench-gpu", "model": source,
        "tools": TOOLS, "run": {"report_to": [], "save_steps": 1000, "seed": 0,
                                "cpu_threads": None},
        "grpo": {"tasks": {"families": FAMILIES, "levels": [1]}, "max_steps": steps,
                 "per_device_train_batch_size": 16, "num_generations": GROUP, "max_turns": 2,
                 "max_completion_length": 256, "temperature": 1.0, "rollout_workers": workers,
                 "generation": "server", "server_url": url, "rollout_store": "off"},
    })  # fmt: skip


def serve_command(model: Path, port: int) -> list[str]:
    return [sys.executable, "-m", "studio.cli", "serve", "--model", str(model),
            "--port", str(port), "--lora", "--max-lora-rank", "16"]  # fmt: skip


def rates(url: str, groups: int, spec) -> list[dict]:
    """The same rollouts against the server with 1, 2, 4 and 8 tool workers."""
    from agents.loop.scheduler import Scheduler
    from agents.policies.openai_policy import OpenAIPolicy, OpenAIPolicyConfig
    from training.rl.curriculum import Curriculum
    from training.rl.grpo import loop_config
    from training.rl.rollouts import run_groups

    slots = [(i, Curriculum(FAMILIES, [1], "train", 0).task_for(i)) for i in range(groups)]

    def policy_for(seed: int):
        return OpenAIPolicy(OpenAIPolicyConfig(base_url=url, temperature=1.0, max_tokens=256,
                                               seed=seed, token_ids=True))  # fmt: skip

    out = []
    for workers in (1, 2, 4, 8):
        with Scheduler(workers) as scheduler:
            scheduler.wait_warm()
            start = time.perf_counter()
            done = run_groups(scheduler, slots, GROUP, policy_for, loop_config(spec))
            wall = time.perf_counter() - start
        tokens = sum(len(t.completion_ids) for g in done for r in g for t in r.turns)
        n = groups * GROUP
        out.append({"workers": workers, "episodes_per_min": round(n * 60 / wall, 1),
                    "tokens_per_s": round(tokens / wall, 1), "wall_s": round(wall, 2)})
    return out


def ray_rates(spec, groups: int, policy_spec_for, slot_counts=(1, 2, 4, 8)) -> list[dict]:
    """The same rollouts on the Ray backend: a one-node cluster on 127.0.0.1 per slot count
    (the node's actor owns that many tool workers; its warm-up is timed apart)."""
    from training.eval.backend import make_backend
    from training.eval.cluster import local_cluster
    from training.rl.curriculum import Curriculum
    from training.rl.grpo import loop_config
    from training.rl.rollouts import run_groups

    slots = [(i, Curriculum(FAMILIES, [1], "train", 0).task_for(i)) for i in range(groups)]
    out = []
    for n in slot_counts:
        cluster = local_cluster(nodes=1, slots=n)
        try:
            with make_backend("ray", cluster=cluster.address) as backend:
                start = time.perf_counter()
                done = run_groups(None, slots, GROUP, None, loop_config(spec), backend=backend,
                                  policy_spec_for=policy_spec_for)  # fmt: skip
                wall = time.perf_counter() - start
        finally:
            import ray

            ray.shutdown()
            cluster.shutdown()
        tokens = sum(len(t.completion_ids) for g in done for r in g for t in r.turns)
        out.append({"ray_slots": n, "episodes_per_min": round(groups * GROUP * 60 / wall, 1),
                    "tokens_per_s": round(tokens / wall, 1), "wall_s": round(wall, 2)})
    return out


def server_spec(url: str):
    """The rollouts' policy as data, built on the node: the server's client."""
    from training.eval.requests import PolicySpec

    return lambda seed, greedy=False: PolicySpec("openai", {
        "base_url": url, "temperature": 1.0, "max_tokens": 256, "seed": seed,
        "token_ids": True})  # fmt: skip


def grpo(model: Path, url: str, steps: int, out: Path) -> dict:
    from training.rl.grpo import run_grpo

    result = run_grpo(config(model, url, steps, 8), out)
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "time/update_s" in r][1:] or rows
    keys = ("rollout", "generate", "tools", "start", "reward", "update")
    split = {k: round(statistics.fmean(r[f"time/{k}_s"] for r in rows), 3) for k in keys}
    last = result.last_rollout or {}
    return {"split_s": split, "staleness": max(r["rollout/staleness"] for r in rows),
            "zero_spread_share": statistics.fmean(r["rollout/zero_spread_share"] for r in rows),
            # server turns whose pixels the trainer rebuilt to fit vLLM's prompt ids, and not
            "server_vision": last.get("server_vision"), "vision_misses": last.get("vision_misses")}


def wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float = 900) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"modelwright serve exited with {proc.returncode}")
        try:
            if httpx.get(url.removesuffix("/v1") + "/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise SystemExit(f"no healthy server at {url} after {timeout_s} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path, help="required unless --dry-run")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--check-ray", action="store_true",
                    help="run the Ray rows with the oracle policy on this machine (1 and 2 slots)")
    args = ap.parse_args()
    if args.check_ray:
        from training.eval.requests import PolicySpec

        cfg = config(None, "", args.steps, 2)
        rows = ray_rates(cfg.grpo, 1, lambda seed, greedy=False: PolicySpec("oracle"), (1, 2))
        print(json.dumps(rows))
        return
    url = f"http://127.0.0.1:{args.port}/v1"
    from training.rl.grpo_server import plan

    print("serve:", " ".join(serve_command(args.model or Path("DIR"), args.port)))
    cfg = config(args.model if args.model and args.model.is_dir() else None, url, args.steps, 8)
    print("plan:", json.dumps(plan(cfg)))
    if args.dry_run:
        return
    if not args.model:
        raise SystemExit("--model DIR is required (a Qwen3-VL folder vLLM can serve)")
    proc = subprocess.Popen(serve_command(args.model, args.port), cwd=ROOT)
    try:
        wait_healthy(url, proc)
        result = {"rates": rates(url, args.groups, cfg.grpo),
                  "ray_rates": ray_rates(cfg.grpo, args.groups, server_spec(url))}
        with tempfile.TemporaryDirectory() as tmp:
            result["grpo"] = grpo(args.model, url, args.steps, Path(tmp) / "run")
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    base = result["rates"][0]["episodes_per_min"]
    for r in result["rates"]:
        print(f"workers={r['workers']}: {r['episodes_per_min']} episodes/min "
              f"(x{r['episodes_per_min'] / base:.2f}), {r['tokens_per_s']} rollout tokens/s")
    for r, local in zip(result["ray_rates"], result["rates"], strict=True):
        print(f"ray, 1 node, {r['ray_slots']} slots: {r['episodes_per_min']} episodes/min "
              f"(x{r['episodes_per_min'] / local['episodes_per_min']:.2f} of the local backend "
              f"with {local['workers']} workers), {r['tokens_per_s']} rollout tokens/s")
    print("GRPO step split:", result["grpo"])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
