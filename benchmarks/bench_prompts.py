"""Tokens per first-turn prompt of the packaged base, per task family and level.

A level-1 prompt must fit in 600 tokens of SmolLM2-135M-Instruct's tokenizer (issue #30): the
prompt is the cost driver of every generation and training step on a CPU. This measures the
real prompt: each task's episode runs through the eval harness (its start state built by the
tool worker, the loop's own first observation) with a policy that keeps what the loop shows it
at its first turn and answers without a call, so the episode ends there. The prompt is then
rendered exactly as the hf policy renders it for the base (`encode_prompt`: the Hermes tool
format, text only) with two tool lists:

- toolbox: the family's declared toolbox (`training.tasks.toolbox.family_tools`), shown when no list is
  configured (eval, `run`, the studio);
- config: the pipeline config's `tools:` (configs/pipeline-smollm2-cpu.yaml), only where that
  list has every tool the task's oracle plan calls ("-" otherwise).

The whole catalogue's cost for one prompt is printed once for comparison. Only the tokenizer
is loaded; the episodes need a tool worker. Seeds: the first `--seeds` of the train split per
level (the held-out family, in no training split, from the test split).

    .venv/bin/python benchmarks/bench_prompts.py [--seeds 2] [--families a,b] [--levels 1,2,3]
        [--config configs/pipeline-smollm2-cpu.yaml] [--limit 600] [--per-task]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent
MODEL = "smollm2-135m-instruct"


class FirstTurn:
    """Keeps the first prompt the loop shows it (messages and all offered tools), then ends
    the episode with a reply that has no call."""

    name = "first-turn"

    def __init__(self, sink: dict, lock: threading.Lock) -> None:
        self.sink, self.lock = sink, lock
        self.task_id: str | None = None

    def reset(self, task_info: dict | None = None) -> None:
        self.task_id = (task_info or {}).get("task_id")

    def act(self, messages: list[dict], tools: list[dict]):
        from agents import PolicyReply

        with self.lock:
            self.sink.setdefault(self.task_id, (list(messages), list(tools)))
        return PolicyReply(text="done")


def first_turns(ids: list[str]) -> dict[str, tuple[list[dict], list[dict]]]:
    """task id -> (messages, tools) of its first turn, from real episodes (one tool worker)."""
    from training.eval.run_eval import run_episodes

    sink: dict = {}
    lock = threading.Lock()
    report = run_episodes(ids, lambda: FirstTurn(sink, lock), max_steps=1, workers=1)
    missing = [t for t in ids if t not in sink]
    if missing:
        errors = [e.get("error") for e in report.get("episodes", []) if e.get("error")]
        raise SystemExit(f"no first turn captured for {missing[:3]}: {errors[:2]}")
    return sink


def task_ids(families: list[str], levels: list[int] | None, seeds: int) -> list[str]:
    from training.tasks import FAMILIES, SPLITS

    out = []
    for family in families:
        split = SPLITS["test" if FAMILIES[family].held_out else "train"]
        for level in levels or FAMILIES[family].levels:
            if level in FAMILIES[family].levels:
                out += [f"{family}:{level}:{split[k]}" for k in range(seeds)]
    return out


def config_tools(path: Path) -> list[str]:
    import yaml

    return list(yaml.safe_load(path.read_text())["tools"])


def measure(ids: list[str], turns: dict, listed: list[str]) -> tuple[list[dict], dict]:
    """One row per task id: prompt tokens with the toolbox and with the config's list."""
    from transformers import AutoTokenizer

    from agents import resolve_model
    from agents.policies.hf_policy import encode_prompt, shown_tools
    from training.tasks import get_task
    from training.tasks.base import family_tools

    tok = AutoTokenizer.from_pretrained(resolve_model(MODEL, probe=False).name)

    def count(messages: list[dict], tools: list[dict]) -> int:
        return int(encode_prompt(tok, messages, tools)["input_ids"].shape[1])

    rows = []
    for task_id in ids:
        messages, tools = turns[task_id]
        task = get_task(task_id)
        box = list(family_tools(task.family))
        oracle = {step["tool"] for step in task.oracle}
        covered = oracle <= set(listed)
        rows.append({
            "task": task_id, "family": task.family, "level": task.level,
            "toolbox_n": len(box), "toolbox": count(messages, shown_tools(tools, box)),
            "config": count(messages, shown_tools(tools, listed)) if covered else None,
            "none": count(messages, []),
        })  # fmt: skip
    first = ids[0]
    whole = {"task": first, "catalogue_n": len(turns[first][1]),
             "catalogue": count(*turns[first])}  # fmt: skip
    return rows, whole


def table(rows: list[dict], limit: int) -> list[str]:
    """Markdown rows: family, level, tools in the toolbox, tokens min-max per tool list."""

    def span(values: list[int]) -> str:
        return f"{min(values)}-{max(values)}" if min(values) != max(values) else str(values[0])

    def fits(values: list[int]) -> str:
        over = sum(v > limit for v in values)
        return "yes" if not over else f"no: {over}/{len(values)} over, max +{max(values) - limit}"

    out = [f"| family | level | toolbox tools | toolbox tokens | <= {limit} | config tokens | "
           f"<= {limit} | no tools |", "| --- | ---: | ---: | ---: | --- | ---: | --- | ---: |"]  # fmt: skip
    keys = dict.fromkeys((r["family"], r["level"]) for r in rows)
    for family, level in keys:
        group = [r for r in rows if (r["family"], r["level"]) == (family, level)]
        box = [r["toolbox"] for r in group]
        listed = [r["config"] for r in group if r["config"] is not None]
        conf = (span(listed), fits(listed)) if len(listed) == len(group) else ("-", "-")
        out.append(f"| {family} | {level} | {group[0]['toolbox_n']} | {span(box)} | {fits(box)} "
                   f"| {conf[0]} | {conf[1]} | {span([r['none'] for r in group])} |")  # fmt: skip
    return out


def main() -> int:
    from training.tasks import FAMILIES

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=2, help="seeds per family and level")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--levels", default=None, help="e.g. 1 (default: every level of a family)")
    ap.add_argument("--config", default=str(ROOT / "configs/pipeline-smollm2-cpu.yaml"))
    ap.add_argument("--limit", type=int, default=600, help="the prompt budget, tokens")
    ap.add_argument("--per-task", action="store_true", help="also each task's tokens")
    args = ap.parse_args()

    families = [f for f in args.families.split(",") if f]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise SystemExit(f"unknown families {unknown}; known: {sorted(FAMILIES)}")
    levels = [int(x) for x in args.levels.split(",")] if args.levels else None
    listed = config_tools(Path(args.config))
    ids = task_ids(families, levels, args.seeds)
    start = time.perf_counter()
    turns = first_turns(ids)
    wall = time.perf_counter() - start
    rows, whole = measure(ids, turns, listed)
    print(f"first-turn prompts of {MODEL} ({len(ids)} episodes, {wall:.0f} s); "
          f"config list {listed} ({Path(args.config).name})\n")  # fmt: skip
    print("\n".join(table(rows, args.limit)))
    if args.per_task:
        print(
            "\n| task | toolbox tokens | config tokens | no tools |\n| --- | ---: | ---: | ---: |"
        )
        for r in rows:
            print(f"| {r['task']} | {r['toolbox']} | {r['config'] or '-'} | {r['none']} |")
    print(f"\nwhole catalogue ({whole['catalogue_n']} tools) on {whole['task']}: "
          f"{whole['catalogue']} tokens")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
