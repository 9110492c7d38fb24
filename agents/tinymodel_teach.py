"""Teach a tiny model to say given replies: scripted model behaviour for tests and demos.

A random tiny model emits noise and never a tool call, which exercises little of the loop.
`teach_replies` over-fits a copy of a tiny model (see `agents.tinymodel`) so that for each
given conversation it answers with the given text (a valid call, a hallucinated tool,
malformed JSON, a call in a code fence...). The prompts are built exactly as
`transformers serve` builds them from OpenAI messages, so the served model answers the
same; images are varied during teaching so the replies do not hinge on the pixels.
A few hundred optimiser steps on CPU take a few seconds. torch is imported lazily.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Lesson:
    messages: list[dict]  # OpenAI chat messages, as the loop sends them
    tools: list[dict] | None
    reply: str  # the exact text the model should produce (without the end token)


def teach_replies(
    model_dir: str | Path,
    out_dir: str | Path,
    lessons: list[Lesson],
    *,
    steps: int = 240,
    lr: float = 1e-2,
    seed: int = 0,
) -> Path:
    """Write to `out_dir` a copy of the model at `model_dir` that answers each lesson's
    messages with its reply; returns `out_dir`."""
    import io
    import random

    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor
    from transformers.cli.serving.utils import BaseHandler, Modality

    model_dir, out_dir = Path(model_dir), Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    shutil.copytree(model_dir, out_dir)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    processor = AutoProcessor.from_pretrained(model_dir)
    model = AutoModelForImageTextToText.from_pretrained(model_dir)
    tokenizer = processor.tokenizer
    end = "<|im_end|>"

    def png(color: tuple[int, int, int]) -> str:
        from agents.context import data_url

        buf = io.BytesIO()
        Image.new("RGB", (96, 96), color).save(buf, "PNG")
        return data_url(buf.getvalue())

    def with_image(messages: list[dict], url: str) -> list[dict]:
        out = []
        for m in messages:
            content = m.get("content")
            if isinstance(content, list):
                content = [
                    {"type": "image_url", "image_url": {"url": url}}
                    if p.get("type") == "image_url"
                    else p
                    for p in content
                ]
            out.append({**m, "content": content})
        return out

    examples = []
    for lesson in lessons:
        target = tokenizer(lesson.reply + end, add_special_tokens=False, return_tensors="pt")
        for _ in range(3):
            color = (rng.randrange(256), rng.randrange(256), rng.randrange(256))
            inputs = BaseHandler.get_processor_inputs_from_messages(
                with_image(lesson.messages, png(color)), Modality.VLM
            )
            enc = processor.apply_chat_template(
                inputs,
                add_generation_prompt=True,
                tools=lesson.tools,
                return_tensors="pt",
                return_dict=True,
                tokenize=True,
            )
            n = enc["input_ids"].shape[1]
            ids = torch.cat([enc["input_ids"], target.input_ids], 1)
            labels = ids.clone()
            labels[:, :n] = -100
            batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
            if "pixel_values" in enc:
                batch["pixel_values"] = enc["pixel_values"]
                batch["image_grid_thw"] = enc["image_grid_thw"]
            if "mm_token_type_ids" in enc:
                pad = torch.zeros_like(target.input_ids)
                batch["mm_token_type_ids"] = torch.cat([enc["mm_token_type_ids"], pad], 1)
            examples.append(batch)

    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for step in range(steps):
        loss = model(**examples[step % len(examples)]).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    model.eval()
    model.save_pretrained(out_dir)
    return out_dir
