"""The fast variant in llama.cpp: an agent's merged, q8_0 GGUF run by llama-cpp-python.

`modelwright run|eval --policy hf --variant fast` and the studio's fast Local agent use this
when llama-cpp-python (the optional `fast` extra) is installed and the agent's base came from
a llama-architecture GGUF (the packaged base, or one added with `models add FILE.gguf`);
otherwise the in-process int8 variant runs (`hf_policy.fast_variant`) and one line says why.

- **The same prompt tokens.** The prompt is rendered and tokenised exactly as the standard
  variant's (`chat_format.render` with the model folder's tokenizer), and the token ids, not
  text, are handed to llama.cpp; replies are decoded with the same tokenizer and parsed by the
  same parser, so a turn is the standard variant's but for q8_0's rounding.
- **The GGUF.** Made once per agent by `agents.models.variants.fast_gguf` (the export of
  `modelwright models export`, q8_0) and kept beside the models, keyed by the base's and the
  adapter's hashes; a retrained adapter gets a new one.
- **Contexts.** One llama.cpp context per turn running at once, kept in a pool: a turn takes
  the idle context whose evaluated tokens share the longest prefix with its prompt (the
  episode's previous turn, or another episode's system + tools prefix) and runs only the rest.
- **Speed** is counted per model (prompt and new tokens, seconds) and saved beside the GGUF,
  what `modelwright models show` reports as the variant's measured speed.

llama_cpp is imported inside functions: it is an optional extra.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agents.models.shipped import goal_tools_of
from agents.policies.chat_format import render
from agents.policies.hf_policy import common_prefix
from agents.policies.lookup_decoding import ReplyMemory
from agents.policies.protocol import PolicyError, PolicyReply, PromptBudget, TurnTokens
from agents.policies.toolcall_parser import parse_tool_calls


def llama_cpp_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None


# The GGUFs open in this process, one LlamaModel each (`open_fast`): the studio's next run of
# the same agent finds its contexts loaded instead of loading (and keeping) another set.
_OPEN: dict[Path, LlamaModel] = {}
_OPEN_LOCK = threading.Lock()


class LlamaModel:
    """One GGUF and its tokenizer, shared by every policy on it: a pool of llama.cpp contexts
    (one per turn running at once), the thread count each is made with, and speed counters.
    `close` hands the contexts back (a pipeline's eval stage, done with its adapter's GGUF)."""

    def __init__(self, gguf: Path, tokenizer: Any, n_ctx: int, threads: int,
                 stats_path: Path | None = None) -> None:  # fmt: skip
        self.gguf, self.tokenizer = Path(gguf), tokenizer
        self.n_ctx, self.threads = int(n_ctx), max(1, int(threads))
        self.stats_path = stats_path
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self.counts = {"turns": 0, "prompt_tokens": 0, "prompt_encoded": 0, "new_tokens": 0,
                       "prefill_s": 0.0, "decode_s": 0.0, "steps": 0, "drafted": 0, "accepted": 0}
        # How greedy turns guess ahead (lookup_decoding.py; docs/MODELS.md, "Guessing ahead"):
        # `replies` from the model's own earlier replies, every model run two tokens at least
        # (the default: the turn's tokens then do not depend on the guesses); `prompt` from
        # the prompt; `off` a token at a time. MODELWRIGHT_LOOKUP_DECODING chooses.
        self.lookup = lookup_mode()
        self.memory = ReplyMemory()
        self.closed = False
        if stats_path is not None:
            atexit.register(self.save_stats)

    def close(self) -> None:
        """Save the speed counts, free the idle contexts (a context in use is freed when its
        turn gives it back) and forget this model: the next `open_fast` loads the GGUF again."""
        self.save_stats()
        atexit.unregister(self.save_stats)
        with _OPEN_LOCK:
            if _OPEN.get(self.gguf) is self:
                del _OPEN[self.gguf]
        with self._lock:
            self.closed, idle, self._idle = True, self._idle, []
        for llm in idle:
            llm.close()

    def set_threads(self, threads: int) -> None:
        """Threads for contexts made from now on (an eval sets it before its first turn)."""
        self.threads = max(1, int(threads))

    def _new_context(self) -> Any:
        try:
            return open_gguf(self.gguf, n_ctx=self.n_ctx, n_batch=512, n_threads=self.threads,
                             n_threads_batch=self.threads)
        except (ValueError, RuntimeError, OSError) as exc:
            raise PolicyError(f"llama.cpp could not load {self.gguf.name}: {exc}") from None

    def take(self, ids: list[int]) -> Any:
        """The idle context sharing the longest prefix with `ids` (a new one if none is idle)."""
        with self._lock:
            if self._idle:
                best = max(range(len(self._idle)),
                           key=lambda i: common_prefix(evaluated(self._idle[i]), ids))  # fmt: skip
                return self._idle.pop(best)
        return self._new_context()

    def give(self, llm: Any) -> None:
        with self._lock:
            if not self.closed:
                self._idle.append(llm)
                return
        llm.close()

    def count(self, prompt: int, encoded: int, new: int, prefill_s: float, decode_s: float) -> None:
        with self._lock:
            c = self.counts
            c["turns"] += 1
            c["prompt_tokens"] += prompt
            c["prompt_encoded"] += encoded
            c["new_tokens"] += new
            c["prefill_s"] += prefill_s
            c["decode_s"] += decode_s

    def count_lookup(self, stats: Any) -> None:
        with self._lock:
            self.counts["steps"] += stats.steps
            self.counts["drafted"] += stats.drafted
            self.counts["accepted"] += stats.accepted

    def speed(self) -> dict:
        c = dict(self.counts)
        if c["decode_s"] > 0:
            c["new_tok_s"] = round(c["new_tokens"] / c["decode_s"], 1)
        if c["prefill_s"] > 0:
            c["prompt_tok_s"] = round(c["prompt_encoded"] / c["prefill_s"], 1)
        c["prefill_s"], c["decode_s"] = round(c["prefill_s"], 3), round(c["decode_s"], 3)
        c["threads"] = self.threads
        return c

    def save_stats(self) -> None:
        """Add this process's counts to the speed file beside the GGUF (best effort)."""
        if self.stats_path is None or not self.counts["turns"]:
            return
        from agents.models.variants import add_speed

        with self._lock:
            counts, self.counts = self.counts, dict.fromkeys(self.counts, 0)
        add_speed(self.stats_path, counts, self.threads)


EXTRA_BUFFERS_ENV = "MODELWRIGHT_LLAMA_EXTRA_BUFFERS"
_params_lock = threading.Lock()


@functools.cache
def llama_system_info() -> str:
    """What the installed llama.cpp was built with (`llama_print_system_info`: "AVX2 = 1 |
    OPENMP = 1 | ..."), read once a process."""
    import llama_cpp

    return llama_cpp.llama_print_system_info().decode(errors="replace")


def extra_buffers(system_info: str | None = None, cpuinfo: str | None = None) -> bool:
    """Whether llama.cpp may lay the weights out for its extra CPU kernels (its "extra buffer
    types": AMX tiles, repacked rows). Not where llama.cpp was built with its AMX kernels and
    the CPU has AMX: there llama.cpp 0.3.36's AMX layout of SmolLM2's q8_0 weights crashed the
    first decode with a segmentation fault (`make fast` builds without AMX, which keeps the
    repacked kernels). `MODELWRIGHT_LLAMA_EXTRA_BUFFERS=1|0` decides instead. `system_info` is
    llama.cpp's own line (`llama_print_system_info`), `cpuinfo` /proc/cpuinfo's text; both are
    read when not given."""
    said = os.environ.get(EXTRA_BUFFERS_ENV)
    if said in ("0", "1"):
        return said == "1"
    if system_info is None:
        system_info = llama_system_info()
    if "AMX_INT8 = 1" not in system_info:
        return True
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
        except OSError:
            return False
    return " amx_int8" not in cpuinfo


@contextlib.contextmanager
def _weight_buffers(extra: bool) -> Iterator[None]:
    """Within it, llama.cpp models load with (or without) the extra buffer types: llama-cpp-
    python reads its model parameters from `llama_model_default_params` and has no argument
    for this one."""
    import llama_cpp.llama_cpp as lib

    with _params_lock:
        default = lib.llama_model_default_params
        if not extra and hasattr(default(), "use_extra_bufts"):
            def without() -> Any:
                params = default()
                params.use_extra_bufts = False
                return params

            lib.llama_model_default_params = without
        try:
            yield
        finally:
            lib.llama_model_default_params = default


FLASH_ATTN_ENV = "MODELWRIGHT_LLAMA_FLASH_ATTN"


def flash_attention() -> bool:
    """llama.cpp's fused attention: on unless `MODELWRIGHT_LLAMA_FLASH_ATTN=0`. On this
    product's prompts it ran a turn's new prompt tokens x1.18 as fast on 2 cores, and its
    greedy tool calls are the standard variant's (tests/test_models_export.py)."""
    return os.environ.get(FLASH_ATTN_ENV, "1").strip() != "0"


LOOKUP_ENV = "MODELWRIGHT_LOOKUP_DECODING"
LOOKUP_MODES = ("replies", "prompt", "off")


def lookup_mode() -> str:
    """How greedy turns guess ahead: MODELWRIGHT_LOOKUP_DECODING=replies|prompt|off (1 and 0,
    the older switch, read as prompt and off); `replies` when unset or not one of these."""
    value = os.environ.get(LOOKUP_ENV, "").strip().lower()
    value = {"1": "prompt", "0": "off"}.get(value, value)
    return value if value in LOOKUP_MODES else "replies"


def open_gguf(path: str | Path, **kwargs: Any) -> Any:
    """llama_cpp.Llama on `path` (seed 0, quiet, flash attention as `flash_attention` says),
    its weights laid out as `extra_buffers` says: every llama.cpp context the product, its
    tests and benchmarks open goes through here."""
    import llama_cpp

    defaults = {"seed": 0, "verbose": False, "flash_attn": flash_attention()}
    with _weight_buffers(extra_buffers()):
        return llama_cpp.Llama(model_path=str(path), **{**defaults, **kwargs})


def evaluated(llm: Any) -> list[int]:
    """The tokens a context holds in its cache."""
    return llm.input_ids[: llm.n_tokens].tolist()


class LlamaCppPolicy:
    """The Policy interface over a `LlamaModel` (the hf policy's options: tools shown, greedy
    or seeded sampling, max tokens, stop-on-prose). Log-probs are not kept: training scores
    with the standard variant."""

    variant = "fast"
    sees_images = False  # a text model's GGUF: its chat format drops images

    def __init__(self, config: Any, model: LlamaModel, label: str, quant: str = "q8_0") -> None:
        self.config = config  # an HFPolicyConfig
        self.llama, self.label, self.quant = model, label, quant
        self.name = f"hf:{label} (fast, llama.cpp {quant})"
        self._turn = 0
        self._task_tools: list[str] | None = None
        self.prompt_encoded = 0
        self.prompt_tokens = 0

    def sibling(self) -> LlamaCppPolicy:
        """A fresh policy on the same model (an eval's next episode)."""
        import copy

        return LlamaCppPolicy(copy.copy(self.config), self.llama, self.label, self.quant)

    def reset(self, task_info: dict | None = None) -> None:
        self._turn = 0
        self._task_tools = goal_tools_of(task_info, self.config.goal_tools,
                                         self.config.goal_toolboxes)

    def shown(self) -> list[str] | None:
        if self.config.tools is not None:
            return self.config.tools
        return self._task_tools if self._task_tools is not None else self.config.goal_tools

    def turns_stand_alone(self) -> bool:
        return True  # a context per turn: nothing beside it changes its tokens

    def _ids(self, messages: list[dict], tools: list[dict]) -> list[int]:
        """The prompt's tokens, as the standard variant renders and tokenises it."""
        text = render(self.llama.tokenizer, messages, tools)
        return list(self.llama.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_budget(self) -> PromptBudget:
        """The loop fits each prompt to the context less the turn's new tokens, counted by
        this model's tokenizer over the tools it is shown."""
        from agents.policies.hf_policy import shown_tools

        def count(messages: list[dict], tools: list[dict] | None) -> int:
            return len(self._ids(messages, shown_tools(tools or [], self.shown())))

        return PromptBudget(limit=self.llama.n_ctx - int(self.config.max_tokens), count=count)

    def act(self, messages: list[dict], tools: list[dict]) -> PolicyReply:
        from agents.policies.hf_policy import ProseStop, seen_digest, shown_tools

        tools = shown_tools(tools, self.shown())
        tokenizer = self.llama.tokenizer
        ids = self._ids(messages, tools)
        budget = int(self.config.max_tokens)
        if len(ids) + budget > self.llama.n_ctx:
            raise PolicyError(f"the prompt ({len(ids)} tokens) and {budget} new tokens do not fit "
                              f"the model's context ({self.llama.n_ctx})", fatal=False)
        names = [t["function"]["name"] for t in tools if "function" in t]
        prose = None
        if self._turn == 0 and self.config.prose_stop_tokens:
            prose = ProseStop(tokenizer, len(ids), self.config.prose_stop_tokens, names)
        start = time.perf_counter()
        completion, encoded, prefill_s = self._complete(ids, budget, prose)
        total_s = time.perf_counter() - start
        self.llama.count(len(ids), encoded, len(completion), prefill_s, total_s - prefill_s)
        self.prompt_encoded += encoded
        self.prompt_tokens += len(ids)
        reply = tokenizer.decode(completion, skip_special_tokens=True).strip()
        parsed = parse_tool_calls(reply, known_tools=names, id_prefix=f"t{self._turn}")
        self._turn += 1
        return PolicyReply(
            text=parsed.text if parsed.calls else (reply or None),
            tool_calls=parsed.calls,
            tokens_in=len(ids),
            tokens_out=len(completion),
            latency_ms=total_s * 1e3,
            raw={"completion": reply, "completion_ids": completion, "no_call": parsed.no_call,
                 "prompt_encoded": encoded, "variant": "fast",
                 "stopped_on_prose": bool(prose is not None and prose.stopped)},  # fmt: skip
            tokens=TurnTokens(prompt_ids=ids, completion_ids=completion, logprobs=None,
                              seen=seen_digest(messages, tools),
                              model_version=self.config.version, prompt_encoded=encoded),
        )

    def _complete(self, ids: list[int], budget: int, prose: Any) -> tuple[list[int], int, float]:
        """Greedy (or seeded sampled) new tokens after `ids`, up to and including the end of
        turn; the prompt tokens run (the rest came from the context's cache) and the seconds
        until the first new token."""
        eos = {t for t in (self.llama.tokenizer.eos_token_id,) if t is not None}
        temp = float(self.config.temperature or 0.0)
        llm = self.llama.take(ids)
        try:
            eos.add(llm.token_eos())
            held = evaluated(llm)
            reused = common_prefix(held, ids)
            if reused == len(ids):  # the whole prompt cached: one token runs again for logits
                reused -= 1
            encoded = len(ids) - reused
            if temp and self.config.seed is not None:
                llm.set_seed(int(self.config.seed) * 10_007 + self._turn)
            sampling = {"temp": temp, "top_k": 0 if temp else 1,
                        "top_p": float(self.config.top_p or 1.0), "repeat_penalty": 1.0}
            if not temp and self.llama.lookup != "off" and _LlamaEngine.supports(llm):
                return self._complete_lookup(llm, ids, reused, budget, eos, prose)
            out: list[int] = []
            prefill_s, start = 0.0, time.perf_counter()
            for token in llm.generate(ids, reset=True, **sampling):
                if not out:
                    prefill_s = time.perf_counter() - start
                out.append(int(token))
                if token in eos or len(out) >= budget or (prose is not None
                                                          and prose.should_stop(out)):  # fmt: skip
                    break
            return out, encoded, prefill_s
        except (RuntimeError, ValueError) as exc:
            raise PolicyError(f"generation failed in {self.name}: {exc}", fatal=False) from exc
        finally:
            self.llama.give(llm)


    def _complete_lookup(self, llm: Any, ids: list[int], reused: int, budget: int, eos: set,
                         prose: Any) -> tuple[list[int], int, float]:  # fmt: skip
        """Greedy, guessing ahead (agents/policies/lookup_decoding.py). `replies`: guesses from
        the model's earlier replies, and every model run holds two tokens at least, the
        prompt's last run too, so each token comes out of llama.cpp's arithmetic for a batch,
        whatever was guessed. `prompt`: guesses from the prompt, single tokens where none."""
        from agents.policies.lookup_decoding import LookupStats, PromptLookup, ReplyDrafts, greedy

        pad = self.llama.lookup == "replies"
        if pad and len(ids) - reused < 2 <= len(ids):
            reused = len(ids) - 2  # the prompt's last run is a batch too
        engine = _LlamaEngine(llm)
        start = time.perf_counter()
        first = engine.prefill(ids, reused)
        prefill_s = time.perf_counter() - start

        def stop(out: list[int]) -> bool:
            return out[-1] in eos or (prose is not None and prose.should_stop(out))

        stats = LookupStats()
        memory = self.llama.memory
        drafts = ReplyDrafts(memory, ids) if pad else PromptLookup(ids)
        out = greedy(first, drafts, engine, len(ids), budget, stop, stats, pad=pad)
        if pad:
            memory.add(ids[-memory.max_ngram:] + out)
        self.llama.count_lookup(stats)
        return out, len(ids) - reused, prefill_s


class _LlamaEngine:
    """A llama.cpp context (llama-cpp-python's `Llama`) as lookup decoding's engine: batches
    run with a logit row per token, the context trimmed back to the tokens kept. It uses the
    binding's low-level context and batch (`_ctx`, `_batch`), which `supports` checks."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.vocab = int(llm.n_vocab())
        self.ctx, self.batch = llm._ctx, llm._batch

    @staticmethod
    def supports(llm: Any) -> bool:
        ctx, batch = getattr(llm, "_ctx", None), getattr(llm, "_batch", None)
        return all(hasattr(ctx, m) for m in ("decode", "get_logits", "kv_cache_seq_rm")) and \
            hasattr(batch, "set_batch")

    def _logits(self, rows: int) -> Any:
        import numpy as np

        return np.ctypeslib.as_array(self.ctx.get_logits(), shape=(rows, self.vocab))

    def prefill(self, ids: list[int], reused: int) -> int:
        """Run the prompt after its first `reused` tokens (held already); its argmax."""
        self.rollback(reused)
        self.llm.eval(ids[reused:])  # the last row's logits only
        return int(self._logits(1)[0].argmax())

    def verify(self, tokens: list[int]) -> list[int]:
        llm = self.llm
        n_past = llm.n_tokens
        self.ctx.kv_cache_seq_rm(-1, n_past, -1)
        self.batch.set_batch(batch=tokens, n_past=n_past, logits_all=True)
        self.ctx.decode(self.batch)
        llm.input_ids[n_past:n_past + len(tokens)] = tokens
        llm.n_tokens = n_past + len(tokens)
        llm._requires_eval = True  # its logits are no single token's: `generate` runs one again
        return self._logits(len(tokens)).argmax(axis=1).tolist()

    def rollback(self, keep: int) -> None:
        self.ctx.kv_cache_seq_rm(-1, keep, -1)
        self.llm.n_tokens = keep
        self.llm._requires_eval = True


def load_fast(config: Any) -> tuple[LlamaCppPolicy | None, str]:
    """The llama.cpp fast variant of `config`'s agent, or (None, why not) when llama-cpp-python
    is not installed or the agent cannot be exported (the caller runs the int8 variant)."""
    if not llama_cpp_available():
        return None, ("llama-cpp-python is not installed (`make fast` builds it from source "
                      "for this CPU)")
    from agents.models.convert import ModelError
    from agents.models.variants import fast_gguf
    from tools.cli.exits import Unavailable, UserError

    try:
        built = fast_gguf(config.model, config.adapter, quant=getattr(config, "quant", "q8_0"))
    except (ModelError, UserError, Unavailable) as exc:
        return None, str(exc).splitlines()[0]
    return open_fast(config, built), ""


def open_fast(config: Any, built: Any) -> LlamaCppPolicy:
    """The policy on a fast variant's GGUF (`agents.models.variants.FastGGUF`), its threads
    chosen for the machine as it is now. A GGUF already open in this process is used again
    (its loaded contexts), until `LlamaModel.close`."""
    from agents.models.convert import progress
    from agents.models.cpu import (
        choose_threads,
        measure_busy_elsewhere,
        threads_override,
        usable_cores,
    )

    override = threads_override()
    threads = choose_threads(usable_cores(), 0.0 if override else measure_busy_elsewhere(0.3),
                             None, override)  # fmt: skip
    with _OPEN_LOCK:
        model = _OPEN.get(built.gguf)
        if model is None:
            from transformers import AutoConfig, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(built.folder), local_files_only=True)
            n_ctx = int(getattr(AutoConfig.from_pretrained(str(built.folder), local_files_only=True),
                                "max_position_embeddings", 8192) or 8192)  # fmt: skip
            model = _OPEN[built.gguf] = LlamaModel(built.gguf, tokenizer, min(n_ctx, 8192),
                                                   threads, built.stats)  # fmt: skip
        else:
            model.set_threads(threads)
    progress(f"fast variant: {built.gguf.name} in llama.cpp, {threads} thread(s)")
    advice = build_advice()
    if advice:
        progress(advice)
    return LlamaCppPolicy(config, model, built.label, built.quant)


def build_advice(system_info: str | None = None, cpuinfo: str | None = None,
                 wait_policy: str | None = None) -> str:  # fmt: skip
    """One line when the installed llama.cpp build is slower here than `make fast`'s, else "".
    An OpenMP build's threads sleep at each of the ~1,000 steps of a new token under the
    passive wait policy the product sets for torch (x2.6 the time of a token on 2 threads,
    measured); an AMX build on an AMX CPU runs without its extra kernels (`extra_buffers`)."""
    from agents.models.cpu import wait_policy as current_wait_policy

    if system_info is None:
        system_info = llama_system_info()
    why = []
    if "OPENMP = 1" in system_info and (wait_policy or current_wait_policy()) == "passive":
        why.append("with OpenMP, whose threads sleep between its steps here (new tokens ~x2.6 "
                   "slower)")  # fmt: skip
    if "AMX_INT8 = 1" in system_info and not extra_buffers(system_info, cpuinfo):
        why.append("with AMX, which crashed here, so it runs without its faster kernels")
    if not why:
        return ""
    return (f"llama.cpp was built {' and '.join(why)}: `make fast` rebuilds it for this CPU "
            "(docs/MODELS.md, \"Fast variant: llama.cpp\")")

