"""What MCP costs per tool call: the same calls through `modelwright mcp` (stdio, recorded)
and directly on a `ToolSession`, in the same run.

    .venv/bin/python benchmarks/bench_mcp.py [--calls 50]

Prints the median latency of `get_scene` (a small read) and `add_primitive` + `undo`
(a mutation and its undo) each way, and the ratio MCP / direct.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CUBE = {"kind": "cube", "name": "Box", "dimensions": [1, 1, 1]}


def direct(calls: int) -> dict[str, float]:
    from tools import ToolSession

    times: dict[str, list[float]] = {"get_scene": [], "add+undo": []}
    with ToolSession() as session:
        session.call("get_scene", {})  # warm
        for _ in range(calls):
            t0 = time.perf_counter()
            session.call("get_scene", {})
            times["get_scene"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            session.call("add_primitive", CUBE)
            session.call("undo", {})
            times["add+undo"].append(time.perf_counter() - t0)
    return {k: statistics.median(v) * 1000 for k, v in times.items()}


async def over_mcp(calls: int, data_dir: Path) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k.startswith(("MODELWRIGHT_", "PYTHON"))}
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "studio.cli", "mcp", "--data-dir", str(data_dir)],
        env=env,
        cwd=REPO,
    )
    times: dict[str, list[float]] = {"get_scene": [], "add+undo": []}
    async with Client(server, read_timeout_seconds=120) as client:
        await client.call_tool("get_scene", {})  # warm: opens the session and the episode
        for _ in range(calls):
            t0 = time.perf_counter()
            await client.call_tool("get_scene", {})
            times["get_scene"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await client.call_tool("add_primitive", CUBE)
            await client.call_tool("undo", {})
            times["add+undo"].append(time.perf_counter() - t0)
    return {k: statistics.median(v) * 1000 for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    base = direct(args.calls)
    with tempfile.TemporaryDirectory() as data_dir:
        mcp = anyio.run(over_mcp, args.calls, Path(data_dir))
    print(f"{'call':<12}{'direct ms':>12}{'MCP ms':>10}{'MCP/direct':>12}")
    for name in base:
        print(f"{name:<12}{base[name]:>12.2f}{mcp[name]:>10.2f}{mcp[name] / base[name]:>12.2f}")


if __name__ == "__main__":
    main()
