"""The geometry checker: a task's checkers run in a jailed process, bounded in time and memory.

Loading the policy's part (STEP, GLB), OCCT booleans, IoU and tessellation cost what the part
makes them cost: a 576-hole plate took the trusted process to 69.5 s and 1.09 GB. So the
trusted side computes none of it. `check(task, session, calls)` hands the task and the calls (pickled:
our own data, trusted -> jail only) to a fresh checker process
(`training/tasks/checker_main.py`, started and pooled by training/tasks/checker_process.py)
jailed like a tool worker (tools/sandbox/jail.py: bubblewrap,
seccomp, its own host uid as root, `training/` and `tools/` read-only, its scratch the only
writable place), which runs the checkers (`checks.verdict.evaluate_here`) on a stand-in session. Each
query of that session (`get_scene`, `export`, `mesh_check`, ...) comes back here over a pipe
as a bounded frame (tools/protocol.py), is run on the clean session, and is answered; an
export's file is copied from the clean worker's workspace into the checker's own
(tools/trust/confined.py: no link followed, capped). The verdict comes back the same way, checked
for its shape.

Caps (read at each check):
- `MODELWRIGHT_CHECKER_DEADLINE_S` (default 300): the checker's own time, summed over the
  episode's checks; the time the clean worker spends answering its queries is not counted
  (that worker has its own deadline).
- `MODELWRIGHT_CHECKER_MEMORY_MB` (default 4096): RLIMIT_DATA in the checker and the cap of
  the memory watch over its jail (tools/sandbox/memwatch.py).
Past either, or if the checker dies or answers out of shape, `CheckerError` (a
`ConfinedPathError`): the verifier scores the episode invalid (`INVALID_TOTAL`) with the
reason in `details["verifier"]`.

A checker serves one episode and is killed; spares boot in the background (one more than
the checks in flight), importing CadQuery when the last checked task needed it.
"""

from __future__ import annotations

import os
import pickle
import shutil
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tools import TOOLS
from tools.text import printable
from tools.trust import confined
from tools.trust.confined import ConfinedPathError
from training.rewards import RewardBreakdown
from training.tasks.checker_process import (
    DEADLINE_ENV,
    MEMORY_ENV,
    CheckerError,
    CheckerPool,
    CheckerProcess,
    deadline_s,
)

CAD_KINDS = frozenset({"part", "holes", "topology", "placed", "feature"})
MAX_INPUT_BYTES = 1 << 30  # one file copied into the checker (as tools/trust/confined's cap)


# Constraints measured from `get_scene`'s numbers (a bounded frame) or from read-only tools
# the clean worker answers under its own caps: no shape file is loaded for them.
SCENE_ONLY_KINDS = frozenset({
    "exists", "absent", "count", "position", "size", "rotation", "material", "on_ground",
    "on_top", "touching", "aligned", "evenly_spaced", "symmetric", "gap", "light", "framed",
    "no_overlap", "mesh_health", "wall_thickness", "mass", "centre_of_mass"})


def touches_geometry(task: Any) -> bool:
    """Whether the task's checkers load or compute on shapes (a geometry component, a
    deliverable file, a constraint of any kind but SCENE_ONLY_KINDS): then they run in the
    checker. A task of scene-only constraints reads JSON frames alone, whose size the
    protocol caps, and is checked in the trusted process without a checker's start."""
    spec = task.spec
    return (spec.geometry is not None or bool(spec.deliverables)
            or any(c.get("kind") not in SCENE_ONLY_KINDS for c in spec.constraints))


def needs_cad(task: Any) -> bool:
    """Whether the task's checkers read CAD solids (then spares import CadQuery up front)."""
    spec = task.spec
    geo = spec.geometry or {}
    return (geo.get("kind") == "parts"
            or any(c.get("kind") in CAD_KINDS for c in spec.constraints)
            or any(d.get("format") == "step" or d.get("check") == "step_parts"
                   for d in spec.deliverables))



@dataclass
class CheckerStats:
    checks: int = 0  # verdicts given
    seconds: float = 0.0  # the checkers' own time (what the deadline counts), summed
    peak_mb: float = 0.0  # the largest peak RSS a checker reported
    last_peak_mb: float = 0.0  # the last one's


STATS = CheckerStats()
_pool: CheckerPool | None = None
_pool_lock = threading.Lock()


def default_pool() -> CheckerPool:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = CheckerPool()
        return _pool


# ---------------------------------------------------------------- one episode's check


def _inputs(task: Any, session: Any, proc: CheckerProcess) -> Any:
    """Copy what the checkers read besides the session's answers into the checker's scratch:
    the deliverables the clean worker's exports wrote, and a ground-truth mesh file; the task
    as the checker will see it (a mesh file's path is the copy's)."""
    ws = Path(session.workspace)
    for d in task.spec.deliverables:
        rel = d["path"]
        if confined.is_file(ws, rel):
            _copy_in(ws, rel, proc)
    geo = task.spec.geometry
    if geo and geo.get("kind") == "mesh_file":
        src = Path(geo["path"])  # the task's own file (a benchmark's ground truth)
        rel = "inputs/reference" + src.suffix.lower()
        with open(src, "rb") as f, confined.create_file(proc.scratch, rel) as dst:
            shutil.copyfileobj(f, dst, 1 << 20)
        dest = os.path.join(proc.scratch, rel)
        task = replace(task, spec=replace(task.spec, geometry=dict(geo, path=dest)))
    return task


def _copy_in(ws: Path, rel: str, proc: CheckerProcess) -> None:
    """The clean workspace's file `rel` into the checker's workspace at the same name: read
    and written without following a link at either end (the checker's workspace is the
    jail's to write), capped, streamed (the trusted side holds 1 MB of it at a time)."""
    n = 0
    with confined.open_file(ws, rel, MAX_INPUT_BYTES) as src, \
            confined.create_file(proc.workspace, rel) as dst:
        while chunk := src.read(1 << 20):
            n += len(chunk)
            if n > MAX_INPUT_BYTES:
                raise ConfinedPathError(f"{rel!r} is over the {MAX_INPUT_BYTES}-byte cap")
            dst.write(chunk)


def _answer(msg: dict, session: Any, proc: CheckerProcess) -> dict:
    """Run one query of the checker on the clean session (read-only tools and exports into a
    check folder only) and give its answer."""
    op = msg.get("op")
    if op == "scene":
        return {"ok": True, "output": session.scene()}
    tool, args = msg.get("tool"), msg.get("args")
    spec = TOOLS.get(tool) if isinstance(tool, str) else None
    if op != "call" or spec is None or not isinstance(args, dict):
        raise CheckerError(f"the geometry checker asked for something else ({printable(str(op))[:80]})")
    path = args.get("path")
    if tool == "export":
        if not (isinstance(path, str) and path.startswith("_check_")):
            raise CheckerError("the geometry checker asked for an export outside its folder")
    elif spec.mutating:
        raise CheckerError(f"the geometry checker asked for a mutating tool ({tool})")
    r = session.call(tool, dict(args))
    if r.ok and tool == "export":
        _copy_in(Path(session.workspace), path, proc)
    return {"ok": bool(r.ok), "output": r.output if r.ok else {},
            "error": None if r.ok else str(r.error)}


def _verdict_of(payload: Any) -> RewardBreakdown:
    """The checker's verdict, held to the shape of a RewardBreakdown."""
    v = payload.get("verdict") if isinstance(payload, dict) else None
    ok = (isinstance(v, dict) and type(v.get("total")) in (int, float)
          and isinstance(v.get("success"), bool) and isinstance(v.get("components"), dict)
          and all(isinstance(k, str) and type(x) in (int, float) for k, x in v["components"].items())
          and isinstance(v.get("details"), dict))
    if not ok:
        raise CheckerError("the geometry checker sent a verdict out of shape")
    return RewardBreakdown(float(v["total"]), {k: float(x) for k, x in v["components"].items()},
                           v["success"], v["details"])


def check(task: Any, session: Any, calls: list[dict[str, Any]],
          pool: CheckerPool | None = None) -> RewardBreakdown:
    """The task's verdict on `session`'s final state, measured by a jailed checker; each of
    the checker's queries is answered from `session`. CheckerError when it gives none."""
    pool = pool or default_pool()
    budget = deadline_s()
    proc = pool.take(needs_cad(task))
    try:
        job = _inputs(task, session, proc)
        # a file, not a frame: an episode's calls (scripts and all) may be over a frame's cap
        confined.write_file(proc.scratch, "inputs/job.pickle", pickle.dumps((job, calls)))
        proc.send({"op": "check"})
        while True:
            t0 = time.monotonic()
            try:
                msg = proc.read(budget)
            except TimeoutError:
                raise CheckerError(f"the geometry checker went past its deadline of {deadline_s():g} s "
                                   f"({DEADLINE_ENV}) and was stopped") from None
            budget -= time.monotonic() - t0
            if "verdict" in msg:
                verdict = _verdict_of(msg)
                peak = msg.get("rss_mb")
                with _pool_lock:
                    STATS.checks += 1
                    STATS.seconds += deadline_s() - budget
                    if type(peak) in (int, float):
                        STATS.peak_mb = max(STATS.peak_mb, float(peak))
                        STATS.last_peak_mb = float(peak)
                return verdict
            if msg.get("op") == "failed":
                why = printable(str(msg.get("error", "")))[:500]
                if msg.get("memory"):
                    raise CheckerError(f"the geometry checker went past its memory cap of "
                                       f"{proc.memory_cap_mb} MB ({MEMORY_ENV}): {why}")
                raise CheckerError(f"the geometry checker failed: {why}")
            proc.send(_answer(msg, session, proc))
    finally:
        pool.done()
        # nobody waits for the kill (its processes' exit, its uid, its scratch)
        threading.Thread(target=proc.kill, daemon=True, name="mw-checker-kill").start()
