"""What the model sees: observations, tool feedback and a bounded conversation.

The loop keeps the full conversation (every image, every tool output) for the record, and
builds each prompt from it with `ContextWindow.view`: only the last K images stay, older
tool outputs are cut to a line that names the step to `recall_step`, and when the prompt
still exceeds its token budget (`PromptBudget`: the model's context less the turn's new
tokens, counted by the policy's own tokenizer) older observations are compacted further by
one fixed rule (`fit`): a step at a time, oldest first, to one line each, then left out, every
call kept. The rule reads only the history and the budget, so a demonstration recorded under a
model's budget is the prompt that model is shown at that turn. What was cut is one read-only
tool call away, never stuffed into every prompt.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass

from agents.policies.protocol import PromptBudget, ToolCall

RECALL_TOOL = "recall_step"
SCENE_PREFIX = "Scene: "
# What an object's row leaves out (the defaults), said once before the rows.
SCENE_DEFAULTS = "(unlisted: type mesh, source blender, rotation 0) "
RECALL_SPEC = {
    "type": "function",
    "function": {
        "name": RECALL_TOOL,
        "description": (
            "Show the full output of the tool calls of an earlier step (read-only). "
            "Older outputs are shortened in the conversation; use this to read one again."
        ),
        "parameters": {
            "type": "object",
            "properties": {"index": {"type": "integer", "minimum": 0, "description": "step index"}},
            "required": ["index"],
            "additionalProperties": False,
        },
    },
}


@dataclass
class ContextConfig:
    keep_images: int = 2  # images of the last K observations stay in the prompt
    keep_scenes: int = 1  # scene JSON of the last K observations stays (older ones are stale)
    keep_full_outputs: int = 4  # tool outputs of the last N calls stay whole
    compact_chars: int = 160  # older outputs keep this many characters
    max_output_chars: int = 4000  # even a recent output is cut here (recall_step has it all)
    # The budget of a policy that cannot count its own tokens (an endpoint): estimated tokens
    # (`estimate_tokens`) before older observations are compacted. A policy that can (the hf
    # policy, `prompt_budget()`) brings its own, exact budget instead.
    token_budget: int = 24_000
    # A cap on every turn's prompt below the model's own budget, in the policy's tokens (or
    # estimated ones): shorter prompts, cheaper turns. None: the model's budget alone.
    max_prompt_tokens: int | None = None
    line_chars: int = 100  # an observation compacted to one line keeps this many characters
    image_tokens: int = 256  # estimate per image (a 256 px montage on Qwen-VL is ~85-330)
    scene_objects: int = 40  # objects listed in the compact scene JSON


def openai_tools(specs: Iterable[dict]) -> list[dict]:
    """Tool specs from `tools.catalogue()` (or a subset) as the OpenAI `tools=[...]` list."""
    from tools.specs import openai_tool

    return [openai_tool(s) for s in specs]


def wire_call(call: ToolCall) -> dict:
    """The assistant's call as sent back to the server. Unparsed arguments go as `{}` (the
    tool message quotes the raw text): servers such as `transformers serve` reject a
    history whose arguments are not JSON."""
    wire = call.to_openai()
    if not call.parsed:
        wire["function"]["arguments"] = "{}"
    return wire


def data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def image_part(png: bytes) -> dict:
    return {"type": "image_url", "image_url": {"url": data_url(png)}}


def compact_scene(scene: dict, limit: int) -> str:
    """The scene as short JSON: what a model needs to reason about placement and size.

    Defaults are left out of each row (`SCENE_DEFAULTS` says which): a mesh from Blender with
    no rotation is the common object, and its three fields cost ~28 tokens of a small model's
    600-token prompt per object."""
    objects = scene.get("objects", [])
    rows = []
    for obj in objects[:limit]:
        row: dict = {"name": obj.get("name")}
        if obj.get("type", "mesh") != "mesh":
            row["type"] = obj.get("type")
        if obj.get("source", "blender") != "blender":
            row["source"] = obj.get("source")
        for key in ("location", "rotation_deg", "dimensions"):
            if key in obj:
                values = [round(float(v), 4) for v in obj[key]]
                if key == "rotation_deg" and not any(values):
                    continue
                row[key] = values
        material = obj.get("material")
        if material:
            row["color"] = material.get("color")
        if obj.get("parent"):
            row["parent"] = obj["parent"]
        rows.append(row)
    out: dict = {"objects": rows}
    total = scene.get("total", len(objects))  # a page of a larger scene says how large
    if total > len(rows):
        out["more_objects"] = total - len(rows)
    changed = scene.get("changed")
    if isinstance(changed, list) and changed:  # what the last change touched, a few names
        out["changed"] = [str(n)[:64] for n in changed[:10]]
    return json.dumps(out, separators=(",", ":"))


def observation(
    text: str, png: bytes | None, scene: dict | None, config: ContextConfig, step: int,
    render_skipped: bool = False,
) -> dict:
    """A user message: words, then the montage, then the compact scene. `render_skipped`: a
    montage would be here but was not rendered (`observe="text"`, for a model whose prompt
    drops images): the message is marked, so its compaction writes the same note as for a
    montage and the model's prompt is the text it would be with renders."""
    parts: list[dict] = [{"type": "text", "text": text}]
    if png is not None:
        parts.append(image_part(png))
    if scene is not None:
        note = SCENE_DEFAULTS if scene.get("objects") else ""
        listing = compact_scene(scene, config.scene_objects)
        parts.append({"type": "text", "text": SCENE_PREFIX + note + listing})
    message = {"role": "user", "content": parts, "_step": step}
    if png is None and render_skipped:
        message["_render_skipped"] = True
    return message


def estimate_tokens(messages: list[dict], tools: list[dict] | None, config: ContextConfig) -> int:
    """A rough count (4 characters a token, a fixed cost per image) for budgeting only."""
    chars = len(json.dumps(tools)) if tools else 0
    images = 0
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                if part.get("type") == "text":
                    chars += len(part["text"])
                else:
                    images += 1
        for tc in m.get("tool_calls") or []:
            chars += len(tc["function"]["name"]) + len(tc["function"]["arguments"])
        chars += 8  # role and separators
        images += bool(m.get("_render_skipped"))  # counted as the montage it stands for
    return chars // 4 + images * config.image_tokens


class ContextOverflow(Exception):
    """Even the shortest form of the conversation (every older observation left out, every
    call kept) is over the budget: the episode cannot go on in this model's context."""

    def __init__(self, tokens: int, limit: int) -> None:
        super().__init__(
            f"context full: the prompt needs {tokens} tokens with every older observation "
            f"left out, over the {limit} the model's context leaves for it"
        )
        self.tokens, self.limit = tokens, limit


def estimated_budget(config: ContextConfig) -> PromptBudget:
    """The budget of a policy that cannot count its tokens: `token_budget`, estimated."""
    return PromptBudget(config.token_budget, lambda m, t: estimate_tokens(m, t, config))


class ContextWindow:
    """Builds bounded prompts from the full conversation."""

    def __init__(self, config: ContextConfig) -> None:
        self.config = config
        self.tokens = 0  # the last view's tokens, as its budget counts them
        self.moves = 0  # compaction moves the last view needed beyond the first form

    def view(
        self, history: list[dict], tools: list[dict] | None = None,
        budget: PromptBudget | None = None,
    ) -> list[dict]:  # fmt: skip
        """The messages to send: a copy of `history` with old images and outputs compacted,
        then fitted to `budget` (default: the estimated `token_budget`; capped at
        `max_prompt_tokens`) by `fit`.
        Raises `ContextOverflow` when even the shortest form is over it."""
        cfg = self.config
        budget = budget or estimated_budget(cfg)
        if cfg.max_prompt_tokens is not None and cfg.max_prompt_tokens < budget.limit:
            budget = PromptBudget(cfg.max_prompt_tokens, budget.count)
        fitted = fit(self.compacted(history), tools, budget, cfg.line_chars)
        self.tokens, self.moves = fitted.tokens, fitted.moves
        return fitted.messages

    def compacted(self, history: list[dict]) -> list[dict]:
        """A copy of `history` with the usual compaction (old images, scene listings and
        outputs), its private marks kept for `fit`."""
        cfg = self.config
        messages = [copy.copy(m) for m in history]
        self._drop_old_images(messages, cfg.keep_images)
        self._drop_old_scenes(messages, cfg.keep_scenes)
        self._compact_outputs(messages, cfg.keep_full_outputs)
        return messages

    def _drop_old_images(self, messages: list[dict], keep: int) -> None:
        seen = 0
        for m in reversed(messages):
            content = m.get("content")
            skipped = bool(m.get("_render_skipped")) and isinstance(content, list)
            if not skipped and (not isinstance(content, list) or not any(
                p.get("type") == "image_url" for p in content
            )):
                continue
            seen += 1
            if seen > keep:
                step = m.get("_step", -1)
                label = "the start" if step == -1 else f"step {step}"
                note = {"type": "text", "text": f"[render of {label} omitted]"}
                if skipped:  # where the montage would be: after the words
                    m["content"] = [*content[:1], note, *content[1:]]
                    m["_render_skipped"] = False
                    continue
                m["content"] = [p if p.get("type") != "image_url" else note for p in content]

    def _drop_old_scenes(self, messages: list[dict], keep: int) -> None:
        seen = 0
        for m in reversed(messages):
            content = m.get("content")
            if not isinstance(content, list):
                continue
            if not any(
                p.get("type") == "text" and p["text"].startswith(SCENE_PREFIX) for p in content
            ):
                continue
            seen += 1
            if seen > keep:
                m["content"] = [
                    p
                    if not (p.get("type") == "text" and p["text"].startswith(SCENE_PREFIX))
                    else {"type": "text", "text": "[scene listing omitted: a newer one follows]"}
                    for p in content
                ]

    def _compact_outputs(self, messages: list[dict], keep: int) -> None:
        cfg = self.config
        seen = 0
        for m in reversed(messages):
            if m.get("role") != "tool":
                continue
            seen += 1
            text = m["content"]
            limit = cfg.max_output_chars if seen <= keep else cfg.compact_chars
            if len(text) > limit:
                step = m.get("_step", "?")
                m["content"] = (
                    text[:limit]
                    + f' ... [shortened; {RECALL_TOOL} {{"index": {step}}} shows it all]'
                )


# -- the budget rule ---------------------------------------------------------------------------


@dataclass
class Fitted:
    """A prompt `fit` made: its messages, their count under the budget, and how many of the
    rule's moves it took (0: none beyond the usual compaction)."""

    messages: list[dict]
    tokens: int
    moves: int


def fit(messages: list[dict], tools: list[dict] | None, budget: PromptBudget,
        line_chars: int = 100) -> Fitted:  # fmt: skip
    """`messages` (with their `_step` marks) compacted until `budget.count` fits its limit,
    private keys stripped. The rule, a pure function of the messages and the budget:

    the system prompt, the goal's observation and every call (each assistant turn's tool
    calls, each with its tool message) always stay. Compaction moves, in this order, one
    step at a time, oldest first, never the newest step before the last move:
      1. each older step to one line: its tool outputs and observation (the step's words,
         without the scene listing) cut to their first line, `line_chars` long at most;
      2. each older step left out: its tool outputs become `[ok]`/`[error]` marks and its
         observation goes;
      3. the newest step to one line.
    The prompt is the shortest prefix of these moves that fits (found by bisection: every
    move only shortens the prompt). When even all of them do not fit, `ContextOverflow`."""
    first = _strip(messages)
    tokens = budget.count(first, tools)
    if tokens <= budget.limit:
        return Fitted(first, tokens, 0)
    steps = sorted({m["_step"] for m in messages if m.get("_step", -1) >= 0})
    older, newest = steps[:-1], steps[-1:]
    moves = [("line", s) for s in older] + [("drop", s) for s in older] + [
        ("line", s) for s in newest]  # fmt: skip

    def form(k: int) -> list[dict]:
        return _strip(_apply(messages, moves[:k], line_chars))

    shortest = form(len(moves))
    tokens = budget.count(shortest, tools)
    if tokens > budget.limit:
        raise ContextOverflow(tokens, budget.limit)
    lo, hi = 0, len(moves)  # form(lo) is over the limit, form(hi) fits
    best = Fitted(shortest, tokens, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        candidate = form(mid)
        n = budget.count(candidate, tools)
        if n <= budget.limit:
            hi, best = mid, Fitted(candidate, n, mid)
        else:
            lo = mid
    return best


def _strip(messages: list[dict]) -> list[dict]:
    return [{k: v for k, v in m.items() if not k.startswith("_")} for m in messages]


def _apply(messages: list[dict], moves: list[tuple[str, int]], line_chars: int) -> list[dict]:
    """`messages` after `moves`: ("line", step) and ("drop", step), the later move winning."""
    how = dict((step, kind) for kind, step in moves)
    out = []
    for m in messages:
        kind = how.get(m.get("_step", -1))
        if kind is None:
            out.append(m)
            continue
        role = m.get("role")
        if role == "tool":
            text = _one_line(str(m.get("content") or ""), line_chars)
            if kind == "drop":
                mark = "[error]" if m.get("_ok") is False else "[ok]"
                text = mark if len(mark) < len(text) else text
            out.append({**m, "content": text})
        elif role == "assistant":  # the calls stay as written; any words with them shrink
            words = _words(m.get("content"))
            if words:
                out.append({**m, "content": None if kind == "drop" else _one_line(words,
                                                                                   line_chars)})
            else:
                out.append(m)
        elif kind == "line":  # the step's observation (or a note on an unusable reply)
            out.append({**m, "content": _one_line(_words(m.get("content")), line_chars)})
    return out


def _words(content: object) -> str:
    """A message's first text part (an observation's words, before its listing)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        for part in content:
            if part.get("type") == "text":
                return part.get("text") or ""
    return ""


def _one_line(text: str, chars: int) -> str:
    """`text`'s first line, at most `chars` long, marked when cut; never longer than `text`."""
    line = text.split("\n", 1)[0]
    cut = line[:chars] + " ..." if len(line) > chars else line
    if cut != text and cut == line:
        cut += " ..."
    return cut if len(cut) < len(text) else text
