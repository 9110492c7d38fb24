"""The tool runtime: typed tools over Blender and CadQuery in supervised, sandboxed workers.

Public face (see docs/CONTRACTS.md): ToolSession, WorkerPool, ToolResult, ToolError,
ErrorKind, catalogue, tool_names, openai_tools, validate_call, TOOLS.
"""

from tools.errors import ErrorKind, ToolError
from tools.session import ToolSession
from tools.specs import TOOLS, catalogue, openai_tools, tool_names, validate_call
from tools.supervisor import ToolResult, WorkerPool, default_pool

__all__ = ["TOOLS", "ErrorKind", "ToolError", "ToolResult", "ToolSession", "WorkerPool", "catalogue",
           "default_pool", "openai_tools", "tool_names", "validate_call"]
