"""The Hermes tool format for templates without tools, on the packaged base's real tokenizer:
what inference renders is what SFT trains on, the labels cover exactly the assistant's turns,
and images never reach a text-only model."""

from __future__ import annotations

import json

import pytest

from agents.policies import chat_format

TOOLS = [
    {"type": "function", "function": {
        "name": "add_primitive", "description": "Add a mesh primitive.",
        "parameters": {"type": "object", "required": ["kind", "name"], "properties": {
            "kind": {"type": "string", "enum": ["cube", "cylinder"]},
            "name": {"type": "string", "description": "object name"},
            "location": {"type": "array", "items": {"type": "number"}, "minItems": 3,
                         "maxItems": 3, "default": [0.0, 0.0, 0.0]},
            "scale": {"type": "array", "items": {"type": "number"}}}}}},
    {"type": "function", "function": {
        "name": "delete", "description": "Delete an object.",
        "parameters": {"type": "object", "required": ["name"],
                       "properties": {"name": {"type": "string"}}}}},
]  # fmt: skip
PNG = "data:image/png;base64,iVBORw0KGgo="
CALL = {"id": "c0", "type": "function", "function": {
    "name": "add_primitive", "arguments": json.dumps({"kind": "cube", "name": "Box"})}}  # fmt: skip
CONVERSATION = [
    {"role": "system", "content": "You build 3D models."},
    {"role": "user", "content": [
        {"type": "text", "text": "Goal: add a cube named 'Box'."},
        {"type": "image_url", "image_url": {"url": PNG}},
        {"type": "text", "text": 'Scene: {"objects":[]}'}]},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c0", "content": '{"created":{"name":"Box"}}'},
    {"role": "user", "content": [{"type": "text", "text": "Step 0 done: 1 call(s) ok."}]},
    {"role": "assistant", "content": "Done."},
]  # fmt: skip


@pytest.fixture(scope="module")
def tokenizer(base_data_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(base_data_dir / "models" / "smollm2-135m-instruct")


def test_signatures_are_compact_and_complete():
    line = chat_format.signature(TOOLS[0]["function"])
    assert line == ('add_primitive(kind: "cube"|"cylinder", name: string (object name), '
                    "location: [3 numbers] = [0.0, 0.0, 0.0], scale: [number, ...]?) - "
                    "Add a mesh primitive.")  # fmt: skip


def test_hermes_messages_carry_tools_calls_and_results_as_text():
    out = chat_format.hermes_messages(CONVERSATION, TOOLS, text_only=True)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user", "user", "assistant"]
    assert out[0]["content"].startswith("You build 3D models.\n\n# Tools")
    assert "delete(name: string) - Delete an object." in out[0]["content"]
    assert "data:image" not in json.dumps(out)  # a text-only model is never shown the image
    assert out[1]["content"] == 'Goal: add a cube named \'Box\'.\nScene: {"objects":[]}'
    call = out[2]["content"]
    assert call.startswith("<tool_call>\n") and call.endswith("\n</tool_call>")
    assert json.loads(call.split("\n")[1]) == {"name": "add_primitive",
                                               "arguments": {"kind": "cube", "name": "Box"}}
    assert out[3]["content"].startswith("<tool_response>\n") and "Box" in out[3]["content"]


def test_a_written_call_parses_back_to_the_recorded_one():
    from agents.policies.toolcall_parser import parse_tool_calls

    text = chat_format.hermes_messages(CONVERSATION, TOOLS, text_only=True)[2]["content"]
    parsed = parse_tool_calls(text, known_tools=["add_primitive", "delete"])
    assert [(c.name, c.arguments) for c in parsed.calls] == [
        ("add_primitive", {"kind": "cube", "name": "Box"})]


def test_training_labels_are_exactly_the_assistant_turns(tokenizer):
    enc = chat_format.encode_training(tokenizer, CONVERSATION, TOOLS)
    ids, labels = enc["input_ids"][0].tolist(), enc["labels"][0].tolist()
    trained = tokenizer.decode([t for t, lab in zip(ids, labels, strict=True) if lab != -100])
    call = chat_format.hermes_messages(CONVERSATION, TOOLS, True)[2]["content"]
    assert trained == f"{call}<|im_end|>Done.<|im_end|>"
    # The prompt of the first assistant turn, rendered as inference renders it, is a prefix.
    prompt = chat_format.render(tokenizer, CONVERSATION[:2], TOOLS)
    assert ids[: len(tokenizer(prompt, add_special_tokens=False)["input_ids"])] == tokenizer(
        prompt, add_special_tokens=False)["input_ids"]
    assert prompt.endswith("<|im_start|>assistant\n")


def test_templates_with_tools_keep_their_own_format(tiny_model_dir):
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    assert not chat_format.uses_hermes(processor)
    assert not chat_format.is_text_only(processor)
