"""An eval renders nothing for a text model (`observe="auto"`, `modelwright eval`'s default),
and that changes nothing the model reads: its prompts are token for token those it gets with a
render after every change, and the verdicts are the same.

The policy is the oracle's calls (they change the scene, so renders happen) reading each turn
as the packaged text model does: its prompt encoded by the hf policy's own `encode_prompt` with
SmolLM2's tokenizer. A policy that takes images still gets its renders under "auto"."""

from __future__ import annotations

from typing import Any

from agents import LoopConfig
from agents.policies.hf_policy import encode_prompt, takes_images
from tools import ToolSession
from training.eval.harness import evaluate, task_spec, without_timing
from training.eval.policies import make_policy

TASKS = ["primitive_placement:2:110001", "scene_editing:1:110000"]


class Reading:
    """The oracle's calls; each turn's messages kept, and the prompt a text model would get."""

    def __init__(self, tokenizer: Any, sees_images: bool, seen: list) -> None:
        self.inner = make_policy("oracle")
        self.name = self.inner.name
        self.sees_images = sees_images
        self.tokenizer, self.seen = tokenizer, seen

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def act(self, messages: list[dict], tools: list[dict]) -> Any:
        images = sum(1 for m in messages if isinstance(m.get("content"), list)
                     for p in m["content"] if p.get("type") in ("image_url", "image"))
        ids = encode_prompt(self.tokenizer, messages, tools)["input_ids"][0].tolist()
        self.seen.append((images, ids))
        return self.inner.act(messages, tools)


def _run(worker_pool, tokenizer, observe: str, sees_images: bool) -> tuple[dict, list]:
    seen: list = []
    report = evaluate([task_spec(t) for t in TASKS], lambda: Reading(tokenizer, sees_images, seen),
                      config=LoopConfig(observe=observe),
                      session_factory=lambda: ToolSession(worker_pool))  # fmt: skip
    return report, seen


def test_a_text_model_gets_the_same_prompts_without_renders(worker_pool, base_data_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base_data_dir / "models" / "smollm2-135m-instruct")
    assert not takes_images(tokenizer)
    rendered, with_frames = _run(worker_pool, tokenizer, "changed", sees_images=False)
    auto, without = _run(worker_pool, tokenizer, "auto", sees_images=False)
    assert sum(images for images, _ in with_frames) >= len(TASKS)  # "changed" did render
    assert sum(images for images, _ in without) == 0  # "auto", for a text model: no render
    assert [ids for _, ids in with_frames] == [ids for _, ids in without]
    assert all(e["success"] for e in auto["episodes"])
    # the same episodes, but for the loop's rough estimate of the prompt, which counts a
    # montage it sent (the model's own count, `prompt_tokens`, is the same)
    def same(report):
        return [{k: v for k, v in e.items() if k != "prompt_tokens_est"}
                for e in without_timing(report)["episodes"]]

    assert same(rendered) == same(auto)
    # a policy that takes images gets them under "auto"
    _, seeing = _run(worker_pool, tokenizer, "auto", sees_images=True)
    assert sum(images for images, _ in seeing) == sum(images for images, _ in with_frames)


def test_only_a_prompt_that_holds_images_asks_for_renders(tiny_model_dir, tiny_text_dir):
    """The tiny vision model's processor puts images in its prompt; so does its tokenizer alone
    (a text model on a template that places images, as the tiny text model is): both render."""
    from transformers import AutoProcessor, AutoTokenizer

    assert takes_images(AutoProcessor.from_pretrained(str(tiny_model_dir)))
    assert takes_images(AutoTokenizer.from_pretrained(str(tiny_text_dir)))
