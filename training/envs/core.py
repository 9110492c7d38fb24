"""One environment core over the product's episode loop: reset(task) -> step(calls) -> reward.

Trainers other than Modelwright's drive an episode from outside (reset, then one tool call at a
time, then ask for the reward), while the episode loop pulls: it asks its policy for a reply
each turn. `EpisodeEnv` joins the two without a second loop. Each `reset` runs one episode of
the product's own harness (`training.eval.harness.evaluate`, as `modelwright eval` does) in a
thread, with a policy that hands every turn's prompt out and waits for the trainer's calls:

    trainer                      EpisodeEnv                 episode loop (thread)
    reset("requests:1:0")  ->    starts the episode    ->   fresh jailed worker, start scene
                           <-    first observation     <-   policy.act(prompt)
    step(call)             ->    the call as the reply ->   the tool runs in the worker
                           <-    the tool results      <-   policy.act(next prompt)
    finish()               ->    a reply with no call  ->   the episode ends, the verifier
                           <-    the record (reward)   <-   scores it in a clean worker

So the calls, the records, the store rows (when a store is given) and the rewards are those of
an eval episode with the same calls: one worker per episode, the checker on the trusted side,
nothing the worker wrote believed. Observations are text (the scene listing, tool results);
renders are off unless `observe="changed"` asks for them (in the messages and the record;
the text is the same).

Light: no torch, no transformers.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from typing import Any

from agents import PolicyError, PolicyReply, ToolCall

# How long a trainer's call may wait on the episode thread before the env says so (seconds): a
# tool call has its own timeout and kill in the worker, so this only catches a wedged thread.
WAIT_S = 900.0


class EnvError(RuntimeError):
    """The environment was used out of order (a step before reset, after the end) or its
    episode could not run; one line, for the trainer's log."""


@dataclass
class Observation:
    """What the model is shown: `text` (the new messages flattened), `messages` (them as the
    loop built them, images included when rendered), whether the episode has ended and, once
    it has, its `record` (the eval record: reward, success, components, steps, calls)."""

    text: str
    messages: list[dict] = field(default_factory=list)
    done: bool = False
    record: dict | None = None


def message_text(message: dict) -> str:
    """A chat message's text parts joined (images dropped)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def new_messages(messages: list[dict]) -> list[dict]:
    """The messages after the last assistant turn (the whole prompt before the first one)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            return messages[i + 1:]
    return [m for m in messages if m.get("role") != "system"]


def as_call(call: Any, index: int) -> ToolCall:
    """A trainer's call as the loop's ToolCall: a ToolCall, an OpenAI/TRL call dict
    ({"type": "function", "function": {"name", "arguments"}}), or {"name", "arguments"}."""
    if isinstance(call, ToolCall):
        return call
    if not isinstance(call, dict):
        raise EnvError(f"a tool call is a dict with a name and arguments, not {type(call).__name__}")
    fn = call.get("function", call)
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise EnvError("a tool call needs a name")
    args = fn.get("arguments", {})
    return ToolCall(id=str(call.get("id") or f"env_{index}"), name=name, arguments=args)


class _Channel:
    """The loop's policy: each `act` hands its prompt to the env and returns the env's reply."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.prompts: queue.Queue = queue.Queue()
        self.replies: queue.Queue = queue.Queue()

    def reset(self, task_info: dict | None = None) -> None:
        self.task_info = task_info

    def act(self, messages: list[dict], tools: list[dict]) -> PolicyReply:
        self.prompts.put(("turn", messages, tools))
        reply = self.replies.get()
        if reply is None:  # the env was closed mid-episode
            raise PolicyError("the environment was closed", fatal=True)
        return reply


class EpisodeEnv:
    """One episode at a time through the product's harness; reuse it across episodes.

    `reset(task_id)` -> Observation (the goal and the start scene); `step(calls)` ->
    Observation (the tool results and the scene, or `done` when the step budget ran out);
    `finish(text)` -> the episode's record (`record["reward"]` is the verifier's reward).
    `store`: a Store to record each episode in (as `modelwright eval --store`);
    `max_steps`: the loop's turn budget (the task's own budget caps it, as in eval);
    `name`: the policy name the records carry; `session_factory`: where its workers come
    from (default: a fresh jailed worker per episode from the machine's pool, as eval)."""

    def __init__(self, *, store: Any = None, max_steps: int = 20, observe: str = "text",
                 name: str = "env", source: str = "agent",
                 session_factory: Any = None) -> None:  # fmt: skip
        self.store = store
        self.session_factory = session_factory
        self.max_steps = max_steps
        self.observe = observe
        self.name = name
        self.source = source
        self.task_id: str | None = None
        self.record: dict | None = None
        self.tools: list[dict] = []
        self._channel: _Channel | None = None
        self._thread: threading.Thread | None = None
        self._outcome: queue.Queue = queue.Queue()
        self._calls = 0

    # -- the episode ---------------------------------------------------------------------

    def reset(self, task_id: str) -> Observation:
        """End any episode still open (scored as it stands), then start `task_id`'s."""
        from training.tasks import get_task

        if self._thread is not None:
            self.finish()
        get_task(task_id)  # an unknown id fails here, in the caller's thread, in one line
        self.task_id, self.record, self._calls = task_id, None, 0
        self._channel = _Channel(self.name)
        self._outcome = queue.Queue()
        self._thread = threading.Thread(target=self._run, args=(task_id, self._channel),
                                        name=f"env-{task_id}", daemon=True)  # fmt: skip
        self._thread.start()
        return self._next()

    def step(self, calls: Any) -> Observation:
        """Run one turn's calls (one call or a list); the observation that follows them."""
        if self._thread is None or self.record is not None:
            raise EnvError("step before reset, or after the episode ended: call reset(task_id)")
        items = calls if isinstance(calls, list) else [calls]
        if not items:
            raise EnvError("a step needs at least one call (finish() ends the episode)")
        converted = []
        for c in items:
            converted.append(as_call(c, self._calls))
            self._calls += 1
        self._channel.replies.put(PolicyReply(text=None, tool_calls=converted))
        return self._next()

    def finish(self, text: str | None = "done") -> dict:
        """End the episode (a reply with no call, as a model that is done) and return its
        record; the record of an episode that already ended (budget, stuck) as it is."""
        if self._thread is None:
            if self.record is not None:
                return self.record
            raise EnvError("finish before reset: call reset(task_id)")
        if self.record is None:
            self._channel.replies.put(PolicyReply(text=text))
            self._next()
        self._thread.join(timeout=WAIT_S)
        self._thread = None
        return self.record

    def reward(self) -> float:
        """The verifier's reward of the episode (ends it first if it is open)."""
        return float(self.finish()["reward"])

    def close(self) -> None:
        """End an open episode without waiting for a reward."""
        if self._thread is not None and self.record is None and self._channel is not None:
            self._channel.replies.put(None)
            self._thread.join(timeout=WAIT_S)
        self._thread = None

    # -- inside ----------------------------------------------------------------------------

    def _run(self, task_id: str, channel: _Channel) -> None:
        from agents import LoopConfig
        from training.eval.harness import evaluate, task_spec

        try:
            report = evaluate([task_spec(task_id)], lambda: channel, workers=1, store=self.store,
                              source=self.source, session_factory=self.session_factory,
                              config=LoopConfig(max_steps=self.max_steps, observe=self.observe))  # fmt: skip
            self._outcome.put(("done", report["episodes"][0]))
        except BaseException as exc:  # noqa: BLE001 - handed to the trainer's thread as one line
            self._outcome.put(("error", f"{type(exc).__name__}: {exc}"))
        channel.prompts.put(("end", None, None))

    def _next(self) -> Observation:
        """Wait for the episode's next prompt, or its end."""
        channel = self._channel
        while True:
            try:
                kind, messages, tools = channel.prompts.get(timeout=WAIT_S)
            except queue.Empty:
                raise EnvError(f"{self.task_id}: no answer from the episode in {WAIT_S:.0f} s") from None
            if kind == "turn":
                self.tools = tools
                fresh = new_messages(messages)
                text = "\n".join(t for t in (message_text(m) for m in fresh) if t)
                return Observation(text=text, messages=fresh)
            if kind == "end":
                status, value = self._outcome.get()
                if status == "error":
                    self._thread = None
                    raise EnvError(f"{self.task_id}: the episode could not run: {value}")
                self.record = value
                if value.get("status") == "error":
                    raise EnvError(f"{self.task_id}: the episode could not run: {value.get('error')}")
                return Observation(text="", done=True, record=value)
