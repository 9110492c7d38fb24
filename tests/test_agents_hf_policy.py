"""The `hf` policy on the tiny local model: images from data URLs, chat template, `<tool_call>` parsing."""

from __future__ import annotations

import base64
import io
import math

import pytest
from PIL import Image

from agents.policies import make_policy
from agents.policies.hf_policy import HFPolicy, completion_logprobs, to_template_messages
from agents.policies.protocol import PolicyError

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add_primitive",
            "description": "Add a primitive object to the scene.",
            "parameters": {
                "type": "object",
                "properties": {"kind": {"type": "string"}, "name": {"type": "string"}},
                "required": ["kind"],
            },
        },
    }
]
TAUGHT = '<tool_call>\n{"name": "add_primitive", "arguments": {"kind": "cube", "name": "A"}}\n</tool_call>'


def _data_url(colour) -> str:
    buf = io.BytesIO()
    Image.new("RGB", (96, 64), colour).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _messages():
    return [
        {"role": "system", "content": "You build 3D models with tools."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Add a cube named A."},
                {"type": "image_url", "image_url": {"url": _data_url((200, 20, 20))}},
            ],
        },
    ]


def _teach(policy: HFPolicy, completion: str, steps: int = 300) -> None:
    """Overfit the tiny model on one reply so that it really emits a tool call. (At 150 steps
    `<tool_call>` and `</tool_call>` were still tied to 0.005 as the first token, and a fresh
    install's library versions flipped them; at 300 the first is ahead by 7.)"""
    import torch

    from agents.policies.hf_policy import encode_prompt

    model, tok = policy.model, policy.processor.tokenizer
    prompt = encode_prompt(policy.processor, _messages(), TOOLS)
    target = tok(completion + tok.eos_token, add_special_tokens=False, return_tensors="pt")[
        "input_ids"
    ]
    batch = dict(prompt)
    batch["input_ids"] = torch.cat([prompt["input_ids"], target], dim=1)
    batch["attention_mask"] = torch.ones_like(batch["input_ids"])
    batch["mm_token_type_ids"] = torch.cat(
        [prompt["mm_token_type_ids"], torch.zeros_like(target)], 1
    )
    labels = batch["input_ids"].clone()
    labels[:, : prompt["input_ids"].shape[1]] = -100
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(steps):
        opt.zero_grad()
        model(**batch, labels=labels).loss.backward()
        opt.step()
    model.eval()


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture()
def policy(tiny_model_dir):
    return make_policy("hf", model=str(tiny_model_dir), max_tokens=48, device="cpu")


def test_images_from_data_urls_reach_the_processor():
    template_messages, images = to_template_messages(_messages())
    assert [im.size for im in images] == [(96, 64)]
    assert template_messages[1]["content"][1] == {"type": "image"}


def test_untrained_model_replies_and_counts_tokens(policy):
    reply = policy.act(_messages(), TOOLS)
    assert reply.tokens_in > 100  # tools block + one image's vision tokens
    assert 0 < reply.tokens_out <= 48
    assert reply.latency_ms > 0
    assert policy.name.startswith("hf:")


def test_taught_model_emits_a_parsed_tool_call_and_logprobs_agree(policy):
    _teach(policy, TAUGHT)
    reply = policy.act(_messages(), TOOLS)
    assert reply.raw["completion"].startswith("<tool_call>"), reply.raw["completion"]
    assert reply.raw["completion"] == TAUGHT, reply.raw["completion"]
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("add_primitive", {"kind": "cube", "name": "A"})
    ]
    ids, logprobs = policy.completion_logprobs(_messages(), TOOLS, TAUGHT)
    assert len(ids) == len(logprobs) and all(lp <= 0 for lp in logprobs)
    other_ids, other = completion_logprobs(
        policy.model, policy.processor, _messages(), TOOLS, "I am done."
    )
    # The taught reply is near-certain; an untaught one is not.
    assert math.exp(sum(logprobs) / len(logprobs)) > 0.9
    assert sum(other) / len(other) < sum(logprobs) / len(logprobs)


def test_missing_model_folder_says_how_to_build_one(tmp_path):
    with pytest.raises(PolicyError, match="modelwright models list"):
        make_policy("hf", model=str(tmp_path / "nowhere"))


def test_non_data_url_image_is_a_recoverable_error(policy):
    messages = _messages()
    messages[1]["content"][1]["image_url"]["url"] = "http://example.com/x.png"
    with pytest.raises(PolicyError) as err:
        policy.act(messages, TOOLS)
    assert err.value.fatal is False


def test_a_model_that_favours_the_image_placeholder_never_samples_it(policy):
    """A sampled `<|image_pad|>` would leave the row with more image tokens than pixels, and
    GRPO's training forward of that row would fail (it did, in a resumed run)."""
    import torch

    from agents.policies.hf_policy import vision_placeholder_ids

    placeholders = vision_placeholder_ids(policy.model)
    image = policy.model.config.image_token_id
    assert image in placeholders
    head = policy.model.get_output_embeddings()
    with torch.no_grad():  # make the placeholder the near-certain next token everywhere
        head.weight[image] = head.weight[image] + 50.0 * head.weight.abs().max()
        if getattr(head, "bias", None) is not None:
            head.bias[image] += 100.0
    policy.config.temperature, policy.config.seed = 1.0, 0
    reply = policy.act(_messages(), TOOLS)
    ids = reply.tokens.completion_ids
    assert ids and not set(ids) & set(placeholders), ids
