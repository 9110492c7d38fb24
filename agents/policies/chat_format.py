"""One tool-call format for chat templates without tools, and text-only observations.

A model whose chat template knows tools (Qwen-VL, Qwen3) is rendered by its own template. A
template without them (SmolLM2's ChatML, most GGUF models) gets the tools described in the
system message, Hermes-style, and writes its calls as

    <tool_call>
    {"name": "add_primitive", "arguments": {...}}
    </tool_call>

exactly as Qwen-family models do, so demonstrations and rollouts written in this format carry
over to them. Past calls are rendered the same way inside assistant turns, and tool results
come back as `<tool_response>` user turns. Inference, SFT rows and GRPO turns all go through
`render`/`encode_training`, so a model is trained on exactly the text it acts on.

A model without an image processor is text-only: image parts are dropped (the observation's
scene listing, sizes and the last call's result are already text), while the record keeps the
frames for a vision model later.

The tool descriptions are compact signatures, not JSON schemas: four tools' schemas are 528
tokens of SmolLM2's tokenizer, their signatures about a third of that, and a level-1 prompt
must fit in 600 (`benchmarks/bench_prompts.py`).

Light: no torch or transformers at import.
"""

from __future__ import annotations

import json
from typing import Any

TOOL_INSTRUCTIONS = (
    "# Tools\n"
    "To call a tool, write one block per call:\n"
    "<tool_call>\n"
    '{"name": <tool name>, "arguments": <arguments as a JSON object>}\n'
    "</tool_call>\n"
    "Tools (`= value`: the default when left out):\n"
)


def tokenizer_of(processor: Any) -> Any:
    return getattr(processor, "tokenizer", processor)


def is_text_only(processor: Any) -> bool:
    """True when the processor has no image processor: the model cannot see images."""
    return getattr(processor, "image_processor", None) is None


def template_knows_tools(processor: Any) -> bool:
    template = getattr(processor, "chat_template", None) or getattr(
        tokenizer_of(processor), "chat_template", None
    )
    return isinstance(template, str) and "tools" in template


def uses_hermes(processor: Any) -> bool:
    """Tools are written into the system message (the template has no place for them)."""
    return not template_knows_tools(processor)


# --- compact tool signatures -----------------------------------------------------------------


def _type_text(schema: dict) -> str:
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        item = _type_text(schema.get("items") or {})
        n = schema.get("minItems")
        if n is not None and n == schema.get("maxItems"):
            return f"[{n} {item}s]" if n != 1 else f"[1 {item}]"
        return f"[{item}, ...]"
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    return str(kind or "any")


def signature(fn: dict) -> str:
    """`name(arg: type, opt: type = default) - description` for one OpenAI function."""
    params = fn.get("parameters") or {}
    props = params.get("properties") or {}
    required = set(params.get("required") or ())
    args = []
    for key, schema in props.items():
        text = f"{key}: {_type_text(schema)}"
        if schema.get("description") and len(schema["description"]) <= 40:
            text += f" ({schema['description']})"
        if key not in required:
            text += " = " + json.dumps(schema["default"]) if "default" in schema else "?"
        args.append(text)
    description = (fn.get("description") or "").strip()
    return f"{fn['name']}({', '.join(args)})" + (f" - {description}" if description else "")


def tool_block(tools: list[dict] | None) -> str:
    if not tools:
        return ""
    lines = [signature(t.get("function", t)) for t in tools]
    return TOOL_INSTRUCTIONS + "\n".join(lines)


# --- messages in the Hermes format -----------------------------------------------------------


def _text_of(content: Any, text_only: bool) -> Any:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        kind = part.get("type")
        if kind in ("image", "image_url"):
            if not text_only:
                parts.append(part)
            continue
        parts.append({"type": "text", "text": part.get("text") or ""})
    if text_only or all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts if p["text"])
    return parts


def call_text(name: str, arguments: Any) -> str:
    """One call as the model writes it."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass  # kept as written: a recorded malformed call stays malformed
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def hermes_messages(messages: list[dict], tools: list[dict] | None,
                    text_only: bool) -> list[dict]:  # fmt: skip
    """`messages` (OpenAI style or a template's) with tools in the system message, calls as
    `<tool_call>` text and tool results as `<tool_response>` user turns."""
    out: list[dict] = []
    block = tool_block(tools)
    for msg in messages:
        role = msg.get("role")
        content = _text_of(msg.get("content"), text_only)
        if role == "system" and block:
            content = (content + "\n\n" if content else "") + block
            block = ""
        elif role == "assistant":
            calls = [call_text(c.get("function", c)["name"], c.get("function", c).get("arguments"))
                     for c in msg.get("tool_calls") or []]  # fmt: skip
            content = "\n".join(([content] if content else []) + calls)
        elif role == "tool":
            wrapped = f"<tool_response>\n{content}\n</tool_response>"
            prev = out[-1] if out else None
            if prev is not None and prev.get("_tool"):
                prev["content"] += "\n" + wrapped
                continue
            out.append({"role": "user", "content": wrapped, "_tool": True})
            continue
        out.append({"role": role, "content": content})
    if block:  # no system message: the tools open the conversation
        out.insert(0, {"role": "system", "content": block})
    for msg in out:
        msg.pop("_tool", None)
    return out


def render(processor: Any, messages: list[dict], tools: list[dict] | None,
           add_generation_prompt: bool = True) -> str:  # fmt: skip
    """The prompt text in the Hermes format (only for `uses_hermes` processors)."""
    tok = tokenizer_of(processor)
    convo = hermes_messages(messages, tools, is_text_only(processor))
    return tok.apply_chat_template(convo, tokenize=False,
                                   add_generation_prompt=add_generation_prompt)  # fmt: skip


def encode_training(processor: Any, messages: list[dict], tools: list[dict] | None) -> dict:
    """input_ids, attention_mask and labels (assistant turns only, each through its
    end-of-turn token) for a whole conversation in the Hermes format.

    The assistant spans are found by rendering each prefix: the text before an assistant turn
    with the generation prompt, and the text through that turn; this works for any template
    whose renderings of a prefix are prefixes of the whole, which is checked."""
    import torch

    tok = tokenizer_of(processor)
    convo = hermes_messages(messages, tools, is_text_only(processor))

    def text(msgs: list[dict], gen: bool) -> str:
        return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen)

    full = text(convo, False)
    spans = []
    for i, msg in enumerate(convo):
        if msg["role"] != "assistant":
            continue
        before, through = text(convo[:i], True), text(convo[: i + 1], False)
        if not (full.startswith(through) and through.startswith(before)):
            raise ValueError("the chat template renders a conversation's prefix differently "
                             "from the whole; its assistant turns cannot be masked")  # fmt: skip
        end = through.rfind(tok.eos_token)
        end = end + len(tok.eos_token) if end >= len(before) else len(through)
        spans.append((len(before), end))
    enc = tok(full, add_special_tokens=False, return_offsets_mapping=True)
    labels = [
        tid if any(s <= start < e for s, e in spans) else -100
        for tid, (start, _) in zip(enc["input_ids"], enc["offset_mapping"], strict=True)
    ]
    ids = torch.tensor([enc["input_ids"]])
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
            "labels": torch.tensor([labels])}  # fmt: skip
