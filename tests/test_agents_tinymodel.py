"""The tiny local vision-language model: builds offline, loads, generates, renders tools and images."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from PIL import Image

from training.sft.tiny_model import TOOL_TAGS, chat_template, train_tokenizer

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add_primitive",
            "description": "Add a primitive object to the scene.",
            "parameters": {
                "type": "object",
                "properties": {"kind": {"type": "string"}},
                "required": ["kind"],
            },
        },
    }
]


def _conversation(image):
    return [
        {"role": "system", "content": "You build 3D models."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Make a red cube."},
                {"type": "image", "image": image},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "type": "function",
                    "function": {"name": "add_primitive", "arguments": {"kind": "cube"}},
                }
            ],
        },
        {
            "role": "tool",
            "content": [
                {"type": "text", "text": '{"ok": true}'},
                {"type": "image", "image": image},
            ],
        },
    ]


def test_the_dev_script_builds_a_model_that_loads_and_generates(tmp_path):
    script = Path(__file__).resolve().parents[1] / "scripts" / "tiny_model.py"
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "tiny")],
                            capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path / "tiny")
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(tmp_path / "tiny")
    model = AutoModelForImageTextToText.from_pretrained(tmp_path / "tiny")
    assert model.config.model_type == "qwen3_vl"
    assert sum(p.numel() for p in model.parameters()) < 2_000_000
    image = Image.new("RGB", (256, 256), (200, 30, 30))
    inputs = processor.apply_chat_template(
        _conversation(image),
        tools=TOOLS,
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
        return_tensors="pt",
    )
    # Two images, each downscaled to 128x128: 8x8 patches merged 2x2 -> 16 tokens each.
    image_id = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert int((inputs["input_ids"] == image_id).sum()) == 32
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=8, do_sample=False)
    assert (
        out.shape[1] == inputs["input_ids"].shape[1] + 8 or out[0, -1] == model.config.eos_token_id
    )


def test_chat_template_renders_tools_calls_and_image_tool_results():
    from transformers import AutoProcessor  # noqa: F401  (the processor class registry)

    from training.sft.tiny_model import build_processor

    processor = build_processor(train_tokenizer(0))
    text = processor.apply_chat_template(
        _conversation(Image.new("RGB", (64, 64))),
        tools=TOOLS,
        tokenize=False,
        add_generation_prompt=True,
    )
    assert "<tools>\n" + json.dumps(TOOLS[0]) + "\n</tools>" in text
    assert (
        '<tool_call>\n{"name": "add_primitive", "arguments": {"kind": "cube"}}\n</tool_call><|im_end|>'
        in text
    )
    assert (
        '<tool_response>\n{"ok": true}<|vision_start|><|image_pad|><|vision_end|>\n</tool_response>'
        in text
    )
    assert text.count("<|image_pad|>") == 2
    assert text.endswith("<|im_start|>assistant\n")


def test_template_is_the_one_trl_recognises_for_masking_and_tool_parsing():
    from trl.chat_template_utils import add_response_schema, get_training_chat_template

    processor_like = train_tokenizer(0)
    assert "{% generation %}" in get_training_chat_template(processor_like).replace(
        "{%- generation -%}", "{% generation %}"
    )
    add_response_schema(processor_like)
    parsed = processor_like.parse_response(
        '<tool_call>\n{"name": "add_primitive", "arguments": {"kind": "cube"}}\n</tool_call><|im_end|>',
        prefix="",
    )
    assert parsed["tool_calls"][0]["function"]["name"] == "add_primitive"
    assert chat_template() == processor_like.chat_template


def test_tokenizer_keeps_tool_tags_whole_and_visible():
    tokenizer = train_tokenizer(0)
    for tag in TOOL_TAGS:
        assert tokenizer.tokenize(tag) == [tag]
    ids = tokenizer("<tool_call>x</tool_call><|im_end|>")["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "<tool_call>x</tool_call>"
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    assert train_tokenizer(0).get_vocab() == tokenizer.get_vocab()  # reproducible


def test_the_corpus_names_every_tool_of_the_registry():
    from tools import tool_names
    from training.sft.tiny_model import synthetic_corpus

    corpus = "\n".join(synthetic_corpus(0))
    assert [name for name in tool_names() if f'"{name}"' not in corpus] == []
