"""An episode as a TRL conversational example (what SFT consumes and what the agent saw).

    messages: system; user (prompt text, then an image part for the initial frame);
              per turn one assistant message (`content` null when it only calls tools,
              `tool_calls` [{type: function, function: {name, arguments: JSON string}}]),
              then one `tool` message per call (result text, then an image part when the
              step has a frame); a final assistant message when the policy said something
              when it stopped.
    images:   the PNGs in the order of their {"type": "image"} placeholders.

Every message has the same keys and every content part the same keys (`type`, `text`), so
the Parquet columns have one type each. TRL's stock vision collator fills placeholders only
outside `tool` turns; `inline_images` moves tool-turn images into their parts so the
stock collator and processor accept the row unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agents.store.models import Episode, Step


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


IMAGE_PART: dict[str, Any] = {"type": "image", "text": None}


def message(role: str, content: list[dict] | None, tool_calls: list[dict] | None = None) -> dict:
    return {"role": role, "content": content, "tool_calls": tool_calls}


def openai_tools(specs: list[dict] | None) -> list[dict]:
    """Tool specs (our catalogue entries or already OpenAI-shaped) as OpenAI `tools`."""
    out = []
    for spec in specs or []:
        if spec.get("type") == "function" and "function" in spec:
            out.append(spec)
            continue
        out.append(
            {
                "type": "function",
                "function": {
                    "name": spec["name"],
                    "description": spec.get("description", ""),
                    "parameters": spec.get("parameters", {"type": "object", "properties": {}}),
                },
            }
        )
    return out


def step_text(step: Step) -> str:
    """What the model was shown for a step: the recorded text, else the error, else the output."""
    if step.result_text is not None:
        return step.result_text
    if step.error_kind is not None:
        return f"ERROR ({step.error_kind}): {step.error_message or ''}".rstrip()  # as to_text()
    if step.result is not None:
        return json.dumps(step.result, ensure_ascii=False, separators=(",", ":"))
    return "ok"


def episode_conversation(
    episode: Episode,
    steps: list[Step],
    frame: Callable[[str, str | None], bytes],
) -> tuple[list[dict], list[bytes]]:
    """(messages, images) for one episode; `frame(relpath, sha)` reads a verified frame."""
    messages: list[dict] = []
    images: list[bytes] = []
    if episode.system:
        messages.append(message("system", [text_part(episode.system)]))
    user = [text_part(episode.prompt or "")]
    if episode.initial_frame:
        user.append(dict(IMAGE_PART))
        images.append(frame(episode.initial_frame, episode.initial_frame_sha256))
    messages.append(message("user", user))
    i = 0
    while i < len(steps):
        turn = [steps[i]]
        while i + len(turn) < len(steps) and steps[i + len(turn)].turn == steps[i].turn:
            turn.append(steps[i + len(turn)])
        said = next((s.model_message for s in turn if s.model_message), None)
        calls = [
            {
                "type": "function",
                "function": {"name": s.tool, "arguments": json.dumps(s.args, ensure_ascii=False)},
            }
            for s in turn
        ]
        messages.append(message("assistant", [text_part(said)] if said else None, calls))
        for s in turn:
            content = [text_part(step_text(s))]
            if s.frame:
                content.append(dict(IMAGE_PART))
                images.append(frame(s.frame, s.frame_sha256))
            messages.append(message("tool", content))
        i += len(turn)
    if episode.final_message:
        messages.append(message("assistant", [text_part(episode.final_message)]))
    return messages, images


ALL_ROLES = ("system", "user", "assistant", "tool")


def inline_images(
    messages: list[dict], images: list[Any], roles: tuple[str, ...] = ("tool",)
) -> tuple[list[dict], list[Any]]:
    """Put the images of the turns of `roles` into their parts (`{"type": "image", "image":
    img}`), drop null keys, and return the images left for the other placeholders, in order.
    With the default (`tool` turns) a loaded row is ready for TRL's stock
    `DataCollatorForVisionLanguageModeling`, which fills placeholders only outside tool turns;
    with ALL_ROLES it is ready for `processor.apply_chat_template(messages, tools=...)`."""
    left: list[Any] = []
    out: list[dict] = []
    k = 0
    for m in messages:
        content = m.get("content")
        if not content:
            out.append(m)
            continue
        parts = []
        for part in content:
            if part.get("type") == "image" and "image" not in part:
                img = images[k]
                k += 1
                if m["role"] in roles:
                    parts.append({"type": "image", "image": img})
                    continue
                left.append(img)
            parts.append({key: v for key, v in part.items() if v is not None})
        out.append({**{key: v for key, v in m.items() if v is not None}, "content": parts})
    if k != len(images):
        raise ValueError(f"{len(images)} images for {k} placeholders")
    return out, left
