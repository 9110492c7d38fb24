"""Which vLLM flags a model family needs to serve tool calls, and what the profiles trade.

vLLM extracts tool calls from the generated text with a parser chosen by
`--tool-call-parser`; the right one depends on the format the family was trained to emit
(`<tool_call>{json}</tool_call>` for Qwen2.5/Qwen3/Qwen3-VL, bare JSON for Llama 3.x,
`[TOOL_CALLS]` for Mistral, ...). The names below are the ones registered in
`vllm/tool_parsers/__init__.py` and documented in vLLM's `docs/features/tool_calling.md`
(checked against vLLM main, late 2026). A family whose chat template in the Hugging Face
files cannot render tool turns needs `--chat-template`; vLLM ships fixed templates in its
source tree's `examples/` folder (not in the wheel), so we name the file and let the user
pass its path.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

ProfileName = Literal["full", "fast"]


@dataclass(frozen=True)
class ModelFamily:
    """A group of checkpoints that share a tool-call format."""

    name: str
    tool_parser: str
    model_types: tuple[str, ...] = ()  # `model_type` values in config.json
    name_pattern: str = ""  # regex on the model id or folder name (case-insensitive)
    # The name beats config.json: fine-tunes that keep a base's model_type but change the
    # call format (Qwen3-Coder is a qwen3_moe, Hermes-3 a llama).
    name_first: bool = False
    multimodal: bool = False  # takes images by default
    chat_template_hint: str | None = None  # vLLM examples/ file that renders tool turns
    notes: str = ""


# Order matters: the first match wins, so narrower families come before broader ones.
FAMILIES: tuple[ModelFamily, ...] = (
    ModelFamily(
        "qwen3.5",
        "qwen3_coder",
        model_types=("qwen3_5", "qwen3_5_moe"),
        name_pattern=r"qwen3\.[5-9]",
        multimodal=True,
        notes="Qwen3.5/3.6 write XML tool calls (<function=...><parameter=...>).",
    ),
    ModelFamily(
        "qwen3-coder",
        "qwen3_coder",
        name_pattern=r"qwen3-coder",
        name_first=True,
        notes="Qwen3-Coder writes XML tool calls.",
    ),
    ModelFamily(
        "qwen",
        "hermes",
        model_types=(
            "qwen2",
            "qwen2_moe",
            "qwen2_vl",
            "qwen2_5_vl",
            "qwen3",
            "qwen3_moe",
            "qwen3_vl",
            "qwen3_vl_moe",
        ),
        name_pattern=r"qwen(2|2\.5|3)|qwq",
        notes="Qwen2.5, Qwen3 and Qwen2.5-VL/Qwen3-VL emit Hermes-style <tool_call> JSON.",
    ),
    ModelFamily(
        "llama4",
        "llama4_pythonic",
        model_types=("llama4",),
        name_pattern=r"llama-?4",
        multimodal=True,
        chat_template_hint="tool_chat_template_llama4_pythonic.jinja",
    ),
    ModelFamily(
        "llama3.2-vision",
        "llama3_json",
        model_types=("mllama",),
        name_pattern=r"llama-?3\.2-\d+b-vision",
        multimodal=True,
        chat_template_hint="tool_chat_template_llama3.2_json.jinja",
    ),
    ModelFamily(
        "llama3",
        "llama3_json",
        model_types=("llama",),
        name_pattern=r"llama-?3",
        chat_template_hint="tool_chat_template_llama3.1_json.jinja",
        notes="Llama 3.x JSON tool calls; no parallel calls.",
    ),
    ModelFamily(
        "mistral",
        "mistral",
        model_types=("mistral", "mistral3", "pixtral"),
        name_pattern=r"mistral|ministral|magistral|devstral|pixtral",
        notes="Official Mistral checkpoints load with the mistral tokenizer mode by default.",
    ),
    ModelFamily(
        "gemma4",
        "gemma4",
        model_types=("gemma4",),
        name_pattern=r"gemma-?4",
        multimodal=True,
    ),
    ModelFamily(
        "gemma3",
        "pythonic",
        model_types=("gemma3",),
        name_pattern=r"gemma-?3",
        multimodal=True,
        chat_template_hint="tool_chat_template_gemma3_pythonic.jinja",
    ),
    ModelFamily(
        "glm4.5",
        "glm45",
        model_types=("glm4_moe", "glm4v_moe"),
        name_pattern=r"glm-?4\.[56]",
    ),
    ModelFamily(
        "granite4",
        "granite4",
        model_types=("granitemoehybrid",),
        name_pattern=r"granite-4",
    ),
    ModelFamily("hermes", "hermes", name_pattern=r"hermes", name_first=True),
    ModelFamily(
        "phi4-mini",
        "phi4_mini_json",
        name_pattern=r"phi-4-mini",
        chat_template_hint="tool_chat_template_phi4_mini.jinja",
    ),
)

FAMILY_NAMES: tuple[str, ...] = tuple(f.name for f in FAMILIES)

# vLLM's LoRAConfig.max_lora_rank is a Literal of these values; other ranks are rejected.
VLLM_LORA_RANKS: tuple[int, ...] = (1, 8, 16, 32, 64, 128, 256, 320, 512)


class UnknownModelFamily(ValueError):
    """The tool-call format of a model could not be told from its config or name."""


@dataclass(frozen=True)
class ModelInfo:
    """What a local checkpoint's config.json says about serving it."""

    model_type: str | None = None
    has_vision: bool = False
    max_positions: int | None = None


def read_model_info(model: str) -> ModelInfo:
    """Read config.json of a local model folder; an id on a hub gives an empty ModelInfo."""
    config_path = Path(model).expanduser() / "config.json"
    if not config_path.is_file():
        return ModelInfo()
    config = json.loads(config_path.read_text())
    text = config.get("text_config") or {}
    positions = text.get("max_position_embeddings") or config.get("max_position_embeddings")
    return ModelInfo(
        model_type=config.get("model_type"),
        has_vision="vision_config" in config,
        max_positions=int(positions) if positions else None,
    )


def family_by_name(name: str) -> ModelFamily:
    for family in FAMILIES:
        if family.name == name:
            return family
    raise UnknownModelFamily(f"unknown model family {name!r}; known: {', '.join(FAMILY_NAMES)}")


def detect_family(model: str, info: ModelInfo | None = None) -> ModelFamily:
    """The family of `model` (a local folder or a hub id): config.json first, then the name."""
    info = info if info is not None else read_model_info(model)
    label = Path(model).name if Path(model).expanduser().exists() else model

    def named(family: ModelFamily) -> bool:
        return bool(family.name_pattern) and bool(
            re.search(family.name_pattern, label, re.IGNORECASE)
        )

    for family in FAMILIES:
        if family.name_first and named(family):
            return family
    if info.model_type:
        for family in FAMILIES:
            if info.model_type in family.model_types:
                return family
    for family in FAMILIES:
        if named(family):
            return family
    raise UnknownModelFamily(
        f"cannot tell the tool-call format of {model!r} (model_type={info.model_type!r}); "
        f"pass --family ({', '.join(FAMILY_NAMES)}) or --tool-parser NAME"
    )


def lora_rank_slot(rank: int) -> int:
    """The smallest rank vLLM accepts for `--max-lora-rank` that fits an adapter of `rank`."""
    for allowed in VLLM_LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise ValueError(f"LoRA rank {rank} exceeds vLLM's maximum {VLLM_LORA_RANKS[-1]}")


@dataclass(frozen=True)
class ServeProfile:
    """A latency/accuracy trade-off, expressed as vLLM flags.

    `full` keeps the model's numerics and a long context. `fast` adds n-gram speculative
    decoding (drafts proposed from the prompt itself: cheap, no draft model, and tool-call
    JSON repeats the schema's names a lot), an fp8 KV cache (half the cache memory, a small
    accuracy cost) and a shorter context so more sequences fit in a batch.
    """

    name: ProfileName
    max_model_len: int
    kv_cache_dtype: str | None = None
    speculative_config: dict[str, object] | None = None
    extra_args: tuple[str, ...] = field(default_factory=tuple)


PROFILES: dict[str, ServeProfile] = {
    "full": ServeProfile("full", max_model_len=32768),
    "fast": ServeProfile(
        "fast",
        max_model_len=8192,
        kv_cache_dtype="fp8",
        speculative_config={
            "method": "ngram",
            "num_speculative_tokens": 4,
            "prompt_lookup_max": 4,
            "prompt_lookup_min": 2,
        },
    ),
}
