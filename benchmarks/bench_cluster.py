"""Episode throughput: the local backend against the ray backend on 1 and 2 nodes, in one run.

Run: .venv/bin/python benchmarks/bench_cluster.py [--episodes N] [--slots S] [--json FILE]

The same N oracle episodes (cheap level-1 tasks) run
1. on the local backend with S and with 2*S tool workers (agents.Scheduler, this machine);
2. on a Ray cluster on this machine (every component on 127.0.0.1) with 1 node of S slots,
   then 2 nodes of S slots each (the second added to the same cluster).

Each row: episodes per minute over the run (the cluster's start and the actors' warm pools
are timed apart, as a cluster outlives one eval), the ratio against the local backend with
the same number of slots, and Ray's overhead per episode: (ray seconds - local seconds) /
episodes at equal slots. The 2-node rows share this machine's cores with the first node:
they measure overhead and correctness of the spread, not a speed-up, unless the machine has
cores to spare (`cores` in the output says how many).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FAMILIES = ("primitive_placement", "scene_editing", "materials")


def task_ids(n: int) -> list[str]:
    return [f"{FAMILIES[k % len(FAMILIES)]}:1:{110000 + k}" for k in range(n)]


def run(specs, backend=None, workers: int = 1) -> tuple[float, dict]:
    from training import make_policy
    from training.eval.harness import evaluate
    from training.eval.requests import PolicySpec

    start = time.perf_counter()
    if backend is None:
        report = evaluate(specs, lambda: make_policy("oracle"), workers=workers)
    else:
        report = evaluate(specs, None, backend=backend, policy_spec=PolicySpec("oracle"))
    return time.perf_counter() - start, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--slots", type=int, default=1, help="tool-worker slots per node")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from training.eval.harness import task_spec

    specs = [task_spec(i) for i in task_ids(args.episodes)]
    n, s = args.episodes, args.slots
    rows: dict[str, dict] = {}
    rewards: dict[str, list[float]] = {}

    def row(name: str, seconds: float, report: dict, slots: int, **extra) -> None:
        rows[name] = {"slots": slots, "seconds": round(seconds, 2),
                      "episodes_per_min": round(60 * n / seconds, 2), **extra}  # fmt: skip
        rewards[name] = [e["reward"] for e in report["episodes"]]
        print(f"{name:<14} {slots} slot(s)  {rows[name]['episodes_per_min']:7.2f} episodes/min "
              f"({seconds:.1f} s)", file=sys.stderr, flush=True)  # fmt: skip

    run(specs[:1], workers=1)  # imports, first boots: not timed
    for w in (s, 2 * s):
        seconds, report = run(specs, workers=w)
        row(f"local-{w}", seconds, report, w)

    from training.eval.cluster import RayBackend, local_cluster, node_args, start_node

    t0 = time.perf_counter()
    cluster = local_cluster(nodes=1, slots=s)
    started = time.perf_counter() - t0
    import ray

    try:
        t0 = time.perf_counter()
        backend = RayBackend(cluster.address)
        warm = time.perf_counter() - t0
        run(specs[:1], backend)  # the node's imports, first episode: not timed
        seconds, report = run(specs, backend)
        row("ray-1-node", seconds, report, s, cluster_start_s=round(started, 1),
            actors_ready_s=round(warm, 1))  # fmt: skip
        backend.close()
        start_node(cluster, node_args(s))
        cluster.wait_for_nodes()
        backend = RayBackend(cluster.address)
        run(specs[:2], backend)  # both nodes' first episodes: not timed
        seconds, report = run(specs, backend)
        row("ray-2-nodes", seconds, report, 2 * s)
        backend.close()
    finally:
        ray.shutdown()
        cluster.shutdown()

    for name, local in (("ray-1-node", f"local-{s}"), ("ray-2-nodes", f"local-{2 * s}")):
        r, lo = rows[name], rows[local]
        r["ratio_vs_local"] = round(r["episodes_per_min"] / lo["episodes_per_min"], 3)
        r["overhead_s_per_episode"] = round((r["seconds"] - lo["seconds"]) / n, 3)
    same = all(rewards[k] == rewards[f"local-{s}"] for k in rewards)
    out = {"episodes": n, "cores": os.cpu_count(), "rows": rows, "rewards_equal": same}
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
