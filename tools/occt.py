"""OCCT's parallel loops on one thread in every process that runs CAD (workers, checkers).

CadQuery asks OCCT for parallel booleans (`SetRunParallel(True)`), and OCCT runs its parallel
loops (booleans, meshing) on one process-wide thread pool. A worker running a 196-hole plate
that way died now and then with SIGSEGV, inside OCCT (`TopLoc_ItemLocation`, libTKMath: a
location handle freed under another thread), most often on a loaded machine; CadQuery's own
tracker reports the same crash from parallel booleans in forked processes (cadquery#880), and
every worker here is forked from a template. One thread there costs little: each session has
its own worker, RL runs many side by side, and the plate took 14.3 s either way on 2 cores.

`MODELWRIGHT_OCCT_THREADS` (default 1) sets another count; 0 leaves OCCT's own (one a core).
Importing OCP costs ~1 s, so this runs where CadQuery is imported anyway, never at a start.
"""

from __future__ import annotations

import os

ENV = "MODELWRIGHT_OCCT_THREADS"
_done = False


def threads() -> int:
    """The thread count asked for (0: OCCT's default)."""
    try:
        return max(0, int(os.environ.get(ENV, "1")))
    except ValueError:
        return 1


def hold_threads() -> None:
    """Make OCCT's default thread pool the size `threads()` says (once a process; cheap after
    CadQuery's import). Called before any CAD work: the pool is made on its first use."""
    global _done
    if _done:
        return
    _done = True
    n = threads()
    if n <= 0:
        return
    from OCP.OSD import OSD_ThreadPool

    pool = OSD_ThreadPool.DefaultPool_s(n)  # made now with n threads, the caller's included
    if pool.NbThreads() != n:  # made before with another count: no job runs on it now
        pool.Init(n)
