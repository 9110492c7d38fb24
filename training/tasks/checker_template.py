"""The geometry checker's template: one process that has imported the checkers once and forks
a fresh jailed checker per episode (`python -m training.tasks.checker_template --sock FD`).

A checker started from scratch pays its interpreter and its imports (numpy, trimesh, SciPy and
every family's checks: ~1 s of CPU) for each episode it scores, and that boot runs beside the
next episode's model turns. A fork of this template pays a few milliseconds. The fork is made
and jailed by the same code as a worker's fork (tools/worker/template.py `serve`,
tools/worker/selfjail.py): its own host uid as root, its own user, mount, pid, network and
ipc namespaces, the same binds as bubblewrap would give it (the project's `training/` read-only
among them), no capabilities, no_new_privs and the seccomp filter, all before it reads its job.
Then it runs training/tasks/checker_main.py's `main` as a checker started from scratch does:
it caps itself, says it is ready, scores one episode and exits.

The template itself runs no episode's input: it reads fork requests from the trusted side's
socket and nothing else, and a fork's memory is its own copy. CadQuery is not preloaded here
(it would count against every fork's memory cap): a fork for a CAD task imports it, as a
spare, before its job comes. `MODELWRIGHT_CHECKER_TEMPLATE=0` starts every checker from scratch.
"""

from __future__ import annotations

import gc
import importlib
import sys
import time

# what a checker imports, at its start or in its job: imported once, here
PRELOAD = ("numpy", "scipy.optimize", "trimesh", "training.tasks.base", "training.rewards.geometry",
           "training.tasks.checker_main", "training.tasks.scene_geometry", "training.tasks.shapes",
           "training.tasks.checks.verdict")


def _preload() -> dict:
    t0 = time.perf_counter()
    for name in PRELOAD:
        importlib.import_module(name)
    # frozen out of the cyclic collector: a fork's collections never walk (and so never copy)
    # the pages of what the template holds
    gc.collect()
    gc.freeze()
    return {"startup_s": time.perf_counter() - t0}


def _run(argv: list[str]) -> None:
    from training.tasks import checker_main

    sys.argv = ["training.tasks.checker_main", *argv]
    checker_main.main()


def main() -> None:
    from tools.worker.template import serve

    serve(_preload, _run, what="geometry checker")


if __name__ == "__main__":
    main()
