"""Perturbed oracle plans: what a nearly-right model looks like, to prove checkers can fail.

Each function returns a changed copy of a plan, or None when it does not apply: a missing
step, a size 25 % off, a position shifted by a quarter of the size plus 0.2 m, a wrong colour.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from tools import Session

Plan = list[dict[str, Any]]

QUERIES = {"get_scene", "cad_query", "cad_pattern", "measure", "render", "mesh_check",
           "mass_properties"}
SIZE_KEYS = ("dimensions", "length", "radius", "diameter", "scale", "width", "height")


def drop_last(plan: Plan) -> Plan | None:
    """Leave out the last call that does work (a missing part, edit or file)."""
    idx = max(i for i, c in enumerate(plan) if c["tool"] not in QUERIES)
    return plan[:idx] + plan[idx + 1 :]


def resize(plan: Plan) -> Plan | None:
    """Make the last sized thing 25 % bigger (in a script: its first dimension)."""
    plan = copy.deepcopy(plan)
    for step in reversed(plan):
        args = step["args"]
        if step["tool"] == "cadquery_script":
            args["code"] = re.sub(
                r"(?<=[(\s])(\d+(?:\.\d+)?)(?=[,)])",
                lambda m: f"{float(m.group(1)) * 1.25:g}",
                args["code"],
                count=1,
            )
            return plan
        for key in SIZE_KEYS:
            if key in args:
                v = args[key]
                args[key] = [x * 1.25 for x in v] if isinstance(v, list) else v * 1.25
                return plan
    return None


def move(plan: Plan) -> Plan | None:
    """Shift the last placed thing along x by a quarter of its distance from the origin plus
    a quarter of its size plus 0.2 m (a position 20-30 % off, never a negligible nudge)."""
    plan = copy.deepcopy(plan)
    for step in reversed(plan):
        loc = step["args"].get("location")
        if loc is not None:
            size = max(step["args"].get("dimensions", [1.0]))
            loc[0] += 0.25 * max(abs(loc[0]), abs(loc[1])) + 0.25 * size + 0.2
            return plan
    return None


def recolour(plan: Plan) -> Plan | None:
    plan = copy.deepcopy(plan)
    for step in reversed(plan):
        if step["tool"] == "set_material":
            step["args"]["color"] = "#7F7F7F" if step["args"]["color"] != "#7F7F7F" else "#000000"
            return plan
    return None


def verify_task(task: Any, session: Session, perturb: bool = True) -> list[str]:
    """Problems with a task's checker: an oracle that fails, idleness or a perturbation that passes."""
    from training.tasks.runner import attempt

    good = attempt(task, session, task.oracle)
    if not good.reward.success:
        return [f"{task.id}: oracle fails ({good.reward.total:.3f})"]
    problems = []
    idle = attempt(task, session, [])
    if idle.reward.success or idle.reward.total > good.reward.total - 0.1:
        problems.append(f"{task.id}: doing nothing scores {idle.reward.total:.3f}")
    for name, change in PERTURBATIONS.items() if perturb else ():
        plan = change(task.oracle)
        if plan is None or plan == task.oracle:
            continue
        bad = attempt(task, session, plan)
        if bad.reward.success or bad.reward.total >= good.reward.total:
            problems.append(f"{task.id}: perturbation {name} passes ({bad.reward.total:.3f})")
    return problems


PERTURBATIONS: dict[str, Callable[[Plan], Plan | None]] = {
    "drop_last": drop_last,
    "resize": resize,
    "move": move,
    "recolour": recolour,
}
