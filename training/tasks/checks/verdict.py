"""The whole verdict: every constraint checked, stand-ins credited, the geometry and the
deliverables measured, weighed into the task's `RewardBreakdown`.
"""

from __future__ import annotations

import shutil
from typing import Any

import numpy as np

from tools import TOOLS, Session
from training import rewards
from training.tasks.checks import check
from training.tasks.context import EvalContext
from training.tasks.shapes import evaluate_geometry


def evaluate_task(task: Any, session: Session, calls: list[dict[str, Any]]) -> rewards.RewardBreakdown:
    """The task's verdict on `session`'s final state. The checkers run in the jailed geometry
    checker (training/tasks/checker.py: a deadline and a memory cap); `session` only answers
    its queries. CheckerError (a ConfinedPathError) when it gives no verdict. A task whose
    checkers load no shape (`checker.touches_geometry`) is checked here: it reads bounded
    frames only."""
    from training.tasks.checker import check, touches_geometry

    if not touches_geometry(task):
        return evaluate_here(task, session, calls)
    return check(task, session, calls)


def evaluate_here(task: Any, session: Any, calls: list[dict[str, Any]]) -> rewards.RewardBreakdown:
    """The checkers in this process: the checker's own body (training/tasks/checker_main.py),
    and the in-process baseline of benchmarks/bench_trust.py. Unbounded: never on the
    trusted side for a policy's episode."""
    ctx = EvalContext(session, calls)
    try:
        return _verdict(task, ctx, calls)
    finally:
        shutil.rmtree(ctx.workspace / ctx.check_dir, ignore_errors=True)


# Constraints on one object that a differently named object can be checked against.
STAND_IN_KINDS = frozenset({"position", "size", "rotation", "shape_kind", "material", "on_ground"})
# What a constraint met by a stand-in earns, against 1 for the object of the goal's name.
STAND_IN_CREDIT = 0.5


def _named(c: dict[str, Any]) -> set[str]:
    """Every object name a constraint refers to."""
    names = {c.get(k) for k in ("object", "a", "b", "upper", "lower")} | set(c.get("objects", ()))
    return {n for n in names if isinstance(n, str)}


def mark_stand_ins(ctx: EvalContext, results: list[dict[str, Any]]) -> None:
    """Give each unmet check of a missing object its stand-in's verdict (`result["stand_in"]`).

    An object the goal names but the scene lacks (the agent built it under another name) is
    matched to one of the objects no constraint names, one to one, so that the matched pairs
    meet the most constraint weight (an optimal assignment); a pair meeting none is no match.
    Only the STAND_IN_KINDS checks of the missing object are tried, each once per candidate.
    Without it a call that gets kind, size and place right but the name wrong scores the same
    as one that gets nothing right, and GRPO groups of such calls have no reward spread.
    """
    by_name: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        c = r["constraint"]
        if not r["ok"] and c["kind"] in STAND_IN_KINDS and ctx.obj(c["object"]) is None:
            by_name.setdefault(c["object"], []).append(r)
    named = set().union(*(_named(r["constraint"]) for r in results))
    spare = [n for n in ctx.objects if n not in named]
    if not by_name or not spare:
        return
    from scipy.optimize import linear_sum_assignment

    missing = list(by_name)
    tried = {
        (m, s): [check(ctx, {**r["constraint"], "object": s}) for r in by_name[m]]
        for m in missing
        for s in spare
    }

    def met(m: str, s: str) -> float:
        verdicts = zip(by_name[m], tried[m, s], strict=True)
        return sum(float(r["constraint"].get("weight", 1.0)) for r, (ok, _) in verdicts if ok)

    score = np.array([[met(m, s) for s in spare] for m in missing])
    for i, j in zip(*linear_sum_assignment(score, maximize=True), strict=True):
        if score[i, j] > 0:
            m, s = missing[i], spare[j]
            for r, (ok, measured) in zip(by_name[m], tried[m, s], strict=True):
                r["stand_in"] = {"object": s, "ok": bool(ok), "measured": measured}


def is_idle(spec: Any, calls: list[dict[str, Any]]) -> bool:
    """An episode that did nothing toward a task with work to do: no call at all, or, where
    the oracle's plan changes the scene, no call that changed the rebuilt scene (the
    verifier's `changed` flag, cleared when the episode ends on the scene it started from).
    One harmless call (a `get_scene`, a `transform` to where an object already is) or a thing
    added and deleted re-states the start and is as idle as no call; a call that failed is a
    try (it keeps its recovery credit, not validity)."""
    if not spec.oracle:
        return False
    if not calls:
        return True
    if not all("changed" in c for c in calls):  # not scored by the verifier: calls alone
        return False
    needs_change = any(getattr(TOOLS.get(s.get("tool")), "mutating", False) for s in spec.oracle)
    return needs_change and not any(c["changed"] for c in calls)


def _verdict(task: Any, ctx: EvalContext, calls: list[dict[str, Any]]) -> rewards.RewardBreakdown:
    spec = task.spec
    results = []
    for c in spec.constraints:
        ok, measured = check(ctx, c)
        results.append({"constraint": c, "ok": bool(ok), "measured": measured})
    met = sum(r["ok"] for r in results)
    # Success needs every constraint met on the object of its name; the graded share gives a
    # constraint met only by a stand-in (the same object under another name) part credit.
    mark_stand_ins(ctx, results)
    weight = [float(r["constraint"].get("weight", 1.0)) for r in results]

    def credit(r: dict[str, Any]) -> float:
        if r["ok"]:
            return 1.0
        return STAND_IN_CREDIT if r.get("stand_in", {}).get("ok") else 0.0

    share = (
        sum(w * credit(r) for w, r in zip(weight, results, strict=True)) / sum(weight)
        if results
        else 1.0
    )
    # Doing nothing is not valid, just idle (as for efficiency below): an episode that made no
    # call on a task with work to do earns no validity or recovery. Both read 1.0 for "no
    # call failed", and GRPO learned to stop calling: idling beat a call that failed.
    idle = is_idle(spec, calls)
    components: dict[str, float] = {
        "validity": 0.0 if idle else rewards.validity(calls),
        "constraints": share,
    }
    details: dict[str, Any] = {"constraints": results, "steps": len(calls)}
    valid_result = bool(ctx.objects)
    geometry_ok = True
    if spec.geometry is not None:
        geo = evaluate_geometry(ctx, spec.geometry)
        components["geometry"] = geo["score"]
        details["geometry"] = geo
        valid_result = valid_result and geo.get("valid", True)
        geometry_ok = geo["score"] >= spec.geometry_min
        if "iou" in geo:
            components["cadrille"] = rewards.cadrille(geo["iou"], geo.get("valid", True))
    if spec.deliverables:
        from training.tasks.checks.deliverables import check_deliverable

        delivered = [check_deliverable(ctx, d) for d in spec.deliverables]
        components["completeness"] = sum(d["ok"] for d in delivered) / len(delivered)
        details["deliverables"] = delivered
    success = (
        valid_result
        and met == len(results)
        and geometry_ok
        and components.get("completeness", 1.0) == 1.0
    )
    # An idle episode's only recovery credit is for failed tries it did not repeat: a try
    # that failed still ranks above calls that change nothing (see `is_idle`).
    tried = idle and any(not c.get("ok") for c in calls)
    components["recovery"] = (rewards.recovery(calls, success) if tried or not idle else 0.0)
    # Efficiency only counts for a solved task: doing nothing is not efficient, just idle.
    eff = rewards.efficiency(len(calls), len(spec.oracle), task.budget)
    components["efficiency"] = eff if success else 0.0
    details["errors"] = sum(1 for c in calls if not c.get("ok"))
    return rewards.combine(components, task.weights, valid_result, success, details)
