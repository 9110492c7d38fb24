"""CLI cold start: wall time of `tasks list`, `tools list` and `run --task <level 1> --policy
oracle`, each a fresh process, against a baseline measured in the same run.

The baseline is the eager import set these commands paid before the imports were made lazy
(the `tools` package face with its supervisor and pydantic specs, trimesh and scipy through
the task families' geometry), timed as `python -c "import ..."` and added to the lazy
command's own time. For `run`, the figure that matters is the gap between the process's wall
time and the episode's own time (`wall_ms` in its JSON summary): worker spawn, imports,
warm-up render. `--baseline-tree DIR` (another checkout, e.g. of the commit before a change)
runs the same `run` from that tree too, alternating with this one so both see the same load.

Run: PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_startup.py [--runs 5] [--baseline-tree DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

CLI = [sys.executable, "-m", "studio.cli"]
EAGER = ("import typer, tools.runtime.session, tools.specs, tools.runtime.supervisor, trimesh, scipy.spatial, "
         "training.rewards.geometry, training.tasks")
TASK = "primitive_placement:1:0"


def timed(cmd: list[str], runs: int, tree: str | None = None) -> tuple[float, float, str]:
    """Median wall and CPU (user + system, children included) seconds of `runs` processes,
    and the last one's stdout: on a busy machine the wall time follows the load, the CPU
    time much less. `tree`: run from that checkout instead (`-m` puts the cwd first on sys.path)."""
    env = dict(os.environ, PYTHONPATH=tree) if tree else os.environ
    walls, cpus, out = [], [], ""
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tree, check=False)
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if p.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-400:]}")
        out = p.stdout
    return statistics.median(walls), statistics.median(cpus), out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--baseline-tree", help="another checkout whose `run` is measured too")
    opts = parser.parse_args()

    bare, bare_cpu, _ = timed([sys.executable, "-c", "pass"], opts.runs)
    eager, eager_cpu, _ = timed([sys.executable, "-c", EAGER], opts.runs)
    print(f"python start {bare:.2f} s; the old eager imports alone {eager:.2f} s "
          f"({eager_cpu:.2f} s CPU); load average {os.getloadavg()[0]:.1f}")
    for name, args in (("tasks list", ["tasks", "list"]), ("tools list", ["tools", "list"])):
        now, now_cpu, _ = timed(CLI + args, opts.runs)
        before = now + eager - bare  # what the command cost when it paid the eager imports
        before_cpu = now_cpu + eager_cpu - bare_cpu
        print(f"{name:10s}: {now:5.2f} s now ({now_cpu:.2f} s CPU) | {before:5.2f} s with eager "
              f"imports ({before_cpu:.2f} s CPU) | {before / now:4.1f}x (target < 1 s)")

    trees: dict[str, str | None] = {"this tree": None}
    if opts.baseline_tree:
        trees = {f"baseline {opts.baseline_tree}": os.path.abspath(opts.baseline_tree), **trees}
    gaps: dict[str, list] = {name: [] for name in trees}
    for _ in range(opts.episodes):
        for name, tree in trees.items():  # alternating: both see the same load
            load = os.getloadavg()[0]
            total, cpu, out = timed(CLI + ["run", "--task", TASK, "--policy", "oracle", "--json",
                                           "--no-record"], 1, tree)
            episode = json.loads(out.strip().splitlines()[-1])["wall_ms"] / 1e3
            gaps[name].append((total, episode, cpu, load))
    for name, runs in gaps.items():
        total, episode, cpu, load = min(runs, key=lambda g: g[0] - g[1])
        print(f"run {TASK} --policy oracle ({name}): {total:5.2f} s wall, episode {episode:5.2f} s, "
              f"start-up gap {total - episode:5.2f} s, {cpu:.1f} s CPU in the CLI (not its jailed workers), load "
              f"{load:.1f} (target gap <= 3 s; best of {opts.episodes})")

if __name__ == "__main__":
    main()
