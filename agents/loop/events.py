"""Events the episode loop emits, as plain data, to plain callbacks.

Subscribers are called on the loop's own thread (the studio runs the loop in a worker
thread and re-posts events to the GUI thread itself). A subscriber that raises is logged
and dropped from that one event; it never stops an episode.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

# The kinds, in the order an episode produces them.
EPISODE_STARTED = "episode_started"  # {goal, tools}
STEP_STARTED = "step_started"  # {step}
MESSAGE = "message"  # {step, text, tokens_in, tokens_out, latency_ms}
CALL = "call"  # {step, call_id, tool, args}
RESULT = "result"  # {step, call_id, tool, ok, text, error_kind, duration_ms, repeated}
RENDER = "render"  # {step, png}
DONE = "done"  # {status, steps, reward, success, error}
KINDS = (EPISODE_STARTED, STEP_STARTED, MESSAGE, CALL, RESULT, RENDER, DONE)


@dataclass(frozen=True)
class Event:
    kind: str
    data: dict[str, Any]
    time: float = field(default_factory=time.time)


Subscriber = Callable[[Event], None]


class EventBus:
    """A list of subscribers; `emit` calls each one in order."""

    def __init__(self, subscribers: list[Subscriber] | None = None) -> None:
        self._subscribers: list[Subscriber] = list(subscribers or [])

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """Add a subscriber; returns a function that removes it."""
        self._subscribers.append(fn)
        return lambda: self._subscribers.remove(fn) if fn in self._subscribers else None

    def emit(self, kind: str, **data: Any) -> None:
        if not self._subscribers:
            return
        event = Event(kind, data)
        for fn in list(self._subscribers):
            try:
                fn(event)
            except Exception:  # a broken view must not break the episode
                log.exception("event subscriber %r failed on %s", fn, kind)
