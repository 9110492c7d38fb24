"""Expose the tool runtime over MCP (stdio), so external agents drive the same tools.

Every tool of `tools.catalogue()` is offered with its generated JSON schema; calls run
through one sandboxed `tools.ToolSession` (validation, deadlines, undo, crash recovery as
for our own agent) and are recorded as one trajectory with source "agent" and tag "mcp".
Renders come back as MCP image content, everything else as compact text plus the JSON
output as structured content. A failed call is a result with `is_error` set and the
runtime's actionable message, not a protocol error, so the calling model can correct it.

The tool session is opened on the first call, after `stdio_server` has moved fd 1 away
from the JSON-RPC wire: worker processes inherit fd 1, and anything they print must not
corrupt the protocol stream.
"""

from __future__ import annotations

import base64
import logging
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

log = logging.getLogger(__name__)

SERVER_NAME = "modelwright"
INSTRUCTIONS = (
    "Modelwright's 3D modelling tools: Blender meshes and CadQuery parts in one scene, in "
    "metres and degrees. Inspect with get_scene and render; every mutating call can be undone."
)


@dataclass
class McpSettings:
    deadline_s: float = 30.0  # wall-clock limit per tool call
    # a person's folder for import/export; the worker never sees it (tools/trust/outbox.py): files
    # named by import_file are copied in before the call, exports copied out after it
    workspace: Path | None = None
    record: bool = True
    data_dir: Path | None = None  # trajectory store; None: MODELWRIGHT_DATA_DIR or the default


def mcp_tools(catalogue: list[dict]) -> list[types.Tool]:
    """MCP tool definitions from the runtime's catalogue (schemas passed through as is)."""
    tools = []
    for spec in catalogue:
        mutating = bool(spec.get("mutating"))
        tools.append(
            types.Tool(
                name=spec["name"],
                description=spec.get("description"),
                input_schema=spec["parameters"],
                annotations=types.ToolAnnotations(
                    read_only_hint=not mutating,
                    # mutations are undoable, and no tool reaches outside the sandbox
                    destructive_hint=False,
                    open_world_hint=False,
                ),
            )
        )
    return tools


def result_content(result: Any) -> types.CallToolResult:
    """A `tools.ToolResult` as MCP content: text, then each PNG as an image block."""
    content: list[Any] = [types.TextContent(text=result.to_text())]
    for png in result.images:
        content.append(
            types.ImageContent(data=base64.b64encode(png).decode("ascii"), mime_type="image/png")
        )
    structured = result.output if result.ok and isinstance(result.output, dict) else None
    return types.CallToolResult(
        content=content, structured_content=structured, is_error=not result.ok
    )


class ToolBridge:
    """One tool session and one recorded episode behind the MCP handlers.

    Sessions are not thread-safe and handlers run in worker threads, so calls are
    serialised here: MCP clients may pipeline requests, the scene sees them one at a time.
    """

    def __init__(self, settings: McpSettings):
        self.settings = settings
        self._lock = threading.Lock()
        self._session: Any = None
        self._store: Any = None
        self._recorder: Any = None
        self._folder: Any = None  # tools.trust.outbox.UserFolder on settings.workspace

    def catalogue(self) -> list[dict]:
        from tools import catalogue

        return catalogue()

    def _open(self) -> None:
        from tools import ToolSession

        if self.settings.workspace is not None:
            from tools.trust.outbox import UserFolder

            self._folder = UserFolder(self.settings.workspace)
        self._session = ToolSession(  # an MCP client is someone else: refused without a jail
            deadline_s=self.settings.deadline_s, untrusted=True
        )
        if self.settings.record:
            from agents.store import Store

            self._store = Store(data_dir=self.settings.data_dir)
            self._recorder = self._store.begin_episode(
                source="agent",
                policy="mcp",
                tools=self.catalogue(),
                tags=("mcp",),
                notes="tool calls from an external agent over MCP",
            )

    def call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        with self._lock:
            try:
                if self._session is None:
                    self._open()
                if self._folder is None:
                    result = self._session.call(name, arguments or {})
                else:
                    result = self._folder.call(self._session, name, arguments or {})
            except Exception as exc:  # the runtime could not run the call at all
                log.exception("tool call %s failed in the runtime", name)
                return _error_result(f"ERROR (crash): the tool runtime failed: {exc}")
            if self._recorder is not None:
                frame = result.images[0] if result.ok and result.images else None
                try:
                    self._recorder.add_step(
                        tool=result.tool, args=result.args, result=result, frame=frame
                    )
                except Exception:  # the call happened; the client still gets its result
                    log.exception("recording the %s call failed", name)
            return result_content(result)

    @property
    def episode_id(self) -> str | None:
        return None if self._recorder is None else self._recorder.episode_id

    def close(self) -> None:
        with self._lock:
            recorder, self._recorder = self._recorder, None
            if recorder is not None:
                recorder.finish()
            if self._session is not None:
                self._session.close()
                self._session = None
            if self._store is not None:
                self._store.close()
                self._store = None


def _error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def build_server(bridge: ToolBridge) -> Server:
    tools = mcp_tools(bridge.catalogue())

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await anyio.to_thread.run_sync(bridge.call, params.name, params.arguments)

    return Server(
        SERVER_NAME,
        version=_version(),
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("modelwright")
    except PackageNotFoundError:
        return "0"


def run_stdio(settings: McpSettings | None = None) -> None:
    """Serve over stdin/stdout until the client closes stdin; then finish the episode."""
    # stdout is the JSON-RPC wire: diagnostics go to stderr, which MCP clients show or log.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    bridge = ToolBridge(settings or McpSettings())
    server = build_server(bridge)

    async def serve() -> None:
        try:
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
        finally:
            await anyio.to_thread.run_sync(bridge.close)

    anyio.run(serve)
