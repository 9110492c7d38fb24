"""CadQuery, imported on first use.

Importing CadQuery (and OCCT under it, through OCP) is about two thirds of a worker's start
(~1.5 s of ~2.3 s on an idle machine), and many sessions never make a CAD part: primitive
tasks, a verifier loading a scene without parts. A worker started while someone waits for it
imports CadQuery when a CAD tool or a committed B-rep first needs it; a spare booted off the
critical path preloads it (`preload`, from the worker's `--preload-cad`).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from tools import occt


def module() -> ModuleType:
    """The real `cadquery` module (imported now if it was not yet), OCCT's parallel loops
    held to one thread (tools/occt.py)."""
    cadquery = importlib.import_module("cadquery")
    occt.hold_threads()
    return cadquery


class _LazyCadQuery:
    """Stands for the `cadquery` module: the first attribute read imports it."""

    def __getattr__(self, name: str):
        return getattr(module(), name)


cq = _LazyCadQuery()


def preload() -> None:
    module()
