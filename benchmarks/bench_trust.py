"""What sealing the trusted side costs episodes: per episode and per GRPO step, in one run.

Each variant is a function that yields a scheduler (`submit`/`run`, as `agents.Scheduler`)
for `workers` slots; the same oracle episodes run on every variant, and each figure is given
as a ratio to the first variant, measured in this run:

- `before_29`: the product before issue 29, rebuilt here as benchmark-only code: kept
  sessions (below) and the verifier as it was (the final commit loaded into a clean worker,
  validity from the reported `ok` flags: `bench_verifier._commit_load`);
- `kept_session`: kept sessions with today's verifier (the rebuild from the ledger): each slot
  keeps one ToolSession across jobs and steps, the sessions opened before the clock (as
  `keep_sessions=True` and the old benchmarks did);
- `fresh_worker`: the product now (GRPO's rollout scheduler, `agents.Scheduler`): every
  episode gets a fresh worker from the pool's spares (a spare per slot and one more), and the
  worker dies with its scratch when the episode ends; the policy is shown Blender tools only,
  so the spares skip CadQuery;
- `fresh_worker_cad`: the same for a run that shows a CAD tool (spares import CadQuery);
- `fresh_scratch`, `fresh_scratch_cad`: `fresh_worker`(`_cad`) with every worker started from
  scratch by bubblewrap (`MODELWRIGHT_WORKER_TEMPLATE=0`), as before issue 47: the product
  forks each worker from the worker template (tools/sandbox/template.py), which imported bpy
  and CadQuery once;
- `inprocess_checker`, `inprocess_checker_cad`: `fresh_worker`(`_cad`) with the task's
  checkers run in the trusted process (`checks.verdict.evaluate_here`), as before the bounded
  geometry checker (issue 45): the product runs them in a jailed checker process per episode
  (training/tasks/checker.py). Each variant also reports the verifier's own time per episode
  (rebuild + checkers, `Verifier.stats`); `--variants inprocess_checker,fresh_worker` gives
  the checker's cost as a ratio.

Before the table: a fresh worker's time to its first call (pool created, session opened, one
`get_scene` answered; no spare), forked from the template vs started from scratch, the
template's own start excluded (it starts once per process).

A new variant is one more function in VARIANTS. Figures: the wall time per episode (one slot,
episodes one after another, so every worker start that is not hidden by a spare shows) and per
GRPO step (`training.rl.rollouts.run_groups`: groups x 4 rollouts on `--workers` slots, the
product's rollout path), with the time a fresh-worker episode waited for its session. Policies
are task oracles (no model): the tool-bound worst case, since generation dilutes it.

    .venv/bin/python benchmarks/bench_trust.py [--episodes N] [--steps S] [--groups G]
        [--workers W] [--repeats R] [--variants A,B,...] [--families F,G,...]
        [--observe changed|text|never]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

FAMILIES = ["primitive_placement", "materials", "scene_editing"]
GROUP = 4  # rollouts per group, as grpo.num_generations
SHOWN = ["add_primitive", "set_material", "delete", "transform"]  # the tools their oracles call


class KeptSessions:
    """Benchmark-only: the removed `Scheduler(keep_sessions=True)`. Slot w holds one session
    for every job it takes, across `run()` calls; jobs go to free slots in submission order."""

    def __init__(self, workers: int, factory: Callable[[], Any]) -> None:
        self.sessions = [factory() for _ in range(workers)]
        for s in self.sessions:
            s.status()  # up before the clock
        self._jobs: list[tuple[str, Any, int]] = []

    def submit(self, key: str, fn: Any, *, priority: int = 0, seed: int | None = None) -> int:
        self._jobs.append((key, fn, len(self._jobs) if seed is None else seed))
        return len(self._jobs) - 1

    def run(self, progress: Any = None, cancel: Any = None) -> list[Any]:
        from agents.loop.scheduler import JobOutcome

        jobs, self._jobs = self._jobs, []
        out: list[Any] = [None] * len(jobs)
        order = iter(range(len(jobs)))
        lock = threading.Lock()

        def work(w: int) -> None:
            while True:
                with lock:
                    i = next(order, None)
                if i is None:
                    return
                key, fn, seed = jobs[i]
                out[i] = JobOutcome(key, seed, result=fn(self.sessions[w], seed), worker=w)

        threads = [threading.Thread(target=work, args=(w,)) for w in range(len(self.sessions))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out

    def close(self) -> None:
        for s in self.sessions:
            s.close()


@contextmanager
def kept_session(workers: int, waits: list[float]) -> Iterator[Any]:
    from tools import ToolSession, WorkerPool

    pool = WorkerPool(size=0)  # kept sessions held their workers: no spares were kept
    scheduler = KeptSessions(workers, lambda: ToolSession(pool))
    try:
        yield scheduler
    finally:
        scheduler.close()
        pool.close()


def _rollout_scheduler(workers: int, waits: list[float], shown: list[str]) -> Iterator[Any]:
    """GRPO's own rollout scheduler (`training.rl.grpo.build_runtime`), its session waits timed."""
    from training.rl.grpo import build_runtime
    from training.train_config import GRPOSpec

    runtime = build_runtime(GRPOSpec(rollout_workers=workers), 0, shown)
    scheduler = runtime.scheduler
    try:
        scheduler.wait_warm()  # the spares a run has booted before its first step
        opened = scheduler.session_factory

        def timed() -> Any:
            start = time.perf_counter()
            session = opened()
            waits.append(time.perf_counter() - start)
            return session

        scheduler.session_factory = timed
        yield scheduler
    finally:
        runtime.close()


@contextmanager
def before_29(workers: int, waits: list[float]) -> Iterator[Any]:
    """Kept sessions, and the verifier as it was before the rebuild (benchmark-only)."""
    from benchmarks.bench_verifier import _commit_load
    from training.tasks.verifier import Verifier

    rebuild = Verifier.verify

    def commit_load(self: Verifier, task: Any, session: Any, calls: list) -> Any:
        return _commit_load(self, session, task, calls)

    Verifier.verify = commit_load
    try:
        with kept_session(workers, waits) as scheduler:
            yield scheduler
    finally:
        Verifier.verify = rebuild


@contextmanager
def fresh_worker(workers: int, waits: list[float]) -> Iterator[Any]:
    """Now: a fresh worker per episode; the policy is shown Blender tools only, so spares skip
    CadQuery."""
    yield from _rollout_scheduler(workers, waits, SHOWN)


@contextmanager
def fresh_worker_cad(workers: int, waits: list[float]) -> Iterator[Any]:
    """Now, for a run that shows CAD tools: the spares import CadQuery before they are ready."""
    yield from _rollout_scheduler(workers, waits, [*SHOWN, "cad_box"])


@contextmanager
def _from_scratch() -> Iterator[None]:
    """Workers started from scratch by bubblewrap: no worker template (before issue 47)."""
    import os

    from tools.sandbox import template

    before = os.environ.get(template.ENV)
    os.environ[template.ENV] = "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(template.ENV, None)
        else:
            os.environ[template.ENV] = before


@contextmanager
def fresh_scratch(workers: int, waits: list[float]) -> Iterator[Any]:
    """`fresh_worker` with every worker started from scratch (no template), as before #47."""
    with _from_scratch():
        yield from _rollout_scheduler(workers, waits, SHOWN)


@contextmanager
def fresh_scratch_cad(workers: int, waits: list[float]) -> Iterator[Any]:
    """`fresh_worker_cad` with every worker started from scratch (no template)."""
    with _from_scratch():
        yield from _rollout_scheduler(workers, waits, [*SHOWN, "cad_box"])


def first_call(repeats: int) -> dict[str, float]:
    """Median seconds from a new pool (no spare) to a fresh worker's first answered call,
    forked from the template and started from scratch, interleaved."""
    from tools import ToolSession, WorkerPool
    from tools.sandbox import template

    def once() -> float:
        start = time.perf_counter()
        pool = WorkerPool(size=0, prewarm=False)
        s = ToolSession(pool, deadline_s=120)
        r = s.call("get_scene", {})
        took = time.perf_counter() - start
        assert r.ok, r.error
        s.close()
        pool.close()
        return took

    template.shared(__import__("tools.runtime.supervisor", fromlist=["_launch"])._launch)  # started once
    got: dict[str, list[float]] = {"template": [], "scratch": []}
    for _ in range(repeats):
        got["template"].append(once())
        with _from_scratch():
            got["scratch"].append(once())
    return {k: statistics.median(v) for k, v in got.items()}


@contextmanager
def checks_in_process() -> Iterator[None]:
    """Benchmark-only: the checkers run in the trusted process, as before issue 45 item 6
    (`checks.evaluate_here`, unbounded), instead of the jailed geometry checker."""
    from training.tasks.checks import verdict as checks

    jailed = checks.evaluate_task
    checks.evaluate_task = checks.evaluate_here
    try:
        yield
    finally:
        checks.evaluate_task = jailed


@contextmanager
def inprocess_checker(workers: int, waits: list[float]) -> Iterator[Any]:
    """`fresh_worker` with the checkers in the trusted process (before the bounded checker)."""
    with checks_in_process():
        yield from _rollout_scheduler(workers, waits, SHOWN)


@contextmanager
def inprocess_checker_cad(workers: int, waits: list[float]) -> Iterator[Any]:
    """`fresh_worker_cad` with the checkers in the trusted process."""
    with checks_in_process():
        yield from _rollout_scheduler(workers, waits, [*SHOWN, "cad_box"])


VARIANTS: dict[str, Callable[[int, list[float]], Any]] = {
    "before_29": before_29,
    "kept_session": kept_session,
    "fresh_worker": fresh_worker,
    "fresh_worker_cad": fresh_worker_cad,
    "fresh_scratch": fresh_scratch,
    "fresh_scratch_cad": fresh_scratch_cad,
    "inprocess_checker": inprocess_checker,
    "inprocess_checker_cad": inprocess_checker_cad,
}
DEFAULT = ["kept_session", "fresh_worker", "fresh_scratch"]
# When the GRPO steps' rollouts render (--observe): "changed" as for a model shown images,
# "text" as for a text-only one (the scene listing, no render: the shipped SmolLM2 pipeline,
# grpo.observe "auto"), "never" (no listing either).
OBSERVE = ["changed"]


def _policy_for(seed: int, greedy: bool = False) -> Any:
    from training.eval.oracle import OraclePolicy

    return OraclePolicy()


def step_times(variant: Callable, workers: int, slots_per_step: list[list[tuple[int, str]]],
               group: int) -> tuple[list[float], list[float], list[list[float]]]:  # fmt: skip
    """Wall seconds of each step of `run_groups` on `variant`, the session waits, and each
    step's rewards (every variant must give the same)."""
    from training.rl.grpo import loop_config
    from training.rl.rollouts import run_groups
    from training.train_config import GRPOSpec

    config = loop_config(GRPOSpec(observe=OBSERVE[0]))
    walls: list[float] = []
    waits: list[float] = []
    rewards: list[list[float]] = []
    with variant(workers, waits) as scheduler:
        for slots in slots_per_step:
            start = time.perf_counter()
            groups = run_groups(scheduler, slots, group, _policy_for, config)
            walls.append(time.perf_counter() - start)
            rewards.append([r.reward for g in groups for r in g])
    return walls, waits, rewards


def measure(names: list[str], args: argparse.Namespace) -> dict:
    from training.rl.curriculum import Curriculum
    from training.tasks.verifier import default_verifier

    curriculum = Curriculum(args.families.split(","), [1], "train", 0)
    default_verifier().reserve(max(args.workers, 1))  # as eval and GRPO do: scoring never waits
    episodes = [[(i, curriculum.task_for(i))] for i in range(args.episodes)]
    steps = [[(s * args.groups + g, curriculum.task_for(s * args.groups + g))
              for g in range(args.groups)] for s in range(args.steps)]  # fmt: skip
    out: dict[str, dict] = {n: {"episode_s": [], "step_s": [], "wait_s": [], "verify": [0, 0.0]}
                            for n in names}  # fmt: skip
    rewards: dict[str, list] = {}
    stats = default_verifier().stats
    for _ in range(args.repeats):  # interleaved: a noisy neighbour hits every variant alike
        for name in names:
            n0, s0 = stats.episodes, stats.seconds
            walls, waits, got = step_times(VARIANTS[name], 1, episodes, 1)
            out[name]["episode_s"] += walls
            out[name]["wait_s"] += waits
            walls, waits, got_steps = step_times(VARIANTS[name], args.workers, steps, GROUP)
            out[name]["step_s"] += walls
            out[name]["wait_s"] += waits
            out[name]["verify"][0] += stats.episodes - n0  # the verifier's own time per episode
            out[name]["verify"][1] += stats.seconds - s0
            rewards.setdefault(name, [got, got_steps])
    first = rewards[names[0]]
    for name in names[1:]:
        if rewards[name] != first:
            raise SystemExit(f"bench_trust: {name} gave other rewards than {names[0]}")
    return {n: {"episode_s": statistics.fmean(v["episode_s"]),
                "step_s": statistics.fmean(v["step_s"]),
                "wait_s": statistics.fmean(v["wait_s"]) if v["wait_s"] else 0.0,
                "verify_s": v["verify"][1] / max(v["verify"][0], 1),
                "episodes": len(v["episode_s"]), "steps": len(v["step_s"])}
            for n, v in out.items()}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=4, help="one-slot episodes per repeat")
    ap.add_argument("--steps", type=int, default=2, help="GRPO steps per repeat")
    ap.add_argument("--groups", type=int, default=2, help=f"groups of {GROUP} per step")
    ap.add_argument("--workers", type=int, default=2, help="rollout slots of a GRPO step")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--first-calls", type=int, default=3, help="fresh workers timed to their first call (0: skip)")
    ap.add_argument("--families", default=",".join(FAMILIES),
                    help="comma-separated task families whose oracles are the episodes")
    ap.add_argument(
        "--variants",
        default=",".join(DEFAULT),
        help=f"comma-separated, the first is the baseline ({', '.join(VARIANTS)})",
    )
    ap.add_argument("--observe", choices=("changed", "text", "never"), default="changed",
                    help="when GRPO steps' rollouts render: after each change (a model shown "
                         "images), text (the scene listing only: a text-only model, as the "
                         "shipped SmolLM2 pipeline) or never")
    args = ap.parse_args()
    OBSERVE[0] = args.observe
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise SystemExit(f"bench_trust: unknown variant(s) {unknown}; known: {list(VARIANTS)}")
    import os

    load = os.getloadavg()[0]
    if args.first_calls:
        fc = first_call(args.first_calls)
        print(f"A fresh worker's first call (median of {args.first_calls}, load {load:.1f}): forked from the "
              f"template {fc['template'] * 1e3:.0f} ms, started from scratch {fc['scratch'] * 1e3:.0f} ms "
              f"(x{fc['scratch'] / fc['template']:.2f})")
    figures = measure(names, args)
    base = figures[names[0]]
    print(
        f"Oracle episodes of {args.families.replace(',', ', ')} (level 1; GRPO steps render: "
        f"{args.observe}); ratios against {names[0]}, "
        f"measured in this run (load average {load:.1f} at the start):"
    )
    for name, f in figures.items():
        print(
            f"  {name:<16} per episode {f['episode_s'] * 1e3:7.0f} ms "
            f"(x{f['episode_s'] / base['episode_s']:.2f}, 1 slot, {f['episodes']} episodes)  "
            f"per GRPO step {f['step_s']:6.2f} s (x{f['step_s'] / base['step_s']:.2f}, "
            f"{args.groups}x{GROUP} rollouts on {args.workers} slots, {f['steps']} steps)  "
            f"waiting for a session {f['wait_s'] * 1e3:.0f} ms/episode  "
            f"verifier {f['verify_s'] * 1e3:.0f} ms/episode "
            f"(x{f['verify_s'] / max(base['verify_s'], 1e-9):.2f})"
        )
    print(json.dumps({"args": vars(args), "figures": figures}))


if __name__ == "__main__":
    main()
