"""Goals as a person types them into the Agent dock, given to the studio's default Local agent
(the shipped adapter on the packaged base, as the dock runs it: its tools, the stop on prose,
20 steps): what it did with each, and how long it took.

    .venv/bin/python benchmarks/bench_goals.py [--adapter DIR | --agent NAME] [--goals N]

The first five goals are the ones a new user typed in issue #50; the rest are more of the same
kinds. Each starts from a small scene (a 1 m box `Box1` at (0, 0, 0.5) and a 1 m ball `Ball` at
(3, 0, 0.5)) on a fresh worker, as the studio's "new episode" does, and is judged by what a
person would check in the outliner: `did` is yes when the scene ends as asked (the check below
each goal), `calls` the tool calls made, `s` the wall time. Load average is printed beside it:
the time is the machine's as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RED, BLUE = "#D03030", "#3050D0"
START = [
    {"tool": "add_primitive", "args": {"kind": "cube", "name": "Box1", "dimensions": [1, 1, 1],
                                       "location": [0, 0, 0.5]}},
    {"tool": "add_primitive", "args": {"kind": "uv_sphere", "name": "Ball", "dimensions": [1, 1, 1],
                                       "location": [3, 0, 0.5]}},
]


def _near(a, b, tol=0.05) -> bool:
    return a is not None and all(abs(x - y) <= tol for x, y in zip(a, b, strict=True))


def _colour(o) -> str | None:
    m = (o or {}).get("material") or {}
    return str(m.get("color", "")).upper() or None


# (goal, check(objects by name) -> bool, what the check asks)
GOALS = [
    ("add a red cube named Box at 1, 0, 0.5",
     lambda s: "Box" in s and _near(s["Box"]["location"], [1, 0, 0.5]) and _colour(s["Box"]) == RED,
     "Box at (1, 0, 0.5), red"),
    ("add a cube", lambda s: len(s) == 3, "one more object"),
    ("make Box1 twice as tall",
     lambda s: "Box1" in s and _near(s["Box1"]["dimensions"], [1, 1, 2]), "Box1 1 x 1 x 2 m"),
    ("delete Ball", lambda s: "Ball" not in s and "Box1" in s, "Ball gone, Box1 kept"),
    ("add a table: a flat top and four legs", lambda s: len(s) >= 7, "five more objects"),
    ("add a cube named Box at 1, 0, 0.5",
     lambda s: "Box" in s and _near(s["Box"]["location"], [1, 0, 0.5]), "Box at (1, 0, 0.5)"),
    ("paint Box1 blue", lambda s: _colour(s.get("Box1")) == BLUE, "Box1 blue"),
    ("move Ball up by 1 m", lambda s: "Ball" in s and _near(s["Ball"]["location"], [3, 0, 1.5]),
     "Ball at (3, 0, 1.5)"),
    ("remove Box1", lambda s: "Box1" not in s and "Ball" in s, "Box1 gone, Ball kept"),
    ("add a sphere named Orb at 0, 3, 0.5",
     lambda s: "Orb" in s and _near(s["Orb"]["location"], [0, 3, 0.5]), "Orb at (0, 3, 0.5)"),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--adapter", help="an adapter folder (default: the shipped Local agent)")
    ap.add_argument("--agent", help="a shipped adapter by name (assets/agents; default: the "
                                    "Local agent's)")
    ap.add_argument("--goals", type=int, default=len(GOALS), help="the first N goals")
    args = ap.parse_args()

    from agents import EpisodeLoop, LoopConfig, StartState
    from agents.models.registry import BASE_NAME, resolve
    from agents.models.shipped import default_shipped, shipped_at
    from studio.agent.runner import PROSE_STOP_TOKENS
    from tools import ToolSession, WorkerPool
    from training import make_policy

    shipped = shipped_at(args.agent) if args.agent else default_shipped()
    if args.agent and shipped is None:
        sys.exit(f"no shipped adapter named {args.agent!r} in assets/agents")
    adapter = args.adapter or (shipped.path if shipped else None)
    tools = list(shipped.tools) if shipped and not args.adapter else None
    # a curriculum adapter's rule: the CAD toolbox for a goal in a CAD part's words
    toolboxes = list(shipped.toolboxes) if shipped and not args.adapter else None
    if args.adapter:
        cfg = Path(args.adapter).parent / "config.yaml"
        tools = json.loads(cfg.read_text()).get("tools") if cfg.exists() else None
    base = resolve(shipped.base if shipped else BASE_NAME, None)
    policy = make_policy(f"hf:{base}", adapter=adapter, goal_tools=tools,
                         goal_toolboxes=toolboxes or None, prose_stop_tokens=PROSE_STOP_TOKENS)
    print(f"Local agent: {Path(adapter).name if adapter else 'the bare base'} on {base.name}; "
          f"load average {os.getloadavg()[0]:.1f}")
    rows = []
    pool = WorkerPool(size=1)
    try:
        for goal, check, asks in GOALS[: args.goals]:
            with ToolSession(pool, deadline_s=120) as session:
                session.reset()
                start = time.perf_counter()
                result = EpisodeLoop(policy, session, goal, setup=StartState(tuple(START)),
                                     config=LoopConfig(max_steps=20)).run()
                wall = time.perf_counter() - start
                objects = {o["name"]: o for o in session.call("get_scene", {}).output["objects"]}
            calls = [c.call.name + ("" if c.ok else " (failed)") for s in result.steps for c in s.calls]
            did = bool(check(objects))
            rows.append({"goal": goal, "did": did, "calls": calls, "s": round(wall, 1),
                         "objects": sorted(objects), "asks": asks})
            print(f"{'yes' if did else 'no ':3}  {wall:6.1f} s  {goal!r:45}  calls {calls}  "
                  f"(asks: {asks}; scene: {', '.join(sorted(objects))})", flush=True)
    finally:
        pool.close()
    print(f"{sum(r['did'] for r in rows)} of {len(rows)} goals done as asked; "
          f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
