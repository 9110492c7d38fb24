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
        "levels": by_level(report),
        "phrasings": {name: rate(group) for name, group in _by_phrasing(episodes).items()},
    }


def _level_of(task: str) -> int | None:
    parts = str(task).split(":")
    return int(parts[1]) if len(parts) in (3, 4) and parts[1].isdigit() else None


def _by_phrasing(episodes: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for e in episodes:
        if _level_of(e["task"]) is not None:
            out.setdefault("unseen" if str(e["task"]).endswith(":unseen") else "seen", []).append(e)
    return out


def rate(episodes: list[dict]) -> dict:
    """Success of some episodes with its 95% Wilson interval."""
    n, k = len(episodes), sum(1 for e in episodes if e["success"])
    return {"episodes": n, "success_rate": round(k / n, 4) if n else 0.0,
            "success_rate_ci95": wilson(k, n)}  # fmt: skip


def by_level(report: dict) -> dict:
    """Per level: success with its 95% interval, for all the level's episodes and for each
    phrasing apart (seen / unseen goals), with the eval's calls, prompt tokens per turn and
    overflows (training/eval/harness.py `level_metrics`)."""
    groups: dict[int, list[dict]] = {}
    for e in report["episodes"]:
        level = _level_of(e["task"])
        if level is not None:
            groups.setdefault(level, []).append(e)
    extra = report.get("levels", {})
    return {
        str(lv): {**extra.get(str(lv), {}), **rate(group),
                  "phrasings": {n: rate(g) for n, g in _by_phrasing(group).items()}}
        for lv, group in sorted(groups.items())
    }  # fmt: skip


def difference(before: dict, after: dict, levels: list[int] | None = None,
               phrasing: str | None = None) -> dict:  # fmt: skip
    """Paired difference of mean reward (after - before) over the tasks both stages ran;
    only those of `levels` and of one `phrasing` (`seen`, `unseen`) when given."""
    a, b = before["rewards_by_task"], after["rewards_by_task"]
    common = sorted(
        t for t in set(a) & set(b)
        if (levels is None or _level_of(t) in levels)
        and (phrasing is None or (t.endswith(":unseen")) == (phrasing == "unseen"))
    )  # fmt: skip
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
    pairs = [(report.get("sft_vs_untrained_mean_reward"), "SFT - untrained"),
             (report["grpo_vs_sft_mean_reward"], "GRPO - SFT")]
    pooled = report.get("grpo_vs_sft_by_phrasing")
    if pooled:
        above = ", ".join(str(lv) for lv in pooled["levels"])
        pairs += [(d, f"GRPO - SFT, levels {above}, {name} phrasings")
                  for name, d in pooled.items() if name != "levels"]  # fmt: skip
    for d, label in pairs:
        if d is None:
            continue
        lines.append(
            f"{label}: mean reward {d['mean_difference']:+.3f} (95% CI {d['ci95'][0]:+.3f} .. "
            f"{d['ci95'][1]:+.3f}; {d['better']} better, {d['worse']} worse, {d['same']} same)"
        )
    for name, s in report["stages"].items():
        for lv, m in (s.get("levels") or {}).items():
            if len(s["levels"]) < 2 and not m.get("phrasings", {}).get("unseen"):
                continue
            parts = [f"{p} {g['success_rate']:.1%} [{g['success_rate_ci95'][0]:.0%}, "
                     f"{g['success_rate_ci95'][1]:.0%}] of {g['episodes']}"
                     for p, g in m.get("phrasings", {}).items()]  # fmt: skip
            lines.append(f"{name} level {lv}: success " + "; ".join(parts))
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
    long = report.get("long")
    if long:
        for lv, m in long.get("levels", {}).items():
            lines.append(f"long tasks, level {lv} (grpo): success {m['success_rate']:.1%} of "
                         f"{m['episodes']}, {m.get('mean_calls')} calls per episode, "
                         f"{m.get('mean_prompt_tokens')} prompt tokens per turn (max "
                         f"{m.get('max_prompt_tokens')}), {m.get('overflowed')} overflowed")
    return "\n".join(lines)
