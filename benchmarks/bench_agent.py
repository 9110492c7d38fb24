"""Agent-loop benchmark: loop overhead, oracle throughput with 1 and 2 workers, prompt tokens.

Run: .venv/bin/python benchmarks/bench_agent.py [--episodes N] [--steps N]

1. Loop overhead per step, excluding policy and tool time: a scripted episode of cheap
   calls through the loop, next to the same calls made directly on the session (baseline).
2. Oracle episodes per minute over test-split tasks with 1 and with 2 tool workers.
3. Prompt tokens per step with the full tool catalogue, and the catalogue's own cost:
   the loop's estimate (4 characters a token) and, when a tiny local model is given or
   can be built, its real tokenizer on the chat-template rendering.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def loop_overhead(pool, steps: int) -> dict:
    from agents.loop.episode_loop import LoopConfig, run_episode
    from agents.policies.simple import PlanPolicy, calls_from_plan
    from tools import ToolSession

    plan = [
        {"tool": "add_primitive", "args": {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}}
    ]
    plan += [
        {"tool": "transform", "args": {"name": "A", "location": [0, 0, 0.01 * i]}}
        for i in range(steps)
    ]
    with ToolSession(pool) as s:
        # baseline: the same calls straight on the session
        s.reset()
        start = time.perf_counter()
        for step in plan:
            s.call(step["tool"], step["args"])
        direct_ms = (time.perf_counter() - start) * 1e3 / len(plan)
        result = run_episode(
            PlanPolicy(calls_from_plan(plan)),
            s,
            "bench",
            config=LoopConfig(max_steps=len(plan) + 1, observe="never"),
        )
        overhead = [st.overhead_ms for st in result.steps if st.calls]
        loop_ms = sum(
            st.overhead_ms + sum(c.wall_ms for c in st.calls) + st.latency_ms for st in result.steps
        ) / len(plan)
    return {
        "steps": len(plan),
        "direct_call_ms": round(direct_ms, 3),
        "loop_step_ms": round(loop_ms, 3),
        "overhead_ms_median": round(statistics.median(overhead), 3),
        "overhead_ms_p90": round(sorted(overhead)[int(0.9 * (len(overhead) - 1))], 3),
        "overhead_vs_tool_call": round(statistics.median(overhead) / direct_ms, 3),
    }


def oracle_throughput(episodes: int) -> dict:
    from tools import ToolSession, WorkerPool
    from training import make_policy
    from training.eval.harness import evaluate, task_spec, without_timing
    from training.tasks import split_ids

    ids = split_ids("test", per_family=max(1, episodes // 10 + 1))[:episodes]
    specs = [task_spec(i) for i in ids]
    out = {"episodes": len(specs)}
    reports = {}
    for workers in (1, 2):
        pool = WorkerPool(size=workers)
        # start-up (worker spawn, first-render shader compile) is not throughput
        warm = [ToolSession(pool) for _ in range(workers)]
        for s in warm:
            s.render()
            s.close()
        start = time.perf_counter()
        reports[workers] = evaluate(
            specs, lambda: make_policy("oracle"), workers=workers, session_factory=functools.partial(ToolSession, pool)
        )
        minutes = (time.perf_counter() - start) / 60
        pool.close()
        out[f"episodes_per_min_{workers}w"] = round(len(specs) / minutes, 2)
        out[f"success_rate_{workers}w"] = reports[workers]["overall"]["success_rate"]
    out["scaling_2w_vs_1w"] = round(out["episodes_per_min_2w"] / out["episodes_per_min_1w"], 3)
    out["same_results"] = without_timing(reports[1]) == without_timing(reports[2])
    return out


def prompt_tokens(tiny_model: Path | None) -> dict:
    from agents.loop.context import RECALL_SPEC, ContextConfig, estimate_tokens, observation
    from agents.loop.episode_loop import DEFAULT_SYSTEM, openai_tools
    from tools import catalogue

    tools = openai_tools(catalogue()) + [RECALL_SPEC]
    cfg = ContextConfig()
    first = [
        {"role": "system", "content": DEFAULT_SYSTEM},
        observation("Goal: a red cube on a table", b"png", {"objects": []}, cfg, -1),
    ]
    schema_chars = len(json.dumps(tools))
    out = {
        "tools": len(tools),
        "catalogue_chars": schema_chars,
        "catalogue_tokens_est": schema_chars // 4,
        "first_prompt_tokens_est": estimate_tokens(first, tools, cfg),
        "first_prompt_tokens_est_without_tools": estimate_tokens(first, None, cfg),
    }
    out["catalogue_share_of_first_prompt"] = round(
        out["catalogue_tokens_est"] / out["first_prompt_tokens_est"], 3
    )
    per_tool = sorted(
        ((len(json.dumps(t)) // 4, t["function"]["name"]) for t in tools), reverse=True
    )
    out["largest_tools_tokens_est"] = dict((name, n) for n, name in per_tool[:5])
    if tiny_model is not None:
        from transformers import AutoProcessor

        proc = AutoProcessor.from_pretrained(tiny_model)
        msgs = [
            {"role": "system", "content": DEFAULT_SYSTEM},
            {"role": "user", "content": "Goal: a red cube on a table"},
        ]

        def count(**kw) -> int:
            text = proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False, **kw)
            return len(proc.tokenizer(text, add_special_tokens=False).input_ids)

        n_with, n_without = count(tools=tools), count()
        out["tiny_tokenizer_prompt_with_tools"] = n_with
        out["tiny_tokenizer_catalogue_tokens"] = n_with - n_without
    return out


def episode_tokens(pool) -> dict:
    """Estimated prompt tokens per step over an oracle episode (full catalogue, renders)."""
    from tools import ToolSession
    from training import make_policy
    from training.eval.harness import run_spec, task_spec

    with ToolSession(pool) as s:
        record = run_spec(task_spec("composition:3:110002"), make_policy("oracle"), s)
    steps = record["_result"].steps
    est = [st.prompt_tokens_est for st in steps]
    return {"task": record["task"], "steps": len(steps), "prompt_tokens_est_per_step": est,
            "mean_prompt_tokens_est": round(statistics.fmean(est), 1)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument(
        "--tiny-model", type=Path, default=None, help="tiny model dir (built if absent)"
    )
    args = parser.parse_args()
    from tools import WorkerPool

    tiny = args.tiny_model
    if tiny is None:
        from training.sft.tiny_model import build_tiny_model

        tiny = build_tiny_model(Path(tempfile.mkdtemp(prefix="mw-bench-")) / "tiny")
    report = {"prompt_tokens": prompt_tokens(tiny)}
    print(json.dumps(report, indent=1), flush=True)
    pool = WorkerPool(size=1)
    report["loop_overhead"] = loop_overhead(pool, args.steps)
    print(json.dumps({"loop_overhead": report["loop_overhead"]}, indent=1), flush=True)
    report["episode_tokens"] = episode_tokens(pool)
    print(json.dumps({"episode_tokens": report["episode_tokens"]}, indent=1), flush=True)
    pool.close()
    report["oracle_throughput"] = oracle_throughput(args.episodes)
    print(json.dumps({"oracle_throughput": report["oracle_throughput"]}, indent=1), flush=True)
    lo, th = report["loop_overhead"], report["oracle_throughput"]
    print(
        f"\nloop overhead {lo['overhead_ms_median']} ms/step = {lo['overhead_vs_tool_call']}x a direct tool call "
        f"({lo['direct_call_ms']} ms); oracle {th['episodes_per_min_1w']} ep/min (1 worker), "
        f"{th['episodes_per_min_2w']} ep/min (2 workers) = {th['scaling_2w_vs_1w']}x; catalogue "
        f"{report['prompt_tokens']['catalogue_tokens_est']} tokens est. = "
        f"{report['prompt_tokens']['catalogue_share_of_first_prompt']} of the first prompt"
    )


if __name__ == "__main__":
    main()
