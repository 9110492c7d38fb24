"""KV-cache reuse across turns (issue #48): prompt tokens run per episode and episodes/min.

Run: nice -n 19 .venv/bin/python benchmarks/bench_kv.py [--tasks ID,ID,...] [--max-steps N]

The packaged base with the shipped adapter (what `modelwright eval --policy hf` runs with no
model named: float32, greedy), on level-3 test-split episodes (two families, two seeds each,
in eval's order), each episode twice in the same run, one right after the other: with
`reuse_kv` off (every turn runs its whole prompt: the baseline), then on (a turn starts from
the cached prefix its episode's previous turn, or an earlier episode, left and runs only the
new tokens). Per episode: turns, prompt tokens in the prompts, prompt tokens the model ran,
wall and model seconds, and whether every turn generated the same tokens both times. Ratios
are on / off; the load average is printed beside them (the machine is shared). `--dtype
bfloat16` shows that a bf16 model runs whole prompts. JSON at the end."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# Two families, two test seeds each, in eval's order (a family's episodes one after another).
DEFAULT_TASKS = ("primitive_placement:3:110000", "primitive_placement:3:110001",
                 "materials:3:110000", "materials:3:110001")  # fmt: skip


class Tally:
    """Wraps an HFPolicy; keeps each turn's completion ids and prompt token counts by task."""

    def __init__(self, inner, sink: dict, lock: threading.Lock) -> None:
        self.inner, self.sink, self.lock = inner, sink, lock
        self.name = inner.name
        self.task = "?"

    def reset(self, task_info: dict | None = None) -> None:
        self.task = (task_info or {}).get("task_id", "?")
        self.inner.reset(task_info)

    def act(self, messages, tools):
        reply = self.inner.act(messages, tools)
        t = reply.tokens
        with self.lock:
            row = self.sink.setdefault(self.task, {"turns": [], "prompt": 0, "encoded": 0,
                                                   "policy_s": 0.0, "per_turn": []})  # fmt: skip
            row["turns"].append(t.completion_ids)
            row["per_turn"].append([len(t.prompt_ids), t.prompt_encoded])
            row["policy_s"] += reply.latency_ms / 1e3
            row["prompt"] += len(t.prompt_ids)
            row["encoded"] += t.prompt_encoded
        return reply


def run(loaded, task: str, reuse: bool, store, sink: dict, max_steps: int | None) -> float:
    """One episode as `modelwright eval --policy hf` runs it (a policy on the loaded model,
    the episodes' caches in one store); returns its wall seconds."""
    from agents.policies.hf_policy import HFPolicy
    from training.eval.run_eval import run_episodes
    from training.eval.spec import task_spec

    lock = threading.Lock()
    config = loaded.config

    def factory():
        options = {**config.__dict__, "reuse_kv": reuse}
        one = HFPolicy(type(config)(**options), model=loaded.model, processor=loaded.processor)
        one.share_kv(store)
        return Tally(one, sink, lock)

    start = time.perf_counter()
    report = run_episodes([task], factory, max_steps=max_steps or task_spec(task).budget)
    wall = time.perf_counter() - start
    row = sink.setdefault(task, {"turns": [], "prompt": 0, "encoded": 0, "policy_s": 0.0,
                                 "per_turn": []})  # fmt: skip
    row.update(wall_s=wall, status=report["episodes"][0]["status"],
               success=bool(report["episodes"][0]["success"]))  # fmt: skip
    return wall


def summary(sink: dict, tasks: list[str], reuse: bool) -> dict:
    wall = sum(sink[t]["wall_s"] for t in tasks)
    return {
        "reuse_kv": reuse,
        "wall_s": round(wall, 1),
        "episodes_per_min": round(len(tasks) * 60 / wall, 3),
        "model_s": round(sum(sink[t]["policy_s"] for t in tasks), 1),
        "success": sum(sink[t]["success"] for t in tasks),
        "episodes": {t: {"turns": len(sink[t]["turns"]), "prompt_tokens": sink[t]["prompt"],
                         "prompt_tokens_run": sink[t]["encoded"], "status": sink[t]["status"],
                         "per_turn_prompt_and_run": sink[t]["per_turn"]}
                     for t in tasks},
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(DEFAULT_TASKS))
    parser.add_argument("--max-steps", type=int, default=None, help="cap each episode's turns")
    parser.add_argument("--dtype", default="auto", help="auto (the default: the base's own, "
                        "float32) | bfloat16 | float32")  # fmt: skip
    args = parser.parse_args()
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]

    from agents.policies.hf_policy import make_hf

    load_before = os.getloadavg()
    loaded = make_hf(dtype=args.dtype)  # the shipped adapter on the packaged base
    import torch

    print(f"model {loaded.name} adapter {loaded.config.adapter} dtype {loaded.model.dtype} "
          f"torch threads {torch.get_num_threads()} load {load_before}", flush=True)  # fmt: skip
    from agents.policies.hf_policy import KVStore

    run(loaded, tasks[0], True, KVStore(), {}, 1)  # warm-up, not counted: pages, imports
    # Episode by episode, off then on, so that a change in the machine's load falls on both;
    # the on episodes keep one store, as an eval's do.
    sinks: dict[bool, dict] = {False: {}, True: {}}
    store = KVStore(capacity=2)
    for task in tasks:
        run(loaded, task, False, KVStore(), sinks[False], args.max_steps)
        run(loaded, task, True, store, sinks[True], args.max_steps)
        print(task, {m: {k: v for k, v in sinks[m][task].items() if k != "turns"}
                     for m in (False, True)}, flush=True)  # fmt: skip
    off, on = summary(sinks[False], tasks, False), summary(sinks[True], tasks, True)
    same = {t: sinks[False][t]["turns"] == sinks[True][t]["turns"] for t in tasks}
    run_off = sum(e["prompt_tokens_run"] for e in off["episodes"].values())
    run_on = sum(e["prompt_tokens_run"] for e in on["episodes"].values())
    report = {
        "tasks": tasks,
        "model": loaded.name,
        "adapter": str(loaded.config.adapter),
        "dtype": str(loaded.model.dtype),
        "torch_threads": torch.get_num_threads(),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "off": off,
        "on": on,
        "same_tokens_every_turn": same,
        "prompt_tokens_run_per_episode": {"off": round(run_off / len(tasks), 1),
                                          "on": round(run_on / len(tasks), 1)},
        "ratio_prompt_tokens_run_on_over_off": round(run_on / max(1, run_off), 3),
        "ratio_episodes_per_min_on_over_off": round(
            on["episodes_per_min"] / max(1e-9, off["episodes_per_min"]), 3),
        "ratio_model_s_on_over_off": round(on["model_s"] / max(1e-9, off["model_s"]), 3),
    }  # fmt: skip
    print(json.dumps(report, indent=1), flush=True)


if __name__ == "__main__":
    main()
