"""What every tool session offers its users (the loop, the tasks' setup and checkers, the
verifier, the studio): `ToolSession`, the studio's `BlockingSession` and the wrappers that
note a setup's calls all satisfy `Session`, so code above `tools` types against it and not
against one of them."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from tools.results import ToolResult


class Session(Protocol):
    """A scene on one worker, driven one call at a time (see docs/CONTRACTS.md)."""

    @property
    def workspace(self) -> Path:
        """Host folder for the files the tools read and write (export, import_file)."""
        ...

    @property
    def scratch(self) -> Path:
        """The worker's scratch folder; the verifier reads the committed scene from it."""
        ...

    def call(self, tool: str, args: dict | None = None, /) -> ToolResult: ...

    def scene(self) -> dict: ...

    def render(self, views: list[str] | None = None, size: int = 256) -> ToolResult: ...

    def scene_hash(self) -> str: ...

    def reset(self) -> None: ...
