"""Greedy decoding that guesses ahead from the prompt (prompt-lookup speculative decoding).

A tool call mostly copies what its prompt already holds: the `<tool_call>` block's frame from
the system prompt, tool and argument names from the tool list, the goal's names and numbers,
earlier calls of the episode. `PromptLookup` guesses the next tokens as those that followed the
latest earlier occurrence of the last few tokens; the model then runs the last token and the
guess as one batch and keeps the guessed tokens its own argmax agrees with, plus its own next
token. Decoding a small model on a CPU is bound by reading its weights once per step, and a
batch of a few tokens costs about what one does, so each agreed guess saves a step.

The result is the plain greedy decoding's, token for token, where the engine computes a
token's logits the same in a batch as alone (tests/test_lookup_decoding.py): a guess is only
kept where the model's argmax is that token. The engine is anything with `verify(tokens) ->
argmax after each` and `rollback(keep)`; agents/policies/llamacpp_policy.py runs it on a
llama.cpp context, where `MODELWRIGHT_LOOKUP_DECODING=1` turns it on.
"""

from __future__ import annotations

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


@dataclass
class LookupStats:
    steps: int = 0  # model runs after the first token
    drafted: int = 0  # guessed tokens run
    accepted: int = 0  # guessed tokens kept


def greedy(first: int, lookup: PromptLookup, engine: Engine, evaluated: int, budget: int,
           stop: Callable[[list[int]], bool], stats: LookupStats | None = None) -> list[int]:  # fmt: skip
    """The greedy continuation after `first` (the argmax after the prompt, which the engine has
    run: it holds `evaluated` tokens, the prompt's), up to `budget` tokens in all or until
    `stop(tokens so far)` is true for a prefix, which is then the result. `stop` is asked once
    per token, in order, as a token-by-token loop would. `lookup` holds the prompt."""
    stats = stats if stats is not None else LookupStats()
    out = [int(first)]
    lookup.extend(out)
    if stop(out):
        return out
    while len(out) < budget:
        guess = lookup.draft(budget - len(out) - 1)  # the model's own token always fits after
        preds = engine.verify([out[-1], *guess])
        stats.steps += 1
        stats.drafted += len(guess)
        kept: list[int] = []
        ended = False
        for i, token in enumerate(guess):
            if int(preds[i]) != token:
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
