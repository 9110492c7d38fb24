"""What judging a code call from trusted facts costs the verifier, per episode, in one run.

The verifier runs each `cadquery_script` and `import_file` again in a fresh code worker of its
own (tools/runtime/verifier.py), instead of taking the commit the policy's worker made. This measures
what that adds: the same CAD episodes scored twice, once with a part made by a
`cadquery_script` and once with the same part made by the typed `cad_box` (which the clean
worker runs itself); the ratio is the code call's cost. Both rewards must agree. A
`mesh_repair` episode (its start imports the scan: an `import_file`) is timed beside them.

Each figure is taken idle and beside one CPU-bound neighbour process (a busy loop), in the
same run, since a person's machine is rarely idle.

    .venv/bin/python benchmarks/bench_code_calls.py [--episodes N] [--no-neighbour]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools import ToolSession, WorkerPool  # noqa: E402
from training.tasks import get_task  # noqa: E402
from training.tasks.runner import run_calls  # noqa: E402
from training.tasks.verifier import Verifier  # noqa: E402

SCRIPT = {"tool": "cadquery_script",
          "args": {"name": "Spare", "code": "result = cq.Workplane().box(10, 10, 10)\n"}}
TYPED = {"tool": "cad_box", "args": {"name": "Spare", "length": 10, "width": 10, "height": 10}}


def _busy(stop) -> None:  # the neighbour: one core's worth of pure Python
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def _time_verify(pool, verifier, task_id: str, extra: list[dict]) -> tuple[float, tuple]:
    task = get_task(task_id)
    with ToolSession(pool) as s:
        s.reset()
        task.setup(s)
        calls = run_calls(s, [*extra, *task.oracle])
        t0 = time.perf_counter()
        v = verifier.verify(task, s, calls)
        return time.perf_counter() - t0, (v.total, v.success)


def measure(episodes: int) -> dict[str, float]:
    pool = WorkerPool(size=1)
    verifier = Verifier(pool_size=1)
    try:
        _time_verify(pool, verifier, "cad_parts:1:0", [SCRIPT])  # warm both pools
        typed, script, imports = [], [], []
        for seed in range(episodes):
            tid = f"cad_parts:1:{seed}"
            t_typed, r_typed = _time_verify(pool, verifier, tid, [TYPED])
            t_script, r_script = _time_verify(pool, verifier, tid, [SCRIPT])
            assert r_typed == r_script, (tid, r_typed, r_script)
            t_import, _ = _time_verify(pool, verifier, f"mesh_repair:1:{seed}", [])
            typed.append(t_typed)
            script.append(t_script)
            imports.append(t_import)
    finally:
        verifier.close()
        pool.close()
    return {"typed": statistics.median(typed), "script": statistics.median(script),
            "import": statistics.median(imports), "load": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--no-neighbour", action="store_true", help="Only the idle figures.")
    opts = ap.parse_args()
    rows = [("idle", measure(opts.episodes))]
    if not opts.no_neighbour:
        stop = multiprocessing.Event()
        busy = multiprocessing.Process(target=_busy, args=(stop,), daemon=True)
        busy.start()
        try:
            rows.append(("1 busy neighbour", measure(opts.episodes)))
        finally:
            stop.set()
            busy.join(10)
    print(f"verifier seconds per episode (median of {opts.episodes}), on {os.cpu_count()} cores")
    print(f"{'machine':<18} {'cad_box':>9} {'cadquery_script':>16} {'script/box':>11} "
          f"{'+ per code call':>16} {'mesh_repair (import)':>21} {'load':>6}")
    for name, m in rows:
        print(f"{name:<18} {m['typed']:9.2f} {m['script']:16.2f} {m['script'] / m['typed']:10.2f}x "
              f"{m['script'] - m['typed']:15.2f}s {m['import']:21.2f} {m['load']:6.1f}")


if __name__ == "__main__":
    main()
