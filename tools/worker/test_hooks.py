"""Test-only worker ops: imported only by a worker started with `--test-hooks` (a pool made with
`test_hooks=True` or `MODELWRIGHT_TEST_HOOKS=1`); any other worker answers each of them
"unknown worker op", and never loads this module.

They let the tests play the parts the product must survive:
- `fault`: break the worker (abort, segfault, exit, a hang in Python or inside C) to prove
  the supervisor recovers
- `probe`: try what the jail must refuse (connect, read, write) and report each outcome
- `exec`: a hostile policy with full Python in the worker (`runtime` is the WorkerRuntime)
- `hash_check`: the incremental scene hash against a full walk

The trusted side sends them with `ToolSession._send_test_op`, `_fault` and `_probe`.
"""

from __future__ import annotations

import ctypes
import os
import socket
import sys
from collections.abc import Callable
from typing import Any

from tools.errors import ErrorKind, ToolError


def ops(runtime: Any) -> dict[str, Callable[[dict], dict]]:
    """The test ops of `runtime` (a WorkerRuntime), by op name; each returns its output."""
    return {
        "fault": lambda request: fault(request["kind"]),
        "probe": probe,
        "exec": lambda request: run_code(runtime, request["code"]),
        "hash_check": lambda request: hash_check(runtime, request),
    }


def fault(kind: str) -> dict:
    """Break the worker the way `kind` says; an unknown kind is a validation error."""
    if kind == "abort":
        os.abort()
    if kind == "segfault":
        ctypes.string_at(0)
    if kind == "exit":
        sys.exit(3)
    if kind == "hang":
        while True:
            pass
    if kind == "hang_c":  # deadlock inside C: no Python signal handler can ever run
        mutex = ctypes.create_string_buffer(64)
        libc = ctypes.CDLL(None)
        libc.pthread_mutex_lock(mutex)
        libc.pthread_mutex_lock(mutex)
    raise ToolError(ErrorKind.VALIDATION, f"unknown fault {kind!r}")


def probe(request: dict) -> dict:
    """Try what the jail must refuse (connect, read, write) and report each outcome."""
    out: dict = {}
    if request.get("connect"):
        host, port = request["connect"]
        try:
            with socket.create_connection((host, port), timeout=2):
                out["connect"] = "connected"
        except OSError as e:
            out["connect"] = f"refused: {e}"
    for path in request.get("read", []):
        try:
            with open(path, "rb") as f:
                out[f"read:{path}"] = f"read {len(f.read(64))} bytes"
        except OSError as e:
            out[f"read:{path}"] = f"refused: {e.strerror}"
    for path in request.get("write", []):
        try:
            with open(path, "wb") as f:
                f.write(b"x")
            out[f"write:{path}"] = "written"
        except OSError as e:
            out[f"write:{path}"] = f"refused: {e.strerror}"
    return out


def run_code(runtime: Any, code: str) -> dict:
    """Run `code` with the worker's runtime in reach, as a hostile policy's code would."""
    exec(code, {"runtime": runtime})  # noqa: S102 - test hooks only
    return {}


def hash_check(runtime: Any, request: dict) -> dict:
    """The scene hash by a full walk next to the incremental one's bookkeeping."""
    state = runtime.state
    if "journal_from_objects" in request:
        state.journal_from_objects = int(request["journal_from_objects"])
    return {"full": state.hasher.full_digest(), "full_walks": state.hasher.full_walks,
            "journal_entries": state.journal_entries(), "loads": state.loads}
