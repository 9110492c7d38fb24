"""Small statistics for stage reports: rates with Wilson intervals, means with t intervals,
paired differences between stages evaluated on the same held-out tasks."""

from __future__ import annotations

import math
import statistics

Z95 = 1.959964


def wilson(successes: float, n: int) -> list[float]:
    """95% Wilson score interval for a proportion."""
    if n == 0:
        return [0.0, 1.0]
    p = successes / n
    denom = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denom
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def _t95(df: int) -> float:
    # Two-sided 95% Student t quantiles for small samples; normal beyond 30.
    table = {
        1: 12.706,
        2: 4.303,
        3: 3.182,
        4: 2.776,
        5: 2.571,
        6: 2.447,
        7: 2.365,
        8: 2.306,
        9: 2.262,
        10: 2.228,
        12: 2.179,
        15: 2.131,
        20: 2.086,
        25: 2.060,
        30: 2.042,
    }
    if df <= 0:
        return float("inf")
    for k in sorted(table):
        if df <= k:
            return table[k]
    return Z95


def mean_ci(values: list[float]) -> list[float]:
    if len(values) < 2:
        v = values[0] if values else 0.0
        return [v, v]
    m, sd = statistics.fmean(values), statistics.stdev(values)
    half = _t95(len(values) - 1) * sd / math.sqrt(len(values))
    return [round(m - half, 4), round(m + half, 4)]


def stage_summary(report: dict) -> dict:
    """Per-stage figures from an eval report.

    valid_call_rate: calls that parsed and passed the tool's JSON schema, over calls made (an
    episode whose first reply has no call counts as one invalid attempt, so a model that never
    writes a parseable call scores 0, not 0/0). ran_ok_rate: calls that also ran without error
    on the scene (e.g. the named object exists), pooled the same way.
    """
    episodes = report["episodes"]
    n = len(episodes)
    broken = [e for e in episodes if e.get("status") == "error"]
    if broken and len(broken) == n:
        raise RuntimeError(f"every evaluation episode failed to run: {broken[0].get('error')}")
    ok_calls = sum(e.get("calls", 0) - e.get("tool_errors", 0) for e in episodes)
    attempts = sum(max(e.get("calls", 0), 1) for e in episodes)
    successes = sum(1 for e in episodes if e["success"])
    rewards = [float(e["reward"]) for e in episodes]
    overall = report["overall"]
    schema = report.get("schema_valid_calls") or {"valid": ok_calls, "attempts": attempts}
    return {
        "episodes": n,
        "valid_call_rate": round(schema["valid"] / schema["attempts"], 4)
        if schema["attempts"]
        else 0.0,
        "valid_call_rate_ci95": wilson(schema["valid"], schema["attempts"]),
        "ran_ok_rate": round(ok_calls / attempts, 4) if attempts else 0.0,
        "ran_ok_rate_ci95": wilson(ok_calls, attempts),
        "success_rate": round(successes / n, 4) if n else 0.0,
        "success_rate_ci95": wilson(successes, n),
        "mean_reward": round(statistics.fmean(rewards), 4) if rewards else 0.0,
        "mean_reward_ci95": mean_ci(rewards),
        "components": overall.get("components", {}),
        "tool_error_rate": overall.get("tool_error_rate"),
        "mean_steps": overall.get("mean_steps"),
        "episodes_not_run": len(broken),
        "families": {
            k: {"success_rate": v.get("success_rate"), "mean_reward": v.get("mean_reward")}
            for k, v in report.get("families", {}).items()
        },
        "rewards_by_task": {e["task"]: float(e["reward"]) for e in episodes},
    }


def difference(before: dict, after: dict) -> dict:
    """Paired difference of mean reward (after - before) over the tasks both stages ran."""
    a, b = before["rewards_by_task"], after["rewards_by_task"]
    common = sorted(set(a) & set(b))
    diffs = [b[t] - a[t] for t in common]
    return {
        "tasks": len(common),
        "mean_difference": round(statistics.fmean(diffs), 4) if diffs else 0.0,
        "ci95": mean_ci(diffs),
        "better": sum(1 for d in diffs if d > 1e-9),
        "worse": sum(1 for d in diffs if d < -1e-9),
        "same": sum(1 for d in diffs if abs(d) <= 1e-9),
    }


def summary_text(report: dict) -> str:
    """A readable table of the three stages and the two paired differences."""
    lines = [
        f"Pipeline {report['config']} - held-out {report['held_out']['split']} seeds, "
        f"families {', '.join(report['held_out']['families'])} "
        f"({report['stages']['sft']['episodes']} episodes per stage), {report['wall_seconds']:.0f} s",
        "",
        f"{'stage':<10} {'valid calls':>20} {'success':>20} {'mean reward':>24}",
    ]
    for name, s in report["stages"].items():
        vc, sr, mr = s["valid_call_rate_ci95"], s["success_rate_ci95"], s["mean_reward_ci95"]
        lines.append(
            f"{name:<10} {s['valid_call_rate']:>6.1%} [{vc[0]:.0%}, {vc[1]:.0%}]"
            f" {s['ran_ok_rate']:>8.1%}"
            f" {s['success_rate']:>8.1%} [{sr[0]:.0%}, {sr[1]:.0%}]"
            f" {s['mean_reward']:>9.3f} [{mr[0]:.3f}, {mr[1]:.3f}]"
        )
    chosen = report.get("training", {}).get("select_sft", {}).get("result")
    if chosen:
        tried = ", ".join(f"{c['step']}: {c['valid_call_rate']:.0%}" for c in chosen["candidates"])
        lines.append(
            f"sft = checkpoint {chosen['chosen']['step']}, chosen on {chosen['split']} seeds "
            f"by valid-call rate ({tried})"
        )
    for key, label in (
        ("sft_vs_untrained_mean_reward", "SFT - untrained"),
        ("grpo_vs_sft_mean_reward", "GRPO - SFT"),
    ):
        d = report[key]
        lines.append(
            f"{label}: mean reward {d['mean_difference']:+.3f} (95% CI {d['ci95'][0]:+.3f} .. "
            f"{d['ci95'][1]:+.3f}; {d['better']} better, {d['worse']} worse, {d['same']} same)"
        )
    held = report.get("held_out_family")
    if held:
        names = held.get("families") or [held["family"]]
        lines.append(f"held-out famil{'y' if len(names) == 1 else 'ies'} {', '.join(names)} "
                     f"({held['stages']['sft']['episodes']} test episodes per stage, never "
                     "trained on):")  # fmt: skip
        for name, s in held["stages"].items():
            mr = s["mean_reward_ci95"]
            lines.append(f"  {name:<6} valid calls {s['valid_call_rate']:.1%}, success "
                         f"{s['success_rate']:.1%}, mean reward {s['mean_reward']:.3f} "
                         f"[{mr[0]:.3f}, {mr[1]:.3f}]")  # fmt: skip
        d = held["grpo_vs_sft_mean_reward"]
        lines.append(f"  GRPO - SFT: {d['mean_difference']:+.3f} (95% CI {d['ci95'][0]:+.3f} .. "
                     f"{d['ci95'][1]:+.3f})")  # fmt: skip
    return "\n".join(lines)
