"""The geometry checker's start: forked from the checker template against started from scratch
(the baseline, `MODELWRIGHT_CHECKER_TEMPLATE=0`), measured in the same run, alternating.

Each episode scored takes a booted checker and starts the next one in the background, beside
the next episode's model turns, so what a start costs in CPU is what it takes from them. Per
start (to `ready`) and kill: the CPU of the checker's own processes (user + system from
/proc, read as it is ready), the machine's busy CPU over the whole start and kill (everything
that ran, neighbours too: compare on an idle machine), and the wall time. Then one real check
(an oracle episode of `primitive_placement`) each way, its verdict compared.

Run: PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_checker_start.py [--starts 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

TICK = os.sysconf("SC_CLK_TCK")


def busy_s() -> float:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / TICK


def tree_cpu_s(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total / TICK


def one_start(pool, name: str) -> dict:
    from training.tasks.checker_process import CheckerProcess

    b, t = busy_s(), time.perf_counter()
    proc = CheckerProcess(pool.root, name, False)
    own = tree_cpu_s(proc.host_pids())
    forked = proc.forked is not None
    proc.kill()
    return {"forked": forked, "own_cpu_s": own, "busy_cpu_s": busy_s() - b,
            "wall_s": time.perf_counter() - t}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=10)
    args = ap.parse_args()
    from training.tasks.checker_process import TEMPLATE, CheckerPool

    switch = TEMPLATE.switch
    pool = CheckerPool(spares=0)
    rows: dict[str, list[dict]] = {"scratch": [], "forked": []}
    load = os.getloadavg()[0]
    try:
        os.environ[switch] = "1"
        one_start(pool, "warm").get("forked")  # the template's own start, once: not counted
        for i in range(args.starts):
            for way, value in (("scratch", "0"), ("forked", "1")):
                os.environ[switch] = value
                rows[way].append(one_start(pool, f"{way}{i}"))
    finally:
        pool.close()
    assert all(not r["forked"] for r in rows["scratch"]) and all(r["forked"] for r in rows["forked"])
    out = {"starts": args.starts, "load": (round(load, 2), round(os.getloadavg()[0], 2))}
    for way, rs in rows.items():
        out[way] = {k: round(statistics.median(r[k] for r in rs), 4) for k in ("own_cpu_s", "busy_cpu_s", "wall_s")}
    for k in ("busy_cpu_s", "wall_s"):  # (own CPU is counted in 10 ms ticks: a fork's is ~0)
        out[f"scratch/forked {k}"] = round(out["scratch"][k] / max(out["forked"][k], 1e-4), 1)
    out["verdicts_equal"] = _same_verdict(switch)
    print(json.dumps(out, indent=1))


def _same_verdict(switch: str) -> bool:
    from tools import ToolSession, WorkerPool
    from training.tasks import checker, get_task
    from training.tasks.checker_process import CheckerPool
    from training.tasks.runner import run_calls

    task = get_task("primitive_placement:2:110001")
    workers = WorkerPool(size=1)
    got = []
    try:
        for value in ("0", "1"):
            os.environ[switch] = value
            pool = CheckerPool(spares=0)
            try:
                with ToolSession(workers) as s:
                    task.setup(s)
                    calls = run_calls(s, task.oracle)
                    v = checker.check(task, s, calls, pool=pool)
                    got.append((v.total, v.components, v.success, v.details))
            finally:
                pool.close()
    finally:
        workers.close()
    return got[0] == got[1]


if __name__ == "__main__":
    main()
