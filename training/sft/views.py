"""Abridged views of SFT rows, for a prompt curriculum (`sft.prompt_curriculum`).

A randomly initialised model learns to copy a name from the goal into a call within a few
hundred steps when the goal is nearly all it reads, but not within the pipeline's SFT budget
behind the real first-turn prompt: ~770 tokens of tool schemas before the goal and a scene
JSON after it that lists every object's name (`benchmarks/probe_copy.py --layout`). In that
probe, trained on fresh rows of shorter layouts first, the copy carries over to the full prompt.
On the CPU pipeline's 600 repeated demonstration rows it moved SFT only within noise (README,
"The CPU pipeline, measured"), so the shipped config leaves it off. A pretrained model brings
the skill with it and needs no curriculum.

The views keep every assistant turn (the labels) as it is and only drop prompt parts:
- `no_tools`: the tool schemas (the row's `tools`);
- `no_scene`: also the scene JSON parts (`Scene: {...}`) of user and tool turns;
- `goal_only`: also the system prompt and every image.
"""

from __future__ import annotations

import copy
from typing import Any, get_args

from agents.loop.context import SCENE_PREFIX
from training.train_config import PromptView

VIEWS: tuple[str, ...] = get_args(PromptView)  # what `sft.prompt_curriculum` validates


def abridge(row: dict, view: str) -> dict:
    """A copy of `row` in `view`; the row itself is left as it is."""
    if view not in VIEWS:
        raise ValueError(f"unknown prompt view {view!r}; one of {', '.join(VIEWS)}")
    out = dict(row)
    out["tools"] = None
    if view == "no_tools":
        return out
    drop_images = view == "goal_only"
    messages: list[dict] = []
    for msg in row["messages"]:
        if drop_images and msg.get("role") == "system":
            continue
        msg = copy.copy(msg)
        content = msg.get("content")
        if isinstance(content, list):
            msg["content"] = [p for p in content if not _dropped(p, drop_images)]
        messages.append(msg)
    out["messages"] = messages
    if drop_images:
        out["images"] = []
    return out


def _dropped(part: Any, drop_images: bool) -> bool:
    if not isinstance(part, dict):
        return False
    if part.get("type") == "image":
        return drop_images
    return part.get("type") == "text" and (part.get("text") or "").startswith(SCENE_PREFIX)
