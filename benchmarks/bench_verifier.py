"""What the verifier adds per episode: checkers in a clean worker vs in the policy's worker.

For each task (one per family, level 1), solve it with the oracle, then score the final scene
both ways in the same run: in place (the old path: `get_scene`/exports asked of the worker
the policy ran in) and through `training.verify` (copy the committed scene into a warm clean
worker, load it with scripts off, run the same checkers there). Prints per-task times, the
mean added milliseconds per episode and the ratio; rewards must agree.

    .venv/bin/python benchmarks/bench_verifier.py [--repeats R] [--seed S]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools import ToolSession, WorkerPool  # noqa: E402
from training.tasks import get_task, list_families  # noqa: E402
from training.tasks.checks import evaluate_task  # noqa: E402
from training.tasks.runner import run_calls  # noqa: E402
from training.tasks.verifier import Verifier  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    opts = ap.parse_args()
    families = [f["family"] for f in list_families() if f["family"] != "render_reconstruction"]
    pool = WorkerPool(size=1)
    verifier = Verifier(pool_size=1)
    rows, added = [], []
    try:
        for fam in families:
            task = get_task(f"{fam}:1:{opts.seed}")
            with ToolSession(pool) as s:
                s.reset()
                task.setup(s)
                calls = run_calls(s, task.oracle)
                evaluate_task(task, s, calls)  # warm caches (reference parts) for both paths
                verifier.verify(task, s, calls)
                inplace, verified = [], []
                for _ in range(opts.repeats):
                    t0 = time.perf_counter()
                    a = evaluate_task(task, s, calls)
                    t1 = time.perf_counter()
                    b = verifier.verify(task, s, calls)
                    t2 = time.perf_counter()
                    inplace.append(t1 - t0)
                    verified.append(t2 - t1)
                    assert (a.total, a.success) == (b.total, b.success), (task.id, a, b)
            mi, mv = statistics.median(inplace) * 1000, statistics.median(verified) * 1000
            rows.append((task.id, mi, mv))
            added.append(mv - mi)
    finally:
        verifier.close()
        pool.close()
    print(f"{'task':<32} {'in place ms':>12} {'verifier ms':>12}")
    for tid, mi, mv in rows:
        print(f"{tid:<32} {mi:12.1f} {mv:12.1f}")
    tot_i = sum(r[1] for r in rows)
    tot_v = sum(r[2] for r in rows)
    print(f"added per episode: median {statistics.median(added):.0f} ms, mean "
          f"{statistics.mean(added):.0f} ms; verifier/in-place {tot_v / tot_i:.2f}x "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
