"""What the verifier costs per episode, three ways in the same run.

For each task (one per family, level 1), solve it with the oracle, then score the final scene:
- in place: the checkers ask the worker the policy ran in (no protection at all);
- commit load: the verifier before #29: the final commit, copied into a warm clean worker and
  loaded with scripts off; validity from the reported `ok` flags (here: the final commit the
  trusted side vaults itself, so a planted commit is not what it reads);
- rebuild: `training.verify` now: every call of the ledger run again in a clean worker,
  code calls taken from the vault, validity from the rebuild.
Prints per-task times and each path's ratio to the in-place one; rewards must agree.

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

from tools import ToolSession, WorkerPool
from tools.trust import ledger  # noqa: E402
from training.tasks import get_task, list_families  # noqa: E402
from training.tasks.checks.verdict import evaluate_task  # noqa: E402
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
                inplace, loaded, verified = [], [], []
                for _ in range(opts.repeats):
                    t0 = time.perf_counter()
                    a = evaluate_task(task, s, calls)
                    t1 = time.perf_counter()
                    c = _commit_load(verifier, s, task, calls)
                    t2 = time.perf_counter()
                    b = verifier.verify(task, s, calls)
                    t3 = time.perf_counter()
                    inplace.append(t1 - t0)
                    loaded.append(t2 - t1)
                    verified.append(t3 - t2)
                    assert (a.total, a.success) == (b.total, b.success) == (c.total, c.success), \
                        (task.id, a, b, c)
            mi, ml, mv = (statistics.median(x) * 1000 for x in (inplace, loaded, verified))
            rows.append((task.id, mi, ml, mv))
            added.append(mv - ml)
    finally:
        verifier.close()
        pool.close()
    print(f"{'task':<32} {'in place ms':>12} {'commit load ms':>15} {'rebuild ms':>11}")
    for tid, mi, ml, mv in rows:
        print(f"{tid:<32} {mi:12.1f} {ml:15.1f} {mv:11.1f}")
    tot_i, tot_l, tot_v = (sum(r[k] for r in rows) for k in (1, 2, 3))
    print(f"rebuild minus commit load per episode: median {statistics.median(added):.0f} ms, "
          f"mean {statistics.mean(added):.0f} ms; rebuild/commit load {tot_v / tot_l:.2f}x, "
          f"commit load/in-place {tot_l / tot_i:.2f}x, rebuild/in-place {tot_v / tot_i:.2f}x "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


def _commit_load(verifier: Verifier, session: ToolSession, task, calls):
    """The verifier as it was before #29 (the baseline): the final commit loaded into a clean
    worker, the checkers there, validity from the calls' reported flags."""
    vault = ledger.Ledger.open()
    try:
        final = vault.take(os.fspath(session.scratch), session._acked_commit)
        with verifier.room.rebuild(final, []) as (clean, _):
            return evaluate_task(task, clean, calls)
    finally:
        vault.close()


if __name__ == "__main__":
    main()
