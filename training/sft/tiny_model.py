"""A tiny random-weight vision-language model, built locally, for tests and GPU-less development.

`build_tiny_model(out_dir)` writes a Qwen3-VL checkpoint of ~0.5 M parameters with a byte-level
BPE tokenizer trained here on a synthetic corpus (tool names, JSON arguments, CadQuery-like code,
modelling prompts), Qwen3-VL's own chat template (it renders `tools`, `tool_calls` and `tool`
turns with image parts, and TRL recognises it for assistant-only masking and tool-call
parsing) and a processor. Everything loads with `AutoProcessor.from_pretrained` and
`AutoModelForImageTextToText.from_pretrained`; nothing is downloaded.

The configuration and recipe come from `VERIFIED.md` (they ran on this CPU). torch,
transformers and tokenizers are imported inside the functions so importing this module is cheap.
"""

from __future__ import annotations

import json
import random
from importlib import resources
from pathlib import Path

# Tokens that Qwen-family templates and processors look up by name. The `<|...|>` ones are
# special; the tool tags are ordinary added tokens (as in real Qwen) so that they survive
# `skip_special_tokens=True` decoding and tool-call parsers still see them.
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
TOOL_TAGS = (
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
)
# Qwen2's pre-tokenizer split, copied so the tokenizer behaves like the real family's.
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

VOCAB_SIZE = 2048
# Images are downscaled to at most this many pixels: 128x128 is 8x8 patches of 16 px, merged
# 2x2 into 16 tokens, which keeps multi-turn episodes with renders short on a CPU.
MAX_IMAGE_PIXELS = 128 * 128
MIN_IMAGE_PIXELS = 32 * 32


def chat_template() -> str:
    """Qwen3-VL's chat template, read verbatim from the installed TRL package.

    It must stay byte-identical: TRL keys its training template (assistant-only loss) and its
    tool-call response parser on an exact match of this text.
    """
    return (resources.files("trl") / "chat_templates" / "qwen3_vl.jinja").read_text("utf-8")


def synthetic_corpus(seed: int = 0, lines: int = 3000) -> list[str]:
    """Text resembling what the model will read and write: prompts, tool calls, results, code."""
    from tools import tool_names

    # every tool of the one registry, so the tokenizer learns their pieces (a fixed list here
    # fell behind the catalogue)
    names = tool_names()
    rng = random.Random(seed)
    shapes = ["cube", "sphere", "cylinder", "cone", "torus", "plane"]
    colours = ["red", "green", "blue", "white", "black", "grey", "orange", "yellow"]
    words = (
        "place put add make build create move rotate scale a an the on top of next to left right "
        "above below table chair shelf snowman plate bracket flange shaft hole fillet chamfer "
        "with of at metres wide tall deep radius diameter height width length thickness bolt "
        "circle pattern object scene render view iso front top material colour metallic rough "
        "error failed invalid argument success done ok result objects name location rotation"
    ).split()
    out: list[str] = []
    for _ in range(lines):
        kind = rng.randrange(6)
        num = lambda: round(rng.uniform(-3, 3), rng.choice([0, 1, 2]))  # noqa: E731
        if kind == 0:
            out.append(
                " ".join(rng.choice(words) for _ in range(rng.randint(5, 16))).capitalize() + "."
            )
        elif kind == 1:
            args = {
                "kind": rng.choice(shapes),
                "name": rng.choice(["A", "B", "Base", "Leg1", "Top", "Part"]),
                "dimensions": [abs(num()) + 0.1 for _ in range(3)],
                "location": [num(), num(), num()],
            }
            call = {"name": rng.choice(names), "arguments": args}
            out.append("<tool_call>\n" + json.dumps(call) + "\n</tool_call>")
        elif kind == 2:
            obj = {
                "name": rng.choice(["A", "B", "Plate"]),
                "location": [num(), num(), num()],
                "dimensions": [abs(num()), abs(num()), abs(num())],
                "material": {"color": f"#{rng.randrange(1 << 24):06X}", "metallic": 0.0},
            }
            out.append(
                "<tool_response>\n"
                + json.dumps({"ok": True, "objects": [obj]})
                + "\n</tool_response>"
            )
        elif kind == 3:
            w, h, t = (rng.randint(5, 120) for _ in range(3))
            out.append(
                "import cadquery as cq\n"
                f'result = cq.Workplane("XY").box({w}, {h}, {t}).faces(">Z").workplane()'
                f'.hole({rng.randint(2, 12)}).edges("|Z").fillet({rng.randint(1, 4)})\n'
            )
        elif kind == 4:
            tool = rng.choice(names)
            schema = {
                "type": "function",
                "function": {
                    "name": tool,
                    "description": f"{rng.choice(words)} {rng.choice(words)} in the scene.",
                    "parameters": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "size": {"type": "number"}},
                        "required": ["name"],
                    },
                },
            }
            out.append(json.dumps(schema))
        else:
            out.append(
                f"Make a {rng.choice(colours)} {rng.choice(shapes)} of {abs(num())} m "
                f"{rng.choice(['on top of', 'next to', 'left of'])} the {rng.choice(shapes)}."
            )
    return out


def catalogue_corpus(repeat: int = 20) -> list[str]:
    """The real tool schemas and system prompt, so that the tool block a model reads is short."""
    from agents import DEFAULT_SYSTEM
    from agents.loop.context import RECALL_SPEC
    from agents.loop.episode_loop import openai_tools
    from tools import catalogue

    tools = openai_tools(catalogue()) + [RECALL_SPEC]
    return ([json.dumps(t) for t in tools] + [DEFAULT_SYSTEM]) * repeat


def train_tokenizer(seed: int = 0):
    """Train a byte-level BPE on the synthetic corpus and wrap it as a Qwen2 tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AddedToken, Qwen2Tokenizer

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(synthetic_corpus(seed) + catalogue_corpus(), trainer=trainer)
    state = json.loads(bpe.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in state["merges"]]
    tokenizer = Qwen2Tokenizer(
        vocab=state["vocab"],
        merges=merges,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
    )
    tokenizer.add_special_tokens(
        {"additional_special_tokens": [t for t in SPECIAL_TOKENS if t != "<|endoftext|>"]}
    )
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TAGS])
    tokenizer.chat_template = chat_template()
    return tokenizer


# "tiny" is the configuration recorded in VERIFIED.md (~0.3 M parameters, for tests);
# "small" is wider and deeper (~1.3 M): it learns more per SFT sample, at ~2x the CPU time.
SIZES: dict[str, dict[str, int]] = {
    "tiny": {"hidden": 64, "intermediate": 128, "layers": 2, "head_dim": 16},
    "small": {"hidden": 128, "intermediate": 384, "layers": 4, "head_dim": 32},
}


def tiny_config(tokenizer, size: str = "tiny"):
    """A small Qwen3-VL configuration (`SIZES`), with token ids from `tokenizer`."""
    if size not in SIZES:
        raise ValueError(f"unknown tiny-model size {size!r}; choose one of {sorted(SIZES)}")
    dims = SIZES[size]
    quarter = dims["head_dim"] // 4  # rotary pairs split over (t, h, w) as 2:1:1
    from transformers import Qwen3VLConfig

    ids = tokenizer.convert_tokens_to_ids
    text = {
        "vocab_size": len(tokenizer),
        "hidden_size": dims["hidden"],
        "intermediate_size": dims["intermediate"],
        "num_hidden_layers": dims["layers"],
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": dims["head_dim"],
        "max_position_embeddings": 8192,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 1e6,
            "mrope_section": [quarter, quarter // 2, quarter // 2],
            "mrope_interleaved": True,
        },
        "pad_token_id": ids("<|endoftext|>"),
    }
    vision = {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 2,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "out_hidden_size": dims["hidden"],
        "num_position_embeddings": 64,  # must be a perfect square
        "deepstack_visual_indexes": [0],
    }
    return Qwen3VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
        eos_token_id=ids("<|im_end|>"),
        pad_token_id=ids("<|endoftext|>"),
    )


def build_processor(tokenizer):
    """Qwen3-VL processor around `tokenizer` with small image sizes (see MAX_IMAGE_PIXELS)."""
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

    size = {"shortest_edge": MIN_IMAGE_PIXELS, "longest_edge": MAX_IMAGE_PIXELS}
    image_processor = Qwen2VLImageProcessor(
        patch_size=16, merge_size=2, temporal_patch_size=2, size=size
    )
    video_processor = Qwen3VLVideoProcessor(
        patch_size=16, merge_size=2, temporal_patch_size=2, size=size
    )
    return Qwen3VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=chat_template(),
    )


def build_tiny_model(out_dir: str | Path, seed: int = 0, size: str = "tiny") -> Path:
    """Write a tiny random Qwen3-VL (weights, config, tokenizer, processor) to `out_dir`.

    Deterministic for a given `seed`. Returns the directory, ready for `from_pretrained`.
    """
    import torch
    from transformers import GenerationConfig, Qwen3VLForConditionalGeneration

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(seed)
    config = tiny_config(tokenizer, size)
    torch.manual_seed(seed)
    model = Qwen3VLForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        do_sample=False,
        max_new_tokens=128,
    )
    model.save_pretrained(out)
    build_processor(tokenizer).save_pretrained(out)
    return out
