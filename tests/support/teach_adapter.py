"""Teach a LoRA adapter to say given replies: a real PEFT adapter with scripted behaviour, for
tests of what loads, ships and runs adapters (no trained adapter from a hub, nothing downloaded).

`capture_turns` runs the one episode loop with a scripted policy and keeps what the `hf` policy
would be shown at each turn (the messages, the tools it filters to); `teach_adapter` puts a
LoRA adapter on the last decoder layer of a model and trains it until greedy decoding of each
lesson's prompt, rendered exactly as the `hf` policy renders it (`encode_prompt`), gives the
lesson's reply token for token. Cheap for the same reason as tests/support/tiny_teach.py: the
frozen layers before the last run once per lesson, and the loss is on the reply's positions.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Lesson:
    messages: list[dict]
    tools: list[dict]  # as the policy shows them (already filtered)
    reply: str  # the exact text, without the end-of-turn token


class TeachingError(RuntimeError):
    pass


class ScriptedCapture:
    """A policy that answers with `replies` in order and keeps each turn's prompt as a Lesson
    (tools filtered to `shown`, as the hf policy filters them)."""

    def __init__(self, replies: list[str], shown: list[str] | None) -> None:
        self.replies, self.shown, self.lessons = list(replies), shown, []
        self.name = "scripted-capture"
        self._lock = threading.Lock()

    def reset(self, task_info: dict | None = None) -> None:
        pass

    def act(self, messages: list[dict], tools: list[dict]):
        from agents.policies.hf_policy import shown_tools
        from agents.policies.protocol import PolicyReply
        from agents.policies.toolcall_parser import parse_tool_calls

        with self._lock:
            reply = self.replies[len(self.lessons)]
            shown = shown_tools(tools, self.shown)
            self.lessons.append(Lesson(json.loads(json.dumps(messages, default=str)), shown,
                                       reply))
        parsed = parse_tool_calls(reply, known_tools=[t["function"]["name"] for t in shown])
        return PolicyReply(text=parsed.text if parsed.calls else reply,
                           tool_calls=parsed.calls)


def capture_turns(session, goal: str, replies: list[str], shown: list[str] | None,
                  max_steps: int = 20) -> list[Lesson]:
    """The prompts of an episode on `session` (its scene as it is: the studio's "continue from
    here") whose turns are `replies`."""
    from agents import EpisodeLoop, LoopConfig, StartState

    policy = ScriptedCapture(replies, shown)
    EpisodeLoop(policy, session, goal, setup=StartState((), keep=True),
                config=LoopConfig(max_steps=max_steps)).run()
    return policy.lessons


def _decoder(model: Any) -> tuple[Any, Any]:
    """(decoder layers, final norm) of a causal LM or a vision-language model."""
    inner = model.model
    text = getattr(inner, "language_model", inner)
    return text.layers, text.norm


def teach_adapter(model_dir: str | Path, out_dir: str | Path, lessons: list[Lesson], *,
                  steps: int = 400, lr: float = 3e-3, rank: int = 16, seed: int = 0,
                  margin: float = 1.0, verbose: bool = False) -> Path:
    """Write to `out_dir` a LoRA adapter (PEFT, safetensors) over the model at `model_dir` that
    answers each lesson with its reply; TeachingError if a reply token is not yet the model's
    first choice after `steps` steps. Training stops once every reply token leads the next
    choice by `margin` logits (a tiny random model's logits stay nearly flat: its loss never
    gets small, but greedy decoding needs only the lead)."""
    import torch
    from peft import LoraConfig, get_peft_model

    from agents.policies.chat_format import tokenizer_of
    from agents.policies.hf_policy import encode_prompt, load_pretrained

    torch.manual_seed(seed)
    processor, model = load_pretrained(str(model_dir), local_files_only=True)
    tokenizer = tokenizer_of(processor)
    layers, norm = _decoder(model)
    last = len(layers) - 1
    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, task_type="CAUSAL_LM",
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                        "up_proj", "down_proj"],
                        layers_to_transform=[last])
    peft_model = get_peft_model(model, config)
    peft_model.eval()
    base = peft_model.base_model.model
    layers, norm = _decoder(base)
    captured: list = []
    hook = layers[last].register_forward_pre_hook(
        lambda module, args, kwargs: captured.append((args, kwargs)), with_kwargs=True)
    examples = []
    try:
        for lesson in lessons:
            enc = encode_prompt(processor, lesson.messages, lesson.tools)
            target = tokenizer(lesson.reply + tokenizer.eos_token,
                               add_special_tokens=False)["input_ids"]
            n = enc["input_ids"].shape[1]
            ids = torch.cat([enc["input_ids"], torch.tensor([target])], 1)
            batch = {k: v for k, v in enc.items() if k not in ("input_ids", "attention_mask")}
            batch.update(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
            if "mm_token_type_ids" in enc:
                pad = torch.zeros((1, len(target)), dtype=enc["mm_token_type_ids"].dtype)
                batch["mm_token_type_ids"] = torch.cat([enc["mm_token_type_ids"], pad], 1)
            captured.clear()
            with torch.no_grad():
                peft_model(**batch)
            args, kwargs = captured[-1]
            args = tuple(a.detach() if torch.is_tensor(a) else a for a in args)
            examples.append((args, kwargs, slice(n - 1, n - 1 + len(target)),
                             torch.tensor(target)))
    finally:
        hook.remove()
    y = torch.cat([t for *_, t in examples])
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optimiser = torch.optim.Adam(params, lr=lr)

    def logits() -> Any:
        outs = []
        for args, kwargs, span, _ in examples:
            h = layers[last](*args, **kwargs)
            h = h[0] if isinstance(h, tuple) else h
            outs.append(base.lm_head(norm(h[0, span])))
        return torch.cat(outs)

    for step in range(steps):
        out = logits()
        loss = torch.nn.functional.cross_entropy(out, y)
        if _margin(torch, out.detach(), y) >= margin:  # each reply token first, by a margin
            break
        if verbose and step % 20 == 0:
            print(step, float(loss.detach()), int((out.argmax(-1) != y).sum()),
                  _margin(torch, out.detach(), y), flush=True)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        wrong = int((logits().argmax(-1) != y).sum())
    if wrong:
        raise TeachingError(f"{wrong} of {len(y)} reply tokens are still not the first choice")
    out_dir = Path(out_dir)
    peft_model.save_pretrained(str(out_dir))
    return out_dir


def _margin(torch, logits, y) -> float:
    """The smallest lead of each target token's logit over the best other token's."""
    target = logits.gather(1, y[:, None])[:, 0]
    others = logits.scatter(1, y[:, None], float("-inf")).max(-1).values
    return float((target - others).min())
