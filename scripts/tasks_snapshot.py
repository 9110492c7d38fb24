"""Every task of every family and level, as `modelwright tasks show --json` prints it.

    .venv/bin/python scripts/tasks_snapshot.py dump OUT.jsonl [--seeds 5]
    .venv/bin/python scripts/tasks_snapshot.py compare A.jsonl B.jsonl

`dump` writes one line per task id (families x their levels x seeds 0..N-1), the exact text
`tasks show TASK --json --no-image` prints; `compare` lists the ids whose text differs (exit 1
if any). A refactor of the task families must leave the dump byte-identical.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def dump(out: str, seeds: int) -> None:
    from typer.testing import CliRunner

    from studio.cli import build_app
    from training.tasks import list_families

    app, runner = build_app(), CliRunner()
    n = 0
    with open(out, "w") as f:
        for fam in sorted(list_families(), key=lambda x: x["family"]):
            for level in fam["levels"]:
                for seed in range(seeds):
                    tid = f"{fam['family']}:{level}:{seed}"
                    res = runner.invoke(app, ["tasks", "show", tid, "--json", "--no-image"])
                    if res.exit_code != 0:
                        raise SystemExit(f"{tid}: exit {res.exit_code}: {res.output[-500:]}")
                    f.write(json.dumps({"id": tid, "show": res.output}) + "\n")
                    n += 1
    print(f"{n} tasks written to {out}")


def compare(a: str, b: str) -> int:
    def load(p: str) -> dict[str, str]:
        with open(p) as f:
            return {r["id"]: r["show"] for r in map(json.loads, f)}

    old, new = load(a), load(b)
    missing, added = sorted(set(old) - set(new)), sorted(set(new) - set(old))
    changed = sorted(t for t in set(old) & set(new) if old[t] != new[t])
    for label, ids in (("missing", missing), ("added", added), ("changed", changed)):
        for t in ids:
            print(f"{label}: {t}")
    print(f"{len(old)} before, {len(new)} after: {len(changed)} changed, {len(missing)} missing, "
          f"{len(added)} added")
    return 1 if missing or added or changed else 0


if __name__ == "__main__":
    cmd = sys.argv[1:2]
    if cmd == ["dump"]:
        seeds = int(sys.argv[sys.argv.index("--seeds") + 1]) if "--seeds" in sys.argv else 5
        dump(sys.argv[2], seeds)
    elif cmd == ["compare"]:
        raise SystemExit(compare(sys.argv[2], sys.argv[3]))
    else:
        raise SystemExit(__doc__)
