"""The geometry checker's own process (started jailed by training/tasks/checker.py).

It caps itself (RLIMIT_DATA, CPU, file size, processes) before anything else, imports the
checkers, says it is ready, and waits for its one job: the task and the episode's calls (a
pickle the trusted side wrote into `inputs/`). It runs the checkers (`evaluate_here`) on a
stand-in session whose every query goes back to the trusted side over stdout/stdin and whose
workspace is this checker's own (the trusted side copies the exports it asked for into it).
It answers with the verdict, or with why it has none, and exits.

A memory error anywhere (caught or not: a loader turns any exception into "not readable") is
seen through sys.monitoring and turns the verdict into `failed` with `memory`, so a part that
needs more than the cap scores invalid, not as a missing part.
"""

from __future__ import annotations

import argparse
import math
import os
import pickle
import resource
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_MEMORY: list[str] = []  # what ran out, if anything did


def _harden(memory_mb: int, cpu_s: int) -> None:
    caps = {resource.RLIMIT_CORE: 0, resource.RLIMIT_FSIZE: 4 << 30,
            resource.RLIMIT_DATA: memory_mb << 20, resource.RLIMIT_NPROC: 256}
    for what, value in caps.items():
        _, hard = resource.getrlimit(what)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(what, (value, value))
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    cpu_hard = cpu_s + 5 if hard == resource.RLIM_INFINITY else min(cpu_s + 5, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (min(cpu_s, cpu_hard), cpu_hard))
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), min(1024, hard)))
    try:  # die with the trusted side even outside bubblewrap
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _is_memory(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}" if not isinstance(exc, MemoryError) else "MemoryError"
    return isinstance(exc, MemoryError) or "OutOfMemory" in text or "bad_alloc" in text


def _watch_memory_errors() -> None:
    mon = sys.monitoring
    tool = mon.PROFILER_ID

    def raised(code: Any, offset: int, exc: BaseException) -> Any:
        if not _MEMORY and _is_memory(exc):
            _MEMORY.append(f"{type(exc).__name__} in {code.co_name}")
        return None

    mon.use_tool_id(tool, "modelwright-checker")
    mon.register_callback(tool, mon.events.RAISE, raised)
    mon.set_events(tool, mon.events.RAISE)


@dataclass
class Answer:
    """A tool result as the checkers read it: ok, output, error."""

    ok: bool
    output: dict = field(default_factory=dict)
    error: str | None = None


class RemoteSession:
    """The clean session, seen from the jail: every query is asked of the trusted side."""

    def __init__(self, workspace: str, inp: Any, out: Any):
        self.workspace = workspace
        self._in, self._out = inp, out

    def _ask(self, payload: dict) -> dict:
        from tools.protocol import read_message, write_message

        write_message(self._out, payload)
        reply, _ = read_message(self._in)
        return reply

    def scene(self) -> dict:
        return self._ask({"op": "scene"})["output"]

    def call(self, tool: str, args: dict) -> Answer:
        r = self._ask({"op": "call", "tool": tool, "args": args})
        return Answer(bool(r.get("ok")), r.get("output") or {}, r.get("error"))


def plain(value: Any) -> Any:
    """JSON-ready: numpy scalars and arrays as Python numbers and lists, tuples as lists,
    non-finite floats as strings (frames carry no NaN)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return plain(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memory-mb", type=int, required=True)
    ap.add_argument("--cpu-s", type=int, required=True)
    ap.add_argument("--preload-cad", action="store_true")
    args = ap.parse_args()
    _harden(args.memory_mb, args.cpu_s)
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the frames

    import training.tasks.base  # noqa: F401 - a preload: the job's pickled task, before `ready`
    from tools.protocol import read_message, write_message
    from training.tasks.checks.verdict import evaluate_here

    if args.preload_cad:
        import cadquery  # noqa: F401

        from tools import occt

        occt.hold_threads()
    write_message(out, {"ready": True, "rss_mb": _peak_mb()})
    read_message(inp)  # the job: its task and calls are in inputs/job.pickle
    scratch = os.getcwd()
    with open(Path(scratch, "inputs", "job.pickle"), "rb") as f:
        task, calls = pickle.load(f)  # written by the trusted side: our own data
    _watch_memory_errors()
    session = RemoteSession(os.path.join(scratch, "workspace"), inp, out)
    try:
        v = evaluate_here(task, session, calls)
    except Exception as e:  # noqa: BLE001 - any failure is a verdict the trusted side types
        write_message(out, {"op": "failed", "memory": bool(_MEMORY) or _is_memory(e),
                            "error": (_MEMORY[0] + "; " if _MEMORY else "")
                            + f"{type(e).__name__}: {str(e)[:400]}"})
        return
    if _MEMORY:
        write_message(out, {"op": "failed", "memory": True, "error": _MEMORY[0]})
        return
    write_message(out, {"verdict": {"total": v.total, "components": plain(v.components),
                                    "success": bool(v.success), "details": plain(v.details)},
                        "rss_mb": _peak_mb()})


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    main()
