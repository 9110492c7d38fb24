"""`modelwright mcp`: the `mcp` package's own stdio client lists the tools and calls them.

The server runs as a real subprocess (`python -m studio.cli mcp`) with the real tool
runtime (sandboxed Blender + CadQuery worker) and records into a real store.
"""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path

import anyio
import mcp.types as types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from agents.store import Store
from tools import catalogue

REPO = Path(__file__).resolve().parents[1]


def _server(data_dir: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith(("MODELWRIGHT_", "PYTHON"))}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "studio.cli", "mcp", "--data-dir", str(data_dir), "--deadline-s", "60"],
        env=env,
        cwd=REPO,
    )


async def _session(data_dir: Path) -> dict:
    seen: dict = {}
    async with Client(_server(data_dir), read_timeout_seconds=120) as client:
        listed = await client.list_tools()
        seen["tools"] = {t.name: t for t in listed.tools}
        seen["add"] = await client.call_tool(
            "add_primitive",
            {"kind": "cube", "name": "Box", "dimensions": [1, 2, 3], "location": [0, 0, 1.5]},
        )
        seen["scene"] = await client.call_tool("get_scene", {})
        seen["render"] = await client.call_tool("render", {"size": 64, "views": ["iso", "top"]})
        seen["bad"] = await client.call_tool("add_primitive", {"kind": "teapot", "name": "T"})
    return seen


def test_mcp_client_lists_tools_and_calls_them(tmp_path):
    seen = anyio.run(_session, tmp_path / "data")

    # every tool of the runtime, with its generated schema passed through unchanged
    specs = {spec["name"]: spec for spec in catalogue()}
    assert set(seen["tools"]) == set(specs)
    for name, tool in seen["tools"].items():
        assert tool.input_schema == specs[name]["parameters"]
        assert tool.annotations.read_only_hint is (not specs[name]["mutating"])
    assert seen["tools"]["get_scene"].annotations.read_only_hint is True

    add = seen["add"]
    assert not add.is_error, add.content
    scene = seen["scene"]
    assert not scene.is_error
    objects = scene.structured_content["objects"]
    assert [o["name"] for o in objects] == ["Box"]
    assert [round(d, 4) for d in objects[0]["dimensions"]] == [1.0, 2.0, 3.0]
    assert '"Box"' in scene.content[0].text  # the same output as text for text-only clients

    render = seen["render"]
    images = [c for c in render.content if isinstance(c, types.ImageContent)]
    assert not render.is_error and len(images) >= 1
    png = base64.b64decode(images[0].data)
    assert images[0].mime_type == "image/png" and png[:8] == b"\x89PNG\r\n\x1a\n"

    bad = seen["bad"]
    assert bad.is_error and "validation" in bad.content[0].text

    # the whole MCP session is one recorded, finished episode
    with Store(tmp_path / "data") as store:
        (episode,) = store.list_episodes()
        assert episode.source == "agent" and "mcp" in episode.tags
        assert episode.status == "finished"
        steps = store.steps(episode.id)
    assert [s.tool for s in steps] == ["add_primitive", "get_scene", "render", "add_primitive"]
    assert [s.error_kind for s in steps] == [None, None, None, "validation"]
    assert steps[2].frame is not None and steps[0].scene_hash


def test_a_runtime_that_cannot_start_gives_an_error_result_not_a_protocol_error(tmp_path):
    from agents.serving.mcp_server import McpSettings, ToolBridge

    not_a_folder = tmp_path / "file.txt"
    not_a_folder.write_text("x")
    bridge = ToolBridge(McpSettings(workspace=not_a_folder / "ws", record=False))
    result = bridge.call("get_scene", {})
    bridge.close()
    assert result.is_error and "tool runtime failed" in result.content[0].text
