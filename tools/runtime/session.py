"""A tool session: one scene, one worker at a time, every call validated and deadline-bound."""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import threading
import time
from pathlib import Path

from tools.errors import ErrorKind, ToolError
from tools.results import ToolResult, WorkerDied, WorkerTimedOut, commit_number
from tools.runtime.supervisor import WorkerPool, WorkerProcess, default_pool
from tools.sandbox import jail
from tools.specs import validate_call
from tools.trust import ledger as ledger_mod

DEFAULT_DEADLINE_S = 30.0
# tools whose input is code or a file someone else made: refused when no jail works here
UNTRUSTED_INPUT_TOOLS = frozenset({"cadquery_script", "import_file"})


class ToolSession:
    """Holds one worker from a pool, working in its private scratch only.

    No person's folder is ever bound into the jail: a command that delivers files copies them
    out after the call through tools.trust.outbox (and an import in, through tools.trust.outbox.UserFolder).
    The worker is this session's alone and dies with it (see WorkerPool). `untrusted=True`
    marks every call as coming from someone else (MCP clients): without a working jail they
    are all refused, not only UNTRUSTED_INPUT_TOOLS.
    """

    def __init__(self, pool: WorkerPool | None = None, deadline_s: float = DEFAULT_DEADLINE_S,
                 untrusted: bool = False, recover: bool = True):
        self.untrusted = untrusted
        # False: a worker that crashed or timed out is not restarted (a verifier's one-call
        # session, which is closed right after): the session's later calls fail.
        self.recover = recover
        self.pool = pool or default_pool()
        self.deadline_s = deadline_s
        self._lock = threading.RLock()
        self.worker: WorkerProcess | None = self.pool.acquire()
        # a worker that has run nothing yet holds an empty scene: resetting it is a no-op, so
        # `reset` skips the round trip until the first other request (bench_trust.py)
        self._pristine = True
        self.restarts = 0
        self.closed = False
        self._last_hash: str | None = None
        # the worker's commit the caller was last told of: its `ready`, then each reply's
        self._acked_commit: int | None = self.worker.ready_commit
        self._recovery: concurrent.futures.Future | None = None
        # what the trusted side itself knows of every call: the verifier's only evidence
        self.ledger = ledger_mod.Ledger.open()

    @property
    def acked_commit(self) -> int | None:
        """The worker's commit the caller was last told of (its `ready`, then each reply's)."""
        return self._acked_commit

    # -- context manager -------------------------------------------------------------------------
    def __enter__(self) -> ToolSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            try:
                w = self._w()
            except ToolError:
                self.closed = True
                return
            self.closed = True
            self.worker = None
            self.ledger.close()
            self.pool.release(w)

    @property
    def workspace(self) -> Path:
        return Path(self._w().workspace)

    @property
    def scratch(self) -> Path:
        """The worker's scratch folder; its committed scene (state/) is what a verifier reads.
        Written by the worker: hostile ground, to be read only through tools.trust.confined."""
        return Path(self._w().scratch)

    @property
    def versions(self) -> dict:
        return dict(self._w().versions)

    def _w(self) -> WorkerProcess:
        if self._recovery is not None:
            fut, self._recovery = self._recovery, None
            try:
                self.worker = fut.result()
            except ToolError:
                self.worker = None
                raise
            self._acked_commit = self.worker.ready_commit  # the commit it restored
        if self.closed or self.worker is None:
            raise ToolError(ErrorKind.VALIDATION, "the session is closed")
        return self.worker

    # -- calls ------------------------------------------------------------------------------------
    def call(self, tool, args=None, deadline_s: float | None = None) -> ToolResult:
        """Run one tool call. Never raises for a failed call: the error is in the result."""
        t0 = time.perf_counter()
        shown_args = args if isinstance(args, dict) else {"_invalid": repr(args)[:200]}
        try:
            spec, norm = validate_call(tool, args)
            if self.untrusted or spec.name in UNTRUSTED_INPUT_TOOLS:
                jail.require_jail(spec.name)
        except ToolError as e:
            seq = self.ledger.note(str(tool)[:64], {}, False, "refused")
            return ToolResult(str(tool)[:64], shown_args, False, error=e,
                              duration_ms=(time.perf_counter() - t0) * 1000, seq=seq)
        with self._lock:
            if self.ledger.full:
                self._fold_ledger()
            inputs = self._inputs(spec.name, norm)
            reply, blobs, error = self._send({"op": "call", "tool": spec.name, "args": norm,
                                              "mutating": spec.mutating}, deadline_s or self.deadline_s, spec.name)
            seq = self._note(spec, norm, reply, error, inputs)
        ms = (time.perf_counter() - t0) * 1000
        if error is not None:
            return ToolResult(spec.name, norm, False, error=error, duration_ms=ms,
                              scene_hash=reply.get("scene_hash"), seq=seq)
        if not reply.get("ok"):
            return ToolResult(spec.name, norm, False, error=ToolError.from_dict(reply["error"]),
                              duration_ms=ms, scene_hash=reply.get("scene_hash"), seq=seq)
        output = reply.get("output", {})
        if not isinstance(output, dict):  # a hostile worker's reply: never handed on as data
            return ToolResult(spec.name, norm, False, duration_ms=ms, seq=seq, error=ToolError(
                ErrorKind.CRASH, f"the worker sent a malformed {spec.name} result"))
        return ToolResult(spec.name, norm, True, output=output, images=blobs,
                          duration_ms=ms, scene_hash=reply.get("scene_hash"), seq=seq)

    def _inputs(self, tool: str, norm: dict) -> ledger_mod.VaultedFiles | None:
        """Before an import: the files it will read, copied into the vault as they are now
        (the verifier imports this copy again; None: no such file to import). A script needs
        none: it may read only its worker's script folder (tools/worker/script_guard.py), and its
        rerun starts with that folder empty, like any other state an earlier script left."""
        if tool != "import_file":
            return None
        return self.ledger.take_inputs(self._w().workspace, str(norm["path"]))

    def _note(self, spec, norm: dict, reply: dict, error: ToolError | None,
              inputs: ledger_mod.VaultedFiles | None = None) -> int:
        """Record the call in the ledger (under the session lock): what the supervisor saw of
        it, and an import's vaulted files. What the worker answered is kept for the record
        only (`reported_ok`): the verifier runs every call again itself."""
        if error is not None:
            outcome = "timeout" if error.kind == ErrorKind.TIMEOUT else "crash"
            return self.ledger.note(spec.name, norm, spec.mutating, outcome, inputs=inputs)
        reported = reply.get("ok") is True and isinstance(reply.get("output", {}), dict)
        return self.ledger.note(spec.name, norm, spec.mutating, "answered", reported, inputs)

    def _fold_ledger(self) -> None:
        """A ledger at its cap starts again from the acknowledged commit (vaulted now)."""
        try:
            base = self.ledger.take(os.fspath(self._w().scratch), self._acked_commit or 0)
        except (ToolError, OSError, ValueError):
            base = None
        self.ledger.restart(base)
        if base is None:
            self.ledger.broken = "its history outgrew the ledger on a scene it could not copy"

    def _send(self, payload: dict, deadline_s: float, what: str) -> tuple[dict, list[bytes], ToolError | None]:
        w = self._w()
        if payload.get("op") not in ("reset", "hash", "status"):
            self._pristine = False
        try:
            reply, blobs = w.request(payload, deadline_s)
            self._last_hash = reply.get("scene_hash", self._last_hash)
            commit = commit_number(reply.get("commit"))
            if commit is not None:
                self._acked_commit = commit
            return reply, blobs, None
        except WorkerTimedOut:
            w.kill()
            err = ToolError(ErrorKind.TIMEOUT, f"{what} ran past its {deadline_s:g} s deadline and was stopped; "
                            "the scene is as before the call. Simplify the operation or split it up.")
        except WorkerDied as died:
            try:  # its pipe closed a moment before the process is gone: its exit code, if soon
                code = w.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None  # alive with its pipe closed: killed below
            w.kill()
            reason = died.reason or w.stopped_for  # the memory watch's, when it stopped it
            why = f"was stopped: {reason}" if reason else f"died during {what} (exit {code})"
            err = ToolError(ErrorKind.CRASH, f"the worker {why}; it was restarted "
                            "and the scene is as before the call.")
        if self.recover:
            self._recover(w)
        return {"scene_hash": self._last_hash}, [], err

    def _op(self, request: dict, deadline_s: float, what: str) -> tuple[dict, list[bytes]]:
        """A worker op other than a tool call: its reply and blobs; raises the ToolError it
        failed with (a crash or timeout included: the worker is being restarted then)."""
        with self._lock:
            reply, blobs, err = self._send(request, deadline_s, what)
        if err is not None:
            raise err
        if not reply.get("ok"):
            raise ToolError.from_dict(reply["error"])
        return reply, blobs

    def _recover(self, dead: WorkerProcess) -> None:
        """Start a fresh worker restored from the session's last commit, in the background:
        the failed call returns at once, and the next call waits for the replacement."""
        self.restarts += 1
        upto = self._acked_commit  # what the caller was last told of
        fut: concurrent.futures.Future = concurrent.futures.Future()

        def spawn() -> None:
            try:
                fut.set_result(self.pool.spawn(restore_from=dead.scratch,
                                               restore_upto=upto))
            except BaseException as e:  # handed to the next caller
                fut.set_exception(e)

        self.worker = None
        self._recovery = fut
        threading.Thread(target=spawn, daemon=True, name="mw-recover").start()

    # -- conveniences -------------------------------------------------------------------------------
    def scene(self) -> dict:
        """Every object (the model's `get_scene` shows a page at a time; this reads them all)."""
        out: dict = {}
        objects: list[dict] = []
        while True:
            r = self.call("get_scene", {"offset": len(objects), "limit": 10_000})
            if not r.ok:
                raise r.error  # type: ignore[misc]
            out = out or dict(r.output)
            objects += r.output["objects"]
            if r.output.get("next_offset") is None:
                break
        out["objects"] = objects
        out.pop("next_offset", None)
        return out

    def render(self, views: list[str] | None = None, size: int = 256, **kw) -> ToolResult:
        args = {"size": size, **kw}
        if views:
            args["views"] = views
        return self.call("render", args)

    def meshes(self, known: dict[str, str] | None = None) -> tuple[dict, list[bytes]]:
        """The visible meshes as viewport buffers (`tools.worker.meshes`); geometry whose key
        is in `known` (name -> key) is not sent again."""
        reply, blobs = self._op({"op": "meshes", "known": dict(known or {})}, self.deadline_s,
                                "meshes")
        return reply["output"], blobs

    def scene_hash(self) -> str:
        with self._lock:
            reply, _, err = self._send({"op": "hash"}, self.deadline_s, "hash")
        return reply.get("scene_hash", "")

    def reset(self) -> None:
        """Empty scene, undo stack and snapshots cleared."""
        with self._lock:
            if not self._pristine:
                reply, _, err = self._send({"op": "reset"}, 60, "reset")
                if err is not None:
                    self._send({"op": "reset"}, 60, "reset")
        self.ledger.restart(None)
        self.ledger.broken = None

    def switch(self, park: str | None = None, take: str | None = None, fork: bool = False) -> str:
        """Park the whole live state (scene, undo history, snapshots) under `park` (None: drop
        it) and make the state stashed under `take` live (copied if `fork`; None: an empty
        scene). Returns the new scene hash; raises ToolError if `take` is missing (nothing
        changed then) or the worker failed. A reset or session release drops every stash."""
        reply, _ = self._op({"op": "switch", "park": park, "take": take, "fork": fork}, 60,
                            "switch")
        with self._lock:  # a whole other state is live: the ledger starts from it
            self._fold_ledger()
        return reply.get("scene_hash", "")

    def status(self) -> dict:
        with self._lock:
            reply, _, _ = self._send({"op": "status"}, 30, "status")
        return reply.get("output", {})

    def _fault(self, kind: str, deadline_s: float | None = None) -> ToolResult:
        """Test-only: make the worker abort, segfault, exit or hang (needs test hooks)."""
        t0 = time.perf_counter()
        with self._lock:
            reply, _, err = self._send({"op": "fault", "kind": kind}, deadline_s or self.deadline_s, f"fault:{kind}")
        ms = (time.perf_counter() - t0) * 1000
        if err is None and not reply.get("ok"):
            err = ToolError.from_dict(reply["error"])
        return ToolResult("_fault", {"kind": kind}, err is None, error=err, duration_ms=ms,
                          scene_hash=reply.get("scene_hash"))

    def _send_test_op(self, request: dict) -> dict:
        """Test-only: a raw worker op such as `hash_check` (needs test hooks)."""
        return self._op(request, self.deadline_s, str(request.get("op")))[0]["output"]

    def _probe(self, **what) -> dict:
        """Test-only: ask the worker to try connecting, reading and writing (needs test hooks)."""
        return self._op({"op": "probe", **what}, self.deadline_s, "probe")[0]["output"]
