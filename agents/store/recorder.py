"""Recording one episode, step by step, so that a crash loses at most the step in flight.

Each step's frame is written atomically (temp, fsync, rename, fsync folder) *before* the
step's row commits, so a committed step always has its frame. Counters on the episode row
move in the same transaction as the step, so they always agree with the steps table.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Protocol

from agents.store.atomic import atomic_copy_file, atomic_write_bytes
from agents.store.errors import RecorderClosed, StoreError, StoreLocked
from agents.store.frames import check_png, sha256
from agents.store.layout import ARTIFACTS, FRAMES, dumps
from agents.store.lease import Lease
from agents.store.models import Episode, Step

# What one step's arguments, output, result text or model message may take in the store;
# past it only a digest, the size and the first KB are kept (a 100 MB argument is abuse,
# not data: get_scene of 5 000 objects is ~1.5 MB).
MAX_RECORDED_BYTES = 2 << 20
KEPT_HEAD = 1024


def _capped(value: Any) -> Any:
    """`value`, or {"_truncated": {sha256, bytes, head}} when its JSON is over the cap."""
    if value is None:
        return None
    text = value if isinstance(value, str) else dumps(value)
    if len(text) <= MAX_RECORDED_BYTES // 4:  # cheap common case: no encoding needed
        return value
    data = text.encode("utf-8", "replace")
    if len(data) <= MAX_RECORDED_BYTES:
        return value
    digest = {"sha256": sha256(data), "bytes": len(data),
              "head": data[:KEPT_HEAD].decode("utf-8", "ignore")}
    if isinstance(value, str):
        return f"[truncated: {digest['bytes']} bytes, sha256 {digest['sha256']}] {digest['head']}"
    return {"_truncated": digest}


def _normalise_result(result: Any) -> tuple[Any, str | None]:
    """(JSON output, text the model saw) from a ToolResult, a dict, a string or None."""
    if result is None:
        return None, None
    if hasattr(result, "to_text") and hasattr(result, "output"):
        return result.output, result.to_text()
    if isinstance(result, str):
        return None, result
    return result, dumps(result)


class EpisodeSink(Protocol):
    """What a Recorder writes through: `agents.store.Store` (kept as a protocol so that the
    recorder does not import the store that creates it)."""

    durable: bool

    def commit_step(self, step: Step) -> None: ...

    def close_episode(self, episode_id: str, status: str, **outcome: Any) -> None: ...

    def episode(self, episode_id: str) -> Episode: ...


class Recorder:
    """The handle `Store.begin_episode` returns; not shared between threads without care
    (calls are serialised by a lock, but step order is then the order calls arrive)."""

    def __init__(self, store: EpisodeSink, episode_id: str, folder: Path, lease: Lease,
                 actor: str = "agent"):
        self._store = store
        self.actor = actor  # who makes a step unless add_step says otherwise
        self.episode_id = episode_id
        self.folder = folder
        self._lease: Lease | None = lease
        self._lock = threading.Lock()
        self._next_index = 0
        self._last_turn = -1

    @property
    def closed(self) -> bool:
        return self._lease is None

    @property
    def n_steps(self) -> int:
        return self._next_index

    @property
    def next_turn(self) -> int:
        """The turn number a new reply gets (turns never go back)."""
        return self._last_turn + 1

    def add_step(
        self,
        *,
        tool: str,
        args: dict[str, Any] | None = None,
        result: Any = None,
        error_kind: str | None = None,
        error_message: str | None = None,
        duration_ms: float | None = None,
        frame: bytes | Path | None = None,
        scene_hash: str | None = None,
        model_message: str | None = None,
        tokens_in: int = 0,
        tokens_out: int = 0,
        latency_ms: float = 0.0,
        token_ids: list[int] | None = None,
        logprobs: list[float] | None = None,
        turn: int | None = None,
        actor: str | None = None,
    ) -> Step:
        """Record one tool call. `turn`: steps from one assistant reply share a turn number
        (export makes them one message with several tool_calls); None starts a new turn.
        A ToolResult may be passed as `result`: its error, duration and scene hash fill the
        arguments left unset. `actor`: "human" or "agent" (default: the episode's)."""
        if hasattr(result, "to_text"):
            err = getattr(result, "error", None)
            if error_kind is None and err is not None:
                error_kind, error_message = str(err.kind), error_message or err.message
            if duration_ms is None:
                duration_ms = getattr(result, "duration_ms", None)
            if scene_hash is None:
                scene_hash = getattr(result, "scene_hash", None)
        output, text = _normalise_result(result)
        args, output, text = _capped(dict(args or {})), _capped(output), _capped(text)
        model_message, error_message = _capped(model_message), _capped(error_message)
        frame_bytes = frame.read_bytes() if isinstance(frame, Path) else frame
        with self._lock:
            if self._lease is None:
                raise RecorderClosed(f"episode {self.episode_id} is already closed")
            index = self._next_index
            if frame_bytes is not None:
                check_png(frame_bytes, f"frame of step {index} ({tool})")
            if turn is None:
                turn = self._last_turn + 1
            elif turn < self._last_turn:
                raise StoreError(f"step {index}: turn {turn} goes back before {self._last_turn}")
            frame_rel = frame_sha = None
            if frame_bytes is not None:
                frame_rel = f"{FRAMES}/{index:06d}.png"
                frame_sha = sha256(frame_bytes)
                atomic_write_bytes(self.folder / frame_rel, frame_bytes, durable=self._store.durable)
            step = Step(
                episode_id=self.episode_id,
                index=index,
                turn=turn,
                at=time.time(),
                tool=tool,
                args=args,
                result=output,
                result_text=text,
                error_kind=error_kind,
                error_message=error_message,
                duration_ms=float(duration_ms or 0.0),
                frame=frame_rel,
                frame_sha256=frame_sha,
                scene_hash=scene_hash,
                model_message=model_message,
                tokens_in=int(tokens_in),
                tokens_out=int(tokens_out),
                latency_ms=float(latency_ms),
                token_ids=None if token_ids is None else [int(t) for t in token_ids],
                logprobs=None if logprobs is None else [float(p) for p in logprobs],
                actor=actor or self.actor,
            )
            try:
                self._store.commit_step(step)
            except StoreLocked:  # the row was not written: no frame is left without it
                if frame_rel is not None:
                    (self.folder / frame_rel).unlink(missing_ok=True)
                raise
            self._next_index = index + 1
            self._last_turn = turn
            return step

    def finish(
        self,
        reward: float | None = None,
        components: dict[str, float] | None = None,
        success: bool | None = None,
        artifacts: dict[str, bytes | Path] | None = None,
        final_message: str | None = None,
    ) -> Episode:
        """Close the episode as `finished` with its outcome; artifacts (final .blend, .step,
        .glb...) are written atomically before the row says finished."""
        with self._lock:
            if self._lease is None:
                raise RecorderClosed(f"episode {self.episode_id} is already closed")
            names = []
            for name, content in (artifacts or {}).items():
                if not name or "/" in name or "\\" in name or name.startswith("."):
                    raise StoreError(f"artifact name {name!r} must be a plain file name")
                target = self.folder / ARTIFACTS / name
                target.parent.mkdir(exist_ok=True)
                if isinstance(content, (bytes, bytearray)):
                    atomic_write_bytes(target, bytes(content))
                else:
                    atomic_copy_file(Path(content), target)
                names.append(name)
            self._store.close_episode(
                self.episode_id,
                "finished",
                reward=reward,
                components=components,
                success=success,
                artifacts=names,
                final_message=final_message,
            )
            self._release()
        return self._store.episode(self.episode_id)

    def abort(self, reason: str = "") -> None:
        """Close the episode as `interrupted` (an exception, a user stop without outcome)."""
        with self._lock:
            if self._lease is None:
                return
            self._store.close_episode(self.episode_id, "interrupted", note=reason)
            self._release()

    def _release(self) -> None:
        if self._lease is not None:
            self._lease.release()
            self._lease = None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._lease is None:
            return
        if exc is not None:
            self.abort(f"{exc_type.__name__}: {exc}")
        else:
            self.finish()
