"""The tool runtime: typed tools over Blender and CadQuery in supervised, sandboxed workers.

Public face (see docs/CONTRACTS.md): ToolSession, Session (the protocol every session
satisfies), WorkerPool, ToolResult, ToolError, ErrorKind, catalogue, tool_names,
openai_tools, validate_call, TOOLS.

The names load on first use (PEP 562): `modelwright tasks list` imports `tools.cli.commands`, and
with it this package, without needing pydantic, the supervisor or the tool specs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tools.errors import ErrorKind, ToolError
from tools.lazy_face import lazy_face

if TYPE_CHECKING:
    from tools.interface import Session
    from tools.results import ToolResult
    from tools.runtime.session import ToolSession
    from tools.runtime.supervisor import WorkerPool, default_pool
    from tools.specs import TOOLS, catalogue, openai_tools, tool_names, validate_call

_LAZY = {"ToolSession": "tools.runtime.session", "Session": "tools.interface",
         "TOOLS": "tools.specs", "catalogue": "tools.specs", "openai_tools": "tools.specs",
         "tool_names": "tools.specs", "validate_call": "tools.specs", "ToolResult": "tools.results",
         "WorkerPool": "tools.runtime.supervisor", "default_pool": "tools.runtime.supervisor"}

__all__ = ["TOOLS", "ErrorKind", "Session", "ToolError", "ToolResult", "ToolSession", "WorkerPool",
           "catalogue", "default_pool", "openai_tools", "tool_names", "validate_call"]


__getattr__, __dir__ = lazy_face(globals(), _LAZY)
