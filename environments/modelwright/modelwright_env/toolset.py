"""The task's tools as verifiers' MCP tool server: each call is a step of the rollout's
episode on Modelwright's OpenEnv server (`modelwright envs serve`), where it runs in the
episode's jailed worker; nothing is run or scored here."""

from __future__ import annotations

from typing import Any, cast

import httpx
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent, Tool
from pydantic import Field
from verifiers.v1.mcp import SharedToolsetConfig, Toolset
from verifiers.v1.state import State


class ModelwrightState(State):
    """One rollout's episode: where it runs and what it has given so far (shared by the task's
    hooks and the tool server)."""

    server_url: str = ""
    episode_id: str = ""
    task_id: str = ""
    first: str = ""
    tools: list[dict[str, Any]] = Field(default_factory=list)
    request_timeout: float = 900.0
    done: bool = False
    reward: float | None = None
    record: dict[str, Any] = Field(default_factory=dict)

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=self.request_timeout) as client:
            response = await client.post(f"{self.server_url}/{path}", json=body)
        data = response.json()
        if data.get("type") == "error":
            raise RuntimeError(f"Modelwright server: {data['data']['message']}")
        response.raise_for_status()
        return data

    async def step(self, calls: list[dict[str, Any]], content: str | None = None) -> dict[str, Any]:
        """One step of the episode; on the step that ends it, the verifier's reward."""
        out = await self.post("step", {"episode_id": self.episode_id,
                                       "action": {"tool_calls": calls, "content": content}})  # fmt: skip
        if out["done"]:
            self.done, self.reward = True, float(out["reward"])
            self.record = out["observation"].get("record") or {}
        return out


class ModelwrightToolset(Toolset[SharedToolsetConfig, ModelwrightState]):
    """The episode's tools (their names bare, their schemas the product's)."""

    TOOL_PREFIX = None

    def register(self, mcp: MCPServer) -> None:
        # The catalog is the rollout's (read from its reset), so the protocol handlers are
        # replaced rather than static tools registered (as verifiers' NeMo Gym toolset does).
        server = cast(Any, mcp)
        server.list_tools = self._with_state(self.list_tools)
        server.call_tool = self._with_state(self.call_tool)

    async def list_tools(self) -> list[Tool]:
        tools = []
        for spec in self.state.tools:
            fn = spec.get("function", spec)
            tools.append(Tool(name=fn["name"], description=fn.get("description") or None,
                              input_schema=fn.get("parameters") or {"type": "object"}))  # fmt: skip
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context | None = None) -> CallToolResult:  # fmt: skip
        if self.state.done:
            text = "The episode has ended (its step budget is spent): answer without a tool call."
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        out = await self.state.step([{"name": name, "arguments": arguments or {}}])
        text = out["observation"]["text"]
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=False)


if __name__ == "__main__":
    ModelwrightToolset.run()
