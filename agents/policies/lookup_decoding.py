"""Greedy decoding that guesses ahead (speculative decoding without a second model).

Two sources of guesses. `ReplyMemory` (the fast variant's default): what followed each short
run of tokens in the model's own earlier replies, guessed only where it was always the same
(a tool call's frame: `<tool_call>`, `{"name": "`, argument names in the model's order, the
closing `}}`). `PromptLookup`: the tokens that followed the latest earlier occurrence of the
last few tokens in the prompt (names and numbers a call copies from its goal). The model runs
the last token and the guess as one batch and keeps the guessed tokens its own argmax agrees
with, plus its own next token: on a CPU a batch of 2-4 tokens costs x1.35-1.85 a single
token's (a 135M model in llama.cpp, docs/MODELS.md), so each kept guess saves most of a run.

The result is the plain greedy decoding's, token for token, where the engine computes a
token's logits the same in a batch as alone (tests/test_lookup_decoding.py): a guess is only
kept where the model's argmax is that token. Where a single token's arithmetic differs from a
batch's but batches of any size agree (llama.cpp with flash attention), `greedy(pad=True)`
runs two tokens at least every time, so the tokens do not depend on what was guessed. The
engine is anything with `verify(tokens) -> argmax after each` and `rollback(keep)`;
agents/policies/llamacpp_policy.py runs it on a llama.cpp context
(`MODELWRIGHT_LOOKUP_DECODING=replies|prompt|off`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol


class Engine(Protocol):
    def verify(self, tokens: list[int]) -> list[int]:
        """Run `tokens` after what the context holds; the argmax token after each of them."""
        ...

    def rollback(self, keep: int) -> None:
        """Keep only the first `keep` tokens of the context."""
        ...


class PromptLookup:
    """An index of the n-grams (1 to `max_ngram` tokens) of a growing token list, each mapped
    to where the token after its latest occurrence is; `draft` guesses what follows the list's
    last n-gram, trying the longest first."""

    def __init__(self, ids: Sequence[int], max_ngram: int = 3, max_draft: int = 8) -> None:
        self.max_ngram, self.max_draft = max(1, int(max_ngram)), max(1, int(max_draft))
        self.ids: list[int] = []
        self._next: list[dict[tuple[int, ...], int]] = [{} for _ in range(self.max_ngram + 1)]
        self.extend(ids)

    def extend(self, tokens: Sequence[int]) -> None:
        for t in tokens:
            self.ids.append(int(t))
            end = len(self.ids) - 1  # the n-grams ending just before this token: it follows them
            for n in range(1, self.max_ngram + 1):
                if end - n < 0:
                    break
                self._next[n][tuple(self.ids[end - n:end])] = end

    def draft(self, limit: int | None = None) -> list[int]:
        cap = self.max_draft if limit is None else max(0, min(self.max_draft, int(limit)))
        if cap == 0:
            return []
        size = len(self.ids)
        for n in range(min(self.max_ngram, size), 0, -1):
            at = self._next[n].get(tuple(self.ids[size - n:]))
            if at is not None:
                return self.ids[at:at + cap]
        return []


class ReplyMemory:
    """What followed each short run of tokens in a model's own earlier replies, kept across
    turns and episodes (a model's replies repeat their frame: `<tool_call>`, `{"name": "`, a
    tool's argument names in the order it writes them, the closing `}}` and end of turn).

    `draft(context)` guesses what follows `context` token by token, from the longest run of
    its last `min_ngram`..`max_ngram` tokens seen before, and only while every earlier
    occurrence of that run was followed by the same token: it guesses structure the model
    has always written the same way, and stops where the model chose (a number, a name).
    The guesses are checked by the model like any other (`greedy`), so they only decide how
    many tokens a model run holds, never which tokens come out. Safe to share between
    threads: `add` and `draft` take a lock."""

    def __init__(self, min_ngram: int = 2, max_ngram: int = 4, max_draft: int = 6,
                 max_entries: int = 200_000) -> None:  # fmt: skip
        self.min_ngram, self.max_ngram = max(1, int(min_ngram)), max(1, int(max_ngram))
        self.max_draft, self.max_entries = max(1, int(max_draft)), int(max_entries)
        # run of n tokens -> the one token that always followed it, or None once two differed
        self._next: list[dict[tuple[int, ...], int | None]] = [{} for _ in range(self.max_ngram + 1)]
        self._entries = 0
        self._lock = threading.Lock()

    def add(self, tokens: Sequence[int]) -> None:
        """Learn from a reply: `tokens` is its prompt's last few tokens and the reply."""
        toks = [int(t) for t in tokens]
        with self._lock:
            for end in range(1, len(toks)):
                for n in range(self.min_ngram, self.max_ngram + 1):
                    if end - n < 0:
                        break
                    table, key = self._next[n], tuple(toks[end - n:end])
                    if key not in table:
                        if self._entries >= self.max_entries:
                            continue  # full: what it knows stays, nothing new is learnt
                        table[key] = toks[end]
                        self._entries += 1
                    elif table[key] != toks[end]:
                        table[key] = None  # followed by different tokens: never guessed again

    def draft(self, context: Sequence[int], limit: int | None = None) -> list[int]:
        cap = self.max_draft if limit is None else max(0, min(self.max_draft, int(limit)))
        ctx, out = list(context[-self.max_ngram:]), []
        with self._lock:
            while len(out) < cap:
                guess = None
                for n in range(min(self.max_ngram, len(ctx)), self.min_ngram - 1, -1):
                    key = tuple(ctx[len(ctx) - n:])
                    if key in self._next[n]:
                        guess = self._next[n][key]  # the longest run seen decides, None too
                        break
                if guess is None:
                    break
                out.append(guess)
                ctx = ctx[1:] + [guess] if len(ctx) >= self.max_ngram else ctx + [guess]
        return out


class ReplyDrafts:
    """A turn's guesses from a `ReplyMemory`, in the form `greedy` takes: the turn's tokens so
    far (`extend`) and what the memory guesses after them (`draft`); where the memory has no
    guess, one token from the prompt (`PromptLookup`'s)."""

    def __init__(self, memory: ReplyMemory, prompt: Sequence[int]) -> None:
        self.memory = memory
        self.ids = [int(t) for t in prompt[-memory.max_ngram:]]
        self.prompt = PromptLookup(prompt, max_draft=1)

    def extend(self, tokens: Sequence[int]) -> None:
        self.ids.extend(int(t) for t in tokens)
        self.prompt.extend(tokens)

    def draft(self, limit: int | None = None) -> list[int]:
        return self.memory.draft(self.ids, limit) or self.prompt.draft(limit)


@dataclass
class LookupStats:
    steps: int = 0  # model runs after the first token
    drafted: int = 0  # guessed tokens run
    accepted: int = 0  # guessed tokens kept


def greedy(first: int, lookup: PromptLookup | ReplyDrafts, engine: Engine, evaluated: int, budget: int,
           stop: Callable[[list[int]], bool], stats: LookupStats | None = None,
           pad: bool = False) -> list[int]:  # fmt: skip
    """The greedy continuation after `first` (the argmax after the prompt, which the engine has
    run: it holds `evaluated` tokens, the prompt's), up to `budget` tokens in all or until
    `stop(tokens so far)` is true for a prefix, which is then the result. `stop` is asked once
    per token, in order, as a token-by-token loop would. `lookup` holds the prompt.

    `pad`: every model run holds at least two tokens; where nothing is guessed, the last token
    is guessed again. For an engine whose arithmetic differs between one token and a batch
    but not between batches of any size (llama.cpp with flash attention), the turn's tokens
    then do not depend on what was guessed or kept."""
    stats = stats if stats is not None else LookupStats()
    out = [int(first)]
    lookup.extend(out)
    if stop(out):
        return out
    while len(out) < budget:
        room = budget - len(out) - 1  # guesses that may be kept: the model's own token fits after
        guess = lookup.draft(room)
        if pad and not guess:
            guess = [out[-1]]  # never kept past `room`: below
        preds = engine.verify([out[-1], *guess])
        stats.steps += 1
        stats.drafted += len(guess)
        kept: list[int] = []
        ended = False
        for i, token in enumerate(guess):
            if i >= room or int(preds[i]) != token:
                break
            kept.append(token)
            if stop(out + kept):
                ended = True
                break
        stats.accepted += len(kept)
        evaluated += 1 + len(kept)  # out[-1] and the kept guesses are in the context
        if not ended:
            kept.append(int(preds[len(kept)]))  # the model's own next token, not yet run
        engine.rollback(evaluated)
        out += kept
        lookup.extend(kept)
        if ended or stop(out):
            break
    return out
