"""The records the supervisor and the session share: a call's result and a worker's failures.

A leaf module (it imports only `tools.errors`), so `tools.runtime.supervisor` and `tools.runtime.session`
both use it without importing each other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from tools.errors import ToolError


def commit_number(value: object) -> int | None:
    """A worker's commit number (in `ready` and every reply), or None if it is not a sane one:
    a hostile worker's word, bounded; it decides only which of its own session's commits a
    restore keeps."""
    return value if type(value) is int and 0 <= value < 1 << 40 else None


class WorkerDied(Exception):
    """The worker is gone; `reason` says why when the supervisor killed it for a bad reply."""

    def __init__(self, reason: str = ""):
        super().__init__(reason)
        self.reason = reason


class WorkerTimedOut(Exception):
    """The worker did not answer within the call's deadline."""


@dataclass
class ToolResult:
    tool: str
    args: dict
    ok: bool
    output: dict = field(default_factory=dict)
    error: ToolError | None = None
    images: list[bytes] = field(default_factory=list)
    duration_ms: float = 0.0
    scene_hash: str | None = None
    seq: int | None = None  # the call's place in the session's ledger (tools/trust/ledger.py)

    def to_dict(self) -> dict:
        """The JSON record of the call (images left out)."""
        return {"tool": self.tool, "args": self.args, "ok": self.ok,
                "error": self.error.to_dict() if self.error else None,
                "duration_ms": round(self.duration_ms, 3), "scene_hash": self.scene_hash,
                "output": self.output}

    def to_text(self, limit: int = 4000) -> str:
        """What a model reads back: the output as compact JSON, or the error and what to do."""
        if not self.ok and self.error is not None:
            return f"ERROR ({self.error.kind.value}): {self.error.message}"
        text = json.dumps(self.output, separators=(",", ":"))
        return text if len(text) <= limit else text[: limit - 20] + "...(truncated)"
