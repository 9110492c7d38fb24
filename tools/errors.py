"""Typed errors of the tool runtime: what went wrong, in words a person or a model can act on."""

from __future__ import annotations

from enum import StrEnum

from tools.text import printable


class ErrorKind(StrEnum):
    VALIDATION = "validation"  # the call itself is wrong: unknown tool, bad arguments
    KERNEL = "kernel"  # Blender or CadQuery refused or failed the operation
    TIMEOUT = "timeout"  # the call outran its deadline and the worker was killed
    CRASH = "crash"  # the worker process died during the call
    SANDBOX = "sandbox"  # the call tried something the sandbox forbids


class ToolError(Exception):
    """An error a tool call ended with. The scene is always as it was before the call."""

    def __init__(self, kind: ErrorKind | str, message: str):
        self.kind = ErrorKind(kind)
        self.message = message
        super().__init__(f"{self.kind.value}: {message}")

    def to_dict(self) -> dict:
        return {"kind": self.kind.value, "message": self.message}

    @classmethod
    def from_dict(cls, d: dict) -> ToolError:
        """The error a worker reported; a malformed one (a hostile worker) becomes a crash.
        Its message is foreign text: control and bidi characters arrive escaped."""
        try:
            return cls(d["kind"], printable(str(d["message"])[:4000]))
        except (KeyError, TypeError, ValueError):
            return cls(ErrorKind.CRASH, "the worker reported a malformed error")
