"""A layer's public face whose names load on first use (PEP 562), shared by `tools`, `agents`
and `training`: `import agents` stays light, yet `from agents import EpisodeLoop` works.

A package keeps its own `_LAZY` mapping (name -> module that defines it; the public-faces
test reads it) and binds what this returns as its module `__getattr__` and `__dir__`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_face(namespace: dict[str, Any], lazy: Mapping[str, str]
              ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module `__getattr__` and `__dir__` for the package whose globals are `namespace`: a name
    in `lazy` is imported from its module once, then kept in `namespace`; any other name is
    an AttributeError, as for an ordinary module."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(lazy))

    return __getattr__, __dir__
