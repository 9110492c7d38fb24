"""The evaluation harness: run a policy over tasks or benchmark cases and report.

`evaluate` turns each task id (or benchmark case) into one episode of the agents loop,
runs them on the episode scheduler over a pool of tool workers, and aggregates a report:
per family and overall `success_rate`, `mean_reward`, mean reward components, steps,
tool error rate, tokens and latency; per level (`levels`) success, calls per episode, the
prompt's tokens per model turn and the episodes that overflowed the model's context. `compare` sets two reports side by side (the
regression table of `eval --compare`). Results per episode are kept in the report, in
submission order, so two runs can be compared episode by episode.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents import LoopConfig

# One episode, named and run (moved to training/eval/spec.py; imported from here as before).
from training.eval.spec import (  # noqa: F401
    EpisodeSpec,
    benchmark_specs,
    episode_scheduler,
    run_spec,
    task_spec,
)

# Keys of an episode record that depend on the machine's speed, not on what happened.
TIMING_KEYS = ("latency_ms", "wall_ms")


def evaluate(
    specs: list[EpisodeSpec],
    policy_factory: Callable[[], Any] | None,
    *,
    workers: int = 1,
    config: LoopConfig | None = None,
    store: Any = None,
    source: str = "agent",
    session_factory: Callable[[], Any] | None = None,
    progress: Callable[[dict, int, int], None] | None = None,
    seed: int = 0,
    backend: Any = None,
    policy_spec: Any = None,
) -> dict:
    """Run every spec (one fresh policy each) on `workers` tool workers; returns the report.

    `backend`: an `EpisodeBackend` (training/eval/backend.py) to run on instead of a local
    one made here; a remote one builds the policy from `policy_spec` (data) on its nodes and
    needs specs named by task id. The report is the same whichever runs the episodes."""
    from training.eval.backend import LocalBackend
    from training.eval.requests import EpisodeRequest, PolicySpec, job_seed

    spec_by_key = {s.key: s for s in specs}
    local = backend is None or backend.name == "local"
    if not local:
        if policy_spec is None:
            raise ValueError("a remote backend needs the policy as a spec (name and options)")
        if any(s.task_id is None for s in specs):
            raise ValueError("a benchmark folder runs on the local backend only (its cases "
                             "are not in the task registry)")
    config = config or LoopConfig(observe="auto")
    requests = [
        EpisodeRequest(task_id=s.task_id or s.key, seed=job_seed(seed, i), key=s.key,
                       policy=policy_spec or PolicySpec("in-process"), loop=config,
                       source=source)  # fmt: skip
        for i, s in enumerate(specs)
    ]

    def on_done(outcome, done: int, total: int) -> None:
        if progress is not None:
            progress(_record(outcome, spec_by_key[outcome.request.key]), done, total)

    own = backend is None
    if own:
        scored = any(s.checker is not None for s in specs)
        backend = LocalBackend(
            workers, session_factory, store=store, scored=scored, seed=seed,
            policy_for=(lambda _r, _s: policy_factory()) if policy_factory else None,
            spec_for=lambda r: spec_by_key[r.key],
        )  # fmt: skip
    try:
        outcomes = list(backend.submit(requests, progress=on_done))
    finally:
        if own:
            backend.close()
    records = [_record(o, spec_by_key[o.request.key]) for o in outcomes]
    report = aggregate(records)
    report["retries"] = sum(o.attempts - 1 for o in outcomes)
    return report


def _record(outcome: Any, spec: EpisodeSpec) -> dict:
    if outcome.ok:
        record = dict(outcome.record)
        if outcome.retried and outcome.node != "local":  # run again after its node died
            record["meta"] = {**record.get("meta", {}), "retried": True}
        return record
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
    """The report: overall and per family metrics, plus the episode records. When some
    episodes' goals were in held-out phrasings (task ids `...:unseen`, training/tasks/
    wording.py), `phrasings` has the same metrics for `seen` and `unseen` goals apart."""
    families: dict[str, list[dict]] = {}
    for r in records:
        families.setdefault(r["family"], []).append(r)
    report = {
        "overall": _metrics(records),
        "families": {name: _metrics(rs) for name, rs in sorted(families.items())},
        "levels": {str(k): level_metrics(rs) for k, rs in sorted(levels(records).items())},
        "episodes": records,
    }
    by_phrasing = phrasings(records)
    if "unseen" in by_phrasing:
        report["phrasings"] = {
            name: {"overall": _metrics(rs),
                   "families": {f: _metrics([r for r in rs if r["family"] == f])
                                for f in sorted({r["family"] for r in rs})}}
            for name, rs in by_phrasing.items()
        }  # fmt: skip
    return report


def levels(records: list[dict]) -> dict[int, list[dict]]:
    """Task episodes by their level (from the task id; benchmark cases are in none)."""
    out: dict[int, list[dict]] = {}
    for r in records:
        parts = str(r.get("task", "")).split(":")
        if len(parts) in (3, 4) and parts[1].isdigit():
            out.setdefault(int(parts[1]), []).append(r)
    return out


def level_metrics(records: list[dict]) -> dict:
    """One level's episodes: success, mean calls per episode, the prompt's tokens per model
    turn (mean and max over every turn, as each policy counted them: agents/loop/context.py),
    the turns its budget rule compacted, and the episodes that overflowed the context."""
    n = len(records)
    turns = [t for r in records for t in (r.get("prompt_tokens") or []) if t]
    return {
        "episodes": n,
        "success_rate": round(sum(1 for r in records if r["success"]) / n, 6),
        "mean_calls": round(statistics.fmean(r.get("calls", 0) for r in records), 4),
        "turns": len(turns),
        "mean_prompt_tokens": round(statistics.fmean(turns), 2) if turns else None,
        "max_prompt_tokens": max(turns) if turns else None,
        "context_limit": max((r.get("context_limit") or 0 for r in records), default=0) or None,
        "compacted_turns": sum(r.get("compacted_turns", 0) for r in records),
        "overflowed": sum(1 for r in records if r.get("status") == "overflow"),
    }


def phrasings(records: list[dict]) -> dict[str, list[dict]]:
    """Task episodes by the phrasing their goal was in, `seen` or `unseen` (benchmark cases,
    whose ids are no task ids, are in neither)."""
    from training.tasks.wording import phrasing_of_id

    out: dict[str, list[dict]] = {}
    for r in records:
        name = phrasing_of_id(r.get("task", ""))
        if name is not None:
            out.setdefault(name, []).append(r)
    return out


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
