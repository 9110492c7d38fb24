"""A tiny event emitter for the studio's pure models (no Qt): widgets subscribe to it.

napari-style: models hold state and emit; the Qt layer listens. Keeping Qt out of the
models lets tests and the scripted mode drive them without a window.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class Emitter:
    """`connect(fn)` then `emit(*args)` calls every listener in order; a failing listener is logged."""

    def __init__(self) -> None:
        self._listeners: list[Callable[..., Any]] = []

    def connect(self, fn: Callable[..., Any]) -> Callable[[], None]:
        self._listeners.append(fn)
        return lambda: self._listeners.remove(fn) if fn in self._listeners else None

    def emit(self, *args: Any) -> None:
        for fn in list(self._listeners):
            try:
                fn(*args)
            except Exception:  # one broken view must not break the model
                log.exception("listener %r failed", fn)
