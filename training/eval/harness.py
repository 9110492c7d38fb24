"""The evaluation harness: run a policy over tasks or benchmark cases and report.

`evaluate` turns each task id (or benchmark case) into one episode of the agents loop,
runs them on the episode scheduler over a pool of tool workers, and aggregates a report:
per family and overall `success_rate`, `mean_reward`, mean reward components, steps,
tool error rate, tokens and latency. `compare` sets two reports side by side (the
regression table of `eval --compare`). Results per episode are kept in the report, in
submission order, so two runs can be compared episode by episode.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import training.eval.oracle  # noqa: F401  (registers the oracle and reference policies)
from agents import LoopConfig, run_episode
from tools import Session

# Keys of an episode record that depend on the machine's speed, not on what happened.
TIMING_KEYS = ("latency_ms", "wall_ms")


@dataclass
class EpisodeSpec:
    """One thing to evaluate: the goal, how to build the start state and how to check."""

    key: str  # task id or benchmark case id
    family: str
    goal: str
    setup: Callable[[Any], Any] | None
    checker: Callable[[Any, list[dict]], Any] | None
    task_info: dict = field(default_factory=dict)
    budget: int = 20
    task_id: str | None = None
    task_params: dict | None = None


def task_spec(task_id: str) -> EpisodeSpec:
    from training.tasks import get_task
    from training.tasks.toolbox import family_tools

    task = get_task(task_id)
    return EpisodeSpec(
        key=task.id,
        family=task.family,
        goal=task.prompt,
        setup=task.setup,
        checker=task.evaluate,
        task_info={"task_id": task.id, "family": task.family, "level": task.level,
                   "tools": list(family_tools(task.family, task.level))},  # fmt: skip
        budget=task.budget,
        task_id=task.id,
        task_params=task.parameters,
    )


def benchmark_specs(folder: str | Path) -> tuple[list[EpisodeSpec], list[dict]]:
    """One episode per case and prompt of an external benchmark folder, and the skipped
    (malformed) cases with their reasons."""
    from training.tasks.benchmark import PART_NAME, load_benchmark

    bench = load_benchmark(folder)
    specs = []
    for case in bench.cases.values():
        for i in range(len(case.prompts)):
            task = case.task(i)
            key = task.id if len(case.prompts) == 1 else f"{task.id}#{i}"
            info = {"task_id": key, "family": task.family, "plan": task.oracle}
            if case.reference:
                info["reference"] = {"code": case.reference, "name": PART_NAME}
            specs.append(
                EpisodeSpec(
                    key=key,
                    family=task.family,
                    goal=task.prompt,
                    setup=task.setup,
                    checker=task.evaluate,
                    task_info=info,
                    budget=task.budget,
                    task_id=None,
                    task_params=task.parameters,
                )  # fmt: skip
            )
    return specs, bench.skipped


def run_spec(
    spec: EpisodeSpec,
    policy: Any,
    session: Session,
    *,
    config: LoopConfig | None = None,
    store: Any = None,
    source: str = "agent",
    subscribers: tuple = (),
    cancel: Any = None,
    meta: dict | None = None,
) -> dict:
    """Run one episode of `spec` and return its record (the `run --json` summary). `meta`:
    more episode fields for the store (model, adapter, tags), e.g. an RL rollout's run/step."""
    config = config or LoopConfig()
    config = LoopConfig(**{**config.__dict__, "max_steps": min(config.max_steps, spec.budget)})
    recorder_factory = None
    if store is not None:

        extra = meta

        def recorder_factory(**meta: Any) -> Any:
            return store.begin_episode(
                task_id=spec.task_id, task_params=spec.task_params, source=source,
                **{**meta, **(extra or {})},
            )

    result = run_episode(
        policy,
        session,
        spec.goal,
        setup=spec.setup,
        checker=spec.checker,
        config=config,
        task_info=spec.task_info,
        subscribers=subscribers,
        cancel=cancel,
        recorder_factory=recorder_factory,
    )
    record = {"task": spec.key, "family": spec.family, **result.summary()}
    record["success"] = bool(result.success)
    record["reward"] = float(result.reward) if result.reward is not None else 0.0
    record["_result"] = result  # dropped from the JSON report; kept for --out
    return record


def evaluate(
    specs: list[EpisodeSpec],
    policy_factory: Callable[[], Any],
    *,
    workers: int = 1,
    config: LoopConfig | None = None,
    store: Any = None,
    source: str = "agent",
    session_factory: Callable[[], Any] | None = None,
    progress: Callable[[dict, int, int], None] | None = None,
    seed: int = 0,
) -> dict:
    """Run every spec (one fresh policy each) on `workers` tool workers; returns the report."""

    def job(spec: EpisodeSpec):
        def run(session: Session, job_seed: int) -> dict:
            return run_spec(
                spec, policy_factory(), session, config=config, store=store, source=source
            )

        return run

    def on_done(outcome, done: int, total: int) -> None:
        if progress is not None:
            progress(_record(outcome, spec_by_key[outcome.key]), done, total)

    spec_by_key = {s.key: s for s in specs}
    scored = any(s.checker is not None for s in specs)
    with episode_scheduler(workers, session_factory, scored=scored, seed=seed) as scheduler:
        for spec in specs:
            scheduler.submit(spec.key, job(spec))
        outcomes = scheduler.run(progress=on_done)
        retries = scheduler.retries
    records = [_record(o, spec_by_key[o.key]) for o in outcomes]
    report = aggregate(records)
    report["retries"] = retries
    return report


def episode_scheduler(workers: int, session_factory: Callable[[], Any] | None = None, *,
                      scored: bool = True, **options: Any) -> Any:  # fmt: skip
    """The scheduler that runs `workers` episodes at once (eval's, and GRPO's rollouts).
    With `scored`, the verifier keeps as many clean workers warm: each episode's checker
    scores in one when it ends, and episodes that end together must not queue on cold
    starts. `options` go to `agents.Scheduler` (seed, deadline_s). Every episode gets a fresh worker
    (one worker, one episode: agents/scheduler.py)."""
    from agents import Scheduler

    if scored:
        from training.tasks.verifier import default_verifier

        default_verifier().reserve(workers)
    return Scheduler(workers, session_factory, **options)


def _record(outcome: Any, spec: EpisodeSpec) -> dict:
    if outcome.ok:
        return {k: v for k, v in outcome.result.items() if k != "_result"}
    # no result: the episode could not run (counted as a failure, with the reason)
    return {
        "task": spec.key,
        "family": spec.family,
        "status": "error",
        "success": False,
        "reward": 0.0,
        "components": {},
        "steps": 0,
        "calls": 0,
        "tool_errors": 0,
        "tokens_in": 0,
        "tokens_out": 0,
        "latency_ms": 0.0,
        "wall_ms": outcome.wall_ms,
        "error": outcome.error,
    }


def aggregate(records: list[dict]) -> dict:
    """The report: overall and per family metrics, plus the episode records."""
    families: dict[str, list[dict]] = {}
    for r in records:
        families.setdefault(r["family"], []).append(r)
    return {
        "overall": _metrics(records),
        "families": {name: _metrics(rs) for name, rs in sorted(families.items())},
        "episodes": records,
    }


def _metrics(records: list[dict]) -> dict:
    n = len(records)
    if n == 0:
        return {"episodes": 0}
    calls = sum(r.get("calls", 0) for r in records)
    errors = sum(r.get("tool_errors", 0) for r in records)
    names = sorted({k for r in records for k in (r.get("components") or {})})
    # a component is averaged over the episodes whose family measures it
    components = {
        k: round(
            statistics.fmean(
                r["components"][k] for r in records if k in (r.get("components") or {})
            ),
            6,
        )
        for k in names
    }
    return {
        "episodes": n,
        "success_rate": round(sum(1 for r in records if r["success"]) / n, 6),
        "mean_reward": round(statistics.fmean(r["reward"] for r in records), 6),
        "components": components,
        "mean_steps": round(statistics.fmean(r.get("steps", 0) for r in records), 4),
        "tool_error_rate": round(errors / calls, 6) if calls else 0.0,
        "mean_tokens_in": round(statistics.fmean(r.get("tokens_in", 0) for r in records), 2),
        "mean_tokens_out": round(statistics.fmean(r.get("tokens_out", 0) for r in records), 2),
        "mean_latency_ms": round(statistics.fmean(r.get("latency_ms", 0.0) for r in records), 3),
        "errors": sum(1 for r in records if r.get("status") in ("error", "fatal")),
    }


def without_timing(report: dict) -> dict:
    """A report with the speed-dependent numbers removed (for equality across runs)."""

    def strip(d: dict) -> dict:
        return {k: v for k, v in d.items() if k not in TIMING_KEYS and k != "mean_latency_ms"}

    return {
        "overall": strip(report["overall"]),
        "families": {k: strip(v) for k, v in report["families"].items()},
        "episodes": [strip({**e, "episode_id": None}) for e in report["episodes"]],
    }


# -- regression compare --------------------------------------------------------------------


@dataclass
class Row:
    family: str
    old_n: int
    new_n: int
    old_success: float | None
    new_success: float | None
    old_reward: float | None
    new_reward: float | None
    gained: int  # episodes that failed before and succeed now
    lost: int
    verdict: str  # better | worse | same | new | gone


def compare(old: dict, new: dict, reward_tolerance: float = 0.01) -> list[Row]:
    """Family by family (and `overall` last): better, worse or the same."""
    rows = []
    names = sorted(set(old["families"]) | set(new["families"]))
    old_eps = {e["task"]: e for e in old.get("episodes", [])}
    new_eps = {e["task"]: e for e in new.get("episodes", [])}
    for name in [*names, "overall"]:
        o = old["overall"] if name == "overall" else old["families"].get(name)
        n = new["overall"] if name == "overall" else new["families"].get(name)
        both = [
            k
            for k in old_eps
            if k in new_eps and (name == "overall" or old_eps[k]["family"] == name)
        ]
        gained = sum(1 for k in both if new_eps[k]["success"] and not old_eps[k]["success"])
        lost = sum(1 for k in both if old_eps[k]["success"] and not new_eps[k]["success"])
        if o is None or n is None:
            verdict = "new" if o is None else "gone"
        else:
            verdict = _verdict(o, n, reward_tolerance)
        rows.append(
            Row(
                family=name,
                old_n=(o or {}).get("episodes", 0),
                new_n=(n or {}).get("episodes", 0),
                old_success=(o or {}).get("success_rate"),
                new_success=(n or {}).get("success_rate"),
                old_reward=(o or {}).get("mean_reward"),
                new_reward=(n or {}).get("mean_reward"),
                gained=gained,
                lost=lost,
                verdict=verdict,
            )
        )
    return rows


def _verdict(old: dict, new: dict, tol: float) -> str:
    if not old.get("episodes") or not new.get("episodes"):
        return (
            "same"
            if old.get("episodes") == new.get("episodes")
            else ("new" if new.get("episodes") else "gone")
        )
    ds = new["success_rate"] - old["success_rate"]
    if abs(ds) > 1e-9:
        return "better" if ds > 0 else "worse"
    dr = new["mean_reward"] - old["mean_reward"]
    if abs(dr) > tol:
        return "better" if dr > 0 else "worse"
    return "same"


def format_table(rows: list[Row]) -> str:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    header = ("family", "n old/new", "success old", "new", "reward old", "new", "+/-", "verdict")
    lines = [header]
    for r in rows:
        lines.append(
            (
                r.family,
                f"{r.old_n}/{r.new_n}",
                pct(r.old_success),
                pct(r.new_success),
                num(r.old_reward),
                num(r.new_reward),
                f"+{r.gained}/-{r.lost}",
                r.verdict,
            )
        )
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines]
    families = [r for r in rows if r.family != "overall"]
    counts = {v: sum(1 for r in families if r.verdict == v) for v in ("better", "worse", "same")}
    out.append(
        f"families: {counts['better']} better, {counts['worse']} worse, {counts['same']} same"
    )
    return "\n".join(out)


def load_report(path: str | Path) -> dict:
    import json

    data = json.loads(Path(path).read_text())
    if "overall" not in data or "families" not in data:
        raise ValueError(f"{path} is not an eval report (no 'overall'/'families')")
    return data
