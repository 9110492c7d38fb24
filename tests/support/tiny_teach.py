"""Teach a tiny model to say given replies: scripted model behaviour for tests and demos.

A random tiny model emits noise and never a tool call, which exercises little of the loop.
`teach_replies` edits a copy of a tiny model (see `training.sft.tiny_model`) so that for each
given conversation it answers, greedily, with the given text (a valid call, a hallucinated
tool, malformed JSON, a call in a code fence...). Prompts are built exactly as
`transformers serve` builds them from OpenAI messages, so the served model answers the same.

Why it is cheap: only the last decoder layer, the final norm and `lm_head` are trained.
Everything before them is frozen, so the last layer's inputs are computed once per lesson
and the loss is taken on the reply's positions only; a few hundred steps on a CPU instead
of back-propagating through the whole model. Greedy decoding then reproduces each reply
token by token, because every position sees exactly the input it was taught on.
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


class TeachingError(RuntimeError):
    pass


def teach_replies(
    model_dir: str | Path,
    out_dir: str | Path,
    lessons: list[Lesson],
    *,
    steps: int = 400,
    lr: float = 1e-2,
    seed: int = 0,
) -> Path:
    """Write to `out_dir` a copy of the model at `model_dir` that answers each lesson's
    messages with its reply; returns `out_dir`. Raises TeachingError if some token of a
    reply is still not the model's first choice after `steps` optimiser steps."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor
    from transformers.cli.serving.utils import BaseHandler, Modality

    model_dir, out_dir = Path(model_dir), Path(out_dir)
    torch.manual_seed(seed)
    processor = AutoProcessor.from_pretrained(model_dir)
    model = AutoModelForImageTextToText.from_pretrained(model_dir)
    model.eval()
    tokenizer = processor.tokenizer
    text_model = model.model.language_model
    last = text_model.layers[-1]

    # the last layer's inputs (hidden states and the rotary/mask arguments) per lesson
    captured: list = []
    hook = last.register_forward_pre_hook(
        lambda module, args, kwargs: captured.append((args, kwargs)), with_kwargs=True
    )
    examples = []
    try:
        for lesson in lessons:
            target = tokenizer(lesson.reply + "<|im_end|>", add_special_tokens=False).input_ids
            inputs = BaseHandler.get_processor_inputs_from_messages(lesson.messages, Modality.VLM)
            enc = processor.apply_chat_template(
                inputs, add_generation_prompt=True, tools=lesson.tools,
                return_tensors="pt", return_dict=True, tokenize=True,
            )  # fmt: skip
            n = enc["input_ids"].shape[1]
            ids = torch.cat([enc["input_ids"], torch.tensor([target])], 1)
            batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "use_cache": False}
            for key in ("pixel_values", "image_grid_thw"):
                if key in enc:
                    batch[key] = enc[key]
            if "mm_token_type_ids" in enc:
                pad = torch.zeros((1, len(target)), dtype=enc["mm_token_type_ids"].dtype)
                batch["mm_token_type_ids"] = torch.cat([enc["mm_token_type_ids"], pad], 1)
            captured.clear()
            with torch.no_grad():
                model(**batch)
            args, kwargs = captured[-1]
            args = tuple(a.detach() if torch.is_tensor(a) else a for a in args)
            # position n-1+i predicts target[i]
            examples.append((args, kwargs, slice(n - 1, n - 1 + len(target)), torch.tensor(target)))
    finally:
        hook.remove()
    y = torch.cat([t for *_, t in examples])

    head = [last, text_model.norm, model.lm_head]
    params = [p for module in head for p in module.parameters()]
    optimiser = torch.optim.Adam(params, lr=lr)

    def logits() -> torch.Tensor:
        outs = []
        for args, kwargs, span, _ in examples:
            h = last(*args, **kwargs)
            h = h[0] if isinstance(h, tuple) else h
            outs.append(model.lm_head(text_model.norm(h[0, span])))
        return torch.cat(outs)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only add contention on a busy machine
    try:
        _fit(torch, logits, y, optimiser, steps)
    finally:
        torch.set_num_threads(threads)
    with torch.no_grad():
        wrong = int((logits().argmax(-1) != y).sum())
    if wrong:
        raise TeachingError(f"{wrong} of {len(y)} reply tokens are still not the first choice")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    shutil.copytree(model_dir, out_dir)
    model.save_pretrained(out_dir)
    return out_dir


def _fit(torch, logits, y, optimiser, steps: int) -> None:
    for _ in range(steps):
        out = logits()
        loss = torch.nn.functional.cross_entropy(out, y)
        if bool((out.argmax(-1) == y).all()) and float(loss.detach()) < 0.05:
            break
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
