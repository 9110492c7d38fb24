"""Two rules that choose a task's tools without looking at its solution, measured (#49).

- declared: the family's toolbox, declared by its author (training/tasks/toolbox.py);
- bm25: the scene basics plus the top k tools by BM25 over the tools' names and descriptions,
  queried with the task's goal text (k: the declared toolbox's size less the basics, so both
  rules show as many tools).

Per rule, over validation tasks of every family and level: the share of tasks whose oracle
plan calls only tools the rule shows (a task it leaves solvable), the share of the oracle's
distinct tools it shows, and the mean number of tools shown. Pure Python, no worker.

    .venv/bin/python benchmarks/bench_toolbox_rules.py [--per-level 4]
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z]+", text.lower().replace("_", " ")) if len(w) > 2]


class BM25:
    def __init__(self, docs: dict[str, list[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs, self.k1, self.b = docs, k1, b
        self.avg = sum(len(d) for d in docs.values()) / len(docs)
        df = Counter(w for d in docs.values() for w in set(d))
        n = len(docs)
        self.idf = {w: math.log(1 + (n - c + 0.5) / (c + 0.5)) for w, c in df.items()}

    def top(self, query: list[str], k: int) -> list[str]:
        def score(doc: list[str]) -> float:
            tf = Counter(doc)
            return sum(self.idf.get(w, 0.0) * tf[w] * (self.k1 + 1)
                       / (tf[w] + self.k1 * (1 - self.b + self.b * len(doc) / self.avg))
                       for w in set(query) if w in tf)  # fmt: skip

        return sorted(self.docs, key=lambda name: -score(self.docs[name]))[:k]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-level", type=int, default=4)
    args = parser.parse_args()
    from tools import catalogue
    from training.tasks import FAMILIES, SPLITS, get_task
    from training.tasks.base import family_tools
    from training.tasks.toolbox import SCENE_BASICS

    specs = {s["name"]: s for s in catalogue()}
    index = BM25({n: words(n + " " + s.get("description", "")) for n, s in specs.items()
                  if n not in SCENE_BASICS})  # fmt: skip
    seeds = SPLITS["validation"]
    rows: dict[str, list[tuple[bool, float, int]]] = {"declared": [], "bm25": []}
    for family in FAMILIES:
        box = set(family_tools(family))
        k = len(box) - len(SCENE_BASICS)
        for level in FAMILIES[family].levels:
            for seed in list(seeds)[: args.per_level]:
                task = get_task(f"{family}:{level}:{seed}")
                used = {step["tool"] for step in task.oracle}
                shown = {"declared": box,
                         "bm25": set(SCENE_BASICS) | set(index.top(words(task.prompt), k))}
                for rule, tools in shown.items():
                    rows[rule].append((used <= tools, len(used & tools) / len(used), len(tools)))
    n = len(rows["declared"])
    print(f"{n} validation tasks ({args.per_level} per family and level)\n")
    print("| rule | tasks left solvable | oracle tools shown | tools shown (mean) |")
    print("| --- | ---: | ---: | ---: |")
    for rule, r in rows.items():
        solvable = sum(x[0] for x in r) / n
        recall = sum(x[1] for x in r) / n
        shown = sum(x[2] for x in r) / n
        print(f"| {rule} | {100 * solvable:.1f} % | {100 * recall:.1f} % | {shown:.1f} |")


if __name__ == "__main__":
    main()
