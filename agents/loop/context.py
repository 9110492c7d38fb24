"""What the model sees: observations, tool feedback and a bounded conversation.

The loop keeps the full conversation (every image, every tool output) for the record, and
builds each prompt from it with `ContextWindow.view`: only the last K images stay, older
tool outputs are cut to a line that names the step to `recall_step`, and when the estimated
size still exceeds the token budget whole old steps are folded into one note. What was cut
is one read-only tool call away, never stuffed into every prompt.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass

from agents.policies.protocol import ToolCall

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
    token_budget: int = 24_000  # estimated prompt tokens before old steps are folded
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
    text: str, png: bytes | None, scene: dict | None, config: ContextConfig, step: int
) -> dict:
    """A user message: words, then the montage, then the compact scene."""
    parts: list[dict] = [{"type": "text", "text": text}]
    if png is not None:
        parts.append(image_part(png))
    if scene is not None:
        note = SCENE_DEFAULTS if scene.get("objects") else ""
        listing = compact_scene(scene, config.scene_objects)
        parts.append({"type": "text", "text": SCENE_PREFIX + note + listing})
    return {"role": "user", "content": parts, "_step": step}


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
    return chars // 4 + images * config.image_tokens


class ContextWindow:
    """Builds bounded prompts from the full conversation."""

    def __init__(self, config: ContextConfig) -> None:
        self.config = config

    def view(self, history: list[dict], tools: list[dict] | None = None) -> list[dict]:
        """The messages to send: a copy of `history` with old images and outputs compacted."""
        cfg = self.config
        messages = [copy.copy(m) for m in history]
        self._drop_old_images(messages, cfg.keep_images)
        self._drop_old_scenes(messages, cfg.keep_scenes)
        self._compact_outputs(messages, cfg.keep_full_outputs)
        if estimate_tokens(messages, tools, cfg) > cfg.token_budget:
            self._compact_outputs(messages, 1)
            self._drop_old_images(messages, 1)
            messages = self._fold_old_steps(messages, tools)
        return [{k: v for k, v in m.items() if not k.startswith("_")} for m in messages]

    def _drop_old_images(self, messages: list[dict], keep: int) -> None:
        seen = 0
        for m in reversed(messages):
            content = m.get("content")
            if not isinstance(content, list) or not any(
                p.get("type") == "image_url" for p in content
            ):
                continue
            seen += 1
            if seen > keep:
                step = m.get("_step", -1)
                label = "the start" if step == -1 else f"step {step}"
                m["content"] = [
                    p
                    if p.get("type") != "image_url"
                    else {"type": "text", "text": f"[render of {label} omitted]"}
                    for p in content
                ]

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

    def _fold_old_steps(self, messages: list[dict], tools: list[dict] | None) -> list[dict]:
        """Replace the oldest whole steps by one note until the estimate fits the budget."""
        # the system prompt and the goal's observation (step -1) always stay
        head = [m for m in messages if m.get("_step", -1) == -1]
        body = [m for m in messages if m.get("_step", -1) != -1]
        steps = sorted({m["_step"] for m in body})
        folded: list[int] = []

        def note() -> list[dict]:
            if not folded:
                return []
            text = (
                f"[steps {folded[0]}-{folded[-1]} are folded to save context; "
                f"{RECALL_TOOL} shows any of them]"
            )
            return [{"role": "user", "content": text}]

        budget = self.config.token_budget
        while steps[1:] and estimate_tokens(head + note() + body, tools, self.config) > budget:
            oldest = steps.pop(0)
            folded.append(oldest)
            body = [m for m in body if m.get("_step") != oldest]
        return head + note() + body
