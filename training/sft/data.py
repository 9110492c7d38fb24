"""SFT data: the store's exported conversations, and the collator that turns them into a batch.

Rows follow the store's TRL conversational export (`agents/store/conversation.py`):
`messages` (assistant `content` null when it only calls tools; `tool_calls` with JSON-string
arguments; `tool` turns with a text part and an image placeholder), `images` (PNG bytes in
placeholder order), `tools` (OpenAI tool list, a list or a JSON string), plus reward columns
(`success`, `reward`, `source`, `model`, ...) used for filtering.

`ConversationCollator` fixes two things TRL's stock vision collator does not do (both seen on
this machine, see VERIFIED.md): it renders each row with *its own* `tools` (the stock one drops
them, so training prompts lacked the tool block the model sees when acting), and it fills the
image parts of `tool` turns. Labels cover assistant spans only (`{% generation %}` markers of
the training template): tool results, prompts and images never carry loss.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.trust import images


class DatasetError(ValueError):
    """The SFT data is missing, empty after filtering, or not in the exported format."""


@dataclass
class DataFilter:
    """Which exported episodes to learn from (e.g. successful oracle episodes, a teacher model's)."""

    success_only: bool = True
    sources: list[str] | None = None  # e.g. ["oracle", "human"]; None: any
    models: list[str] | None = None  # distillation: only this teacher's episodes
    min_reward: float | None = None


def load_conversations(paths: str | Path | Iterable[str | Path], where: DataFilter | None = None):
    """A `datasets.Dataset` of exported conversations from Parquet files or folders of them."""
    from datasets import load_dataset

    where = where or DataFilter()
    files: list[str] = []
    listed = [Path(p) for p in ([paths] if isinstance(paths, str | Path) else paths)]
    for p in listed:
        if not p.is_dir():
            files.append(str(p))
            continue
        # an export folder holds episodes.parquet (conversations) beside steps.parquet
        found = sorted(p.rglob("episodes.parquet")) or sorted(p.rglob("*.parquet"))
        files += [str(f) for f in found]
    missing = [f for f in files if not Path(f).is_file()]
    if not files or missing:
        first = Path(missing[0]) if missing else (listed or [Path("exports")])[0]
        folder = first.parent if first.suffix == ".parquet" else first
        raise DatasetError(
            f"no exported conversations at {first} (no such file); export episodes with "
            f"`modelwright data export --out {folder}` and list {folder}/episodes.parquet"
        )
    for f in files:  # checked here: `datasets` would log its own lines before raising
        if not _looks_like_parquet(Path(f)):
            raise DatasetError(
                f"{f} is not a Parquet file (no PAR1 magic bytes); point at the "
                "episodes.parquet of a `modelwright data export --out DIR`"
            )
    try:
        data = load_dataset("parquet", data_files=files, split="train")
    except Exception as exc:  # noqa: BLE001 - arrow and datasets raise many types for a bad file
        raise DatasetError(
            f"cannot read {', '.join(files)} as Parquet ({' '.join(str(exc).split())[:200]}); "
            "point at the episodes.parquet of a `modelwright data export --out DIR`"
        ) from None
    if "messages" not in data.column_names:
        raise DatasetError(f"{files[0]} has no `messages` column: not the store's TRL export")

    def keep(row: dict) -> bool:
        if where.success_only and "success" in row and not row["success"]:
            return False
        if where.sources and row.get("source") not in where.sources:
            return False
        if where.models and row.get("model") not in where.models:
            return False
        if where.min_reward is not None and (
            row.get("reward") is None or row["reward"] < where.min_reward
        ):
            return False
        return True

    data = data.filter(keep)
    if len(data) == 0:
        raise DatasetError(f"no episodes left in {files} after filtering with {where}")
    return data


def to_pil(image: Any) -> Any:
    """PIL image from PNG bytes, a `{"bytes": ...}` dict (datasets' Image encoding) or a PIL image."""
    if isinstance(image, dict):
        image = image.get("bytes") or image.get("path")
    if isinstance(image, bytes | bytearray | str | Path):
        try:  # renders come from a worker: the header's pixel count is checked before decoding
            return images.decode_image(image)
        except images.ImageError as e:
            raise DatasetError(f"an episode's image is unreadable: {e.message}") from None
    return image.convert("RGB")


def template_messages(messages: list[dict], images: list[Any]) -> list[dict]:
    """Exported messages with every image placeholder filled, ready for `apply_chat_template`.

    Null keys are dropped, text parts keep only `text`, and an assistant turn with no text
    keeps `content=None` (an empty text part would render an extra newline, see VERIFIED.md).
    """
    out: list[dict] = []
    k = 0
    for msg in messages:
        msg = {key: v for key, v in msg.items() if v is not None}
        content = msg.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                if part.get("type") == "image":
                    if k >= len(images):
                        raise DatasetError(f"more image placeholders than the {len(images)} images")
                    parts.append({"type": "image", "image": to_pil(images[k])})
                    k += 1
                else:
                    parts.append({"type": "text", "text": part.get("text") or ""})
            if msg["role"] == "assistant" and not any(
                p.get("text") or p["type"] == "image" for p in parts
            ):
                parts = None
            msg["content"] = parts
        for call in msg.get("tool_calls") or []:
            fn = call.get("function", call)
            if not isinstance(fn.get("arguments"), str):
                fn["arguments"] = json.dumps(fn.get("arguments") or {})
        out.append(msg)
    if k != len(images):
        raise DatasetError(f"{len(images)} images for {k} placeholders")
    return out


def _without_images(messages: list[dict]) -> list[dict]:
    """Messages with their image placeholders dropped (for a model that cannot see)."""
    out = []
    for msg in messages:
        content = msg.get("content")
        if isinstance(content, list):
            msg = {**msg, "content": [p for p in content if p.get("type") != "image"]}
        out.append(msg)
    return out


def row_tools(row: dict) -> list[dict] | None:
    tools = row.get("tools")
    if isinstance(tools, str):
        tools = json.loads(tools)
    return tools or None


class ConversationCollator:
    """Tokenise rows one by one (each with its own tools), then pad into a batch with labels.

    A row's encoding is kept (up to `cache_bytes` of tensors, least recently used dropped first)
    under a digest of everything it is made of, so the epochs after the first reuse it: SFT
    repeats each demonstration several times, and rendering the template and processing the
    images was about a fifth of a CPU step (README, "SFT"). The digest covers the messages, tools
    and image bytes, so an abridged view of a row (`training/sft/views.py`) is its own entry.
    """

    def __init__(
        self, processor: Any, max_length: int | None = None, cache_bytes: int = 1 << 30,
        pad_to_multiple_of: int | None = None, mask_padding: bool = True,
    ) -> None:
        from agents.policies import chat_format

        self.processor = processor
        self.max_length = max_length
        # Batches padded to a multiple of this many tokens: a step's tensors then come in a few
        # sizes, whose freed blocks the next steps reuse, instead of new sizes every step that
        # fragment the allocator's heap (docs/TRAINING.md, "Memory"). Padding is masked out.
        self.pad_to_multiple_of = pad_to_multiple_of
        # False: the right padding stays out of the loss (labels -100) but not out of the
        # attention mask. Causal attention never lets a real token see the padding after it,
        # so the loss and gradients are the same, and with no mask torch's CPU attention takes
        # its causal kernel instead of building every score matrix (x2.3 on ~1,700-token rows,
        # docs/TRAINING.md "Curriculum pipeline"). Right padding only: the collator's own.
        self.mask_padding = mask_padding
        self.hermes = chat_format.uses_hermes(processor)
        self.chat_template = None
        if not self.hermes:
            from trl.chat_template_utils import get_training_chat_template

            # The training variant wraps assistant turns in {% generation %} for the mask.
            self.chat_template = get_training_chat_template(processor)
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[str, dict] = OrderedDict()
        self._cached_bytes = 0
        self.hits = self.misses = 0

    def encode(self, row: dict) -> dict:
        """`encode_row(row)`, from the cache when this exact row was encoded before."""
        key = row_digest(row)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            self.hits += 1
            return dict(hit)  # the caller may pop keys; the tensors are never written to
        self.misses += 1
        out = self.encode_row(row)
        size = _nbytes(out)
        if size <= self.cache_bytes:
            self._cache[key] = dict(out)
            self._cached_bytes += size
            while self._cached_bytes > self.cache_bytes:
                _, old = self._cache.popitem(last=False)
                self._cached_bytes -= _nbytes(old)
        return out

    def encode_row(self, row: dict) -> dict:
        """input_ids, attention_mask, labels (assistant-only) and vision tensors for one row."""
        if self.hermes:  # tools in the system message, calls as <tool_call> text
            from agents.policies import chat_format

            if chat_format.is_text_only(self.processor):  # the row keeps its frames
                messages = template_messages(_without_images(row["messages"]), [])
            else:
                messages = template_messages(row["messages"], list(row.get("images") or []))
            out = chat_format.encode_training(self.processor, messages, row_tools(row))
            return self._checked(out)
        messages = template_messages(row["messages"], list(row.get("images") or []))
        out = self.processor.apply_chat_template(
            messages,
            tools=row_tools(row),
            chat_template=self.chat_template,
            tokenize=True,
            return_dict=True,
            return_tensors="pt",
            return_assistant_tokens_mask=True,
            processor_kwargs={"add_special_tokens": False},
        )
        labels = out["input_ids"].clone()
        labels[out.pop("assistant_masks") == 0] = -100
        out["labels"] = labels
        return self._checked(out)

    def _checked(self, out: dict) -> dict:
        labels = out["labels"]
        if self.max_length is not None and labels.shape[1] > self.max_length:
            # Cutting inside an image's tokens breaks the vision inputs: refuse with a fix.
            raise DatasetError(
                f"a conversation has {labels.shape[1]} tokens > max_length {self.max_length}; "
                "raise sft.max_length or keep fewer images per episode"
            )
        return dict(out)

    def __call__(self, rows: list[dict]) -> dict:
        import torch

        encoded = [self.encode(r) for r in rows]
        width = max(e["input_ids"].shape[1] for e in encoded)
        if self.pad_to_multiple_of:
            width = -(-width // self.pad_to_multiple_of) * self.pad_to_multiple_of
        from agents.policies.chat_format import tokenizer_of

        pad_id = tokenizer_of(self.processor).pad_token_id
        pads = {"input_ids": pad_id, "attention_mask": 0, "labels": -100, "mm_token_type_ids": 0}
        batch: dict[str, Any] = {}
        for key, fill in pads.items():
            if key not in encoded[0]:
                continue
            rows_ = []
            for e in encoded:
                t = e[key]
                extra = width - t.shape[1]
                rows_.append(torch.nn.functional.pad(t, (0, extra), value=fill) if extra else t)
            batch[key] = torch.cat(rows_, dim=0)
        for key in ("pixel_values", "image_grid_thw"):
            parts = [e[key] for e in encoded if key in e]
            if parts:
                batch[key] = torch.cat(parts, dim=0)
        if not self.mask_padding and "attention_mask" in batch:
            batch["attention_mask"] = torch.ones_like(batch["attention_mask"])
        return batch


def _nbytes(encoded: dict) -> int:
    return sum(t.numel() * t.element_size() for t in encoded.values())


def row_digest(row: dict) -> str:
    """A digest of what a row's encoding depends on: its messages, tools and image bytes."""
    h = hashlib.sha256()
    h.update(json.dumps(row.get("messages"), sort_keys=True, default=str).encode())
    tools = row.get("tools")
    h.update(tools.encode() if isinstance(tools, str) else json.dumps(tools, default=str).encode())
    for image in row.get("images") or []:
        if isinstance(image, dict):
            image = image.get("bytes") or image.get("path")
        if isinstance(image, bytes | bytearray):
            h.update(hashlib.sha256(image).digest())
        elif isinstance(image, str | Path):  # the file's bytes: the file may be rewritten
            h.update(hashlib.sha256(Path(image).read_bytes()).digest())
        else:  # a PIL image: its pixels
            h.update(hashlib.sha256(image.tobytes()).digest())
    return h.hexdigest()


def _looks_like_parquet(path: Path) -> bool:
    with path.open("rb") as fh:
        head = fh.read(4)
        if path.stat().st_size < 8:
            return False
        fh.seek(-4, 2)
        return head == b"PAR1" and fh.read(4) == b"PAR1"
