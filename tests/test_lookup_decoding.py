"""Guessing ahead (agents/policies/lookup_decoding.py): the prompt's and the earlier replies'
guesses, and that greedy decoding with them gives the plain greedy tokens, on a real (tiny,
random, float64) model; with every run padded to two tokens, the same tokens whatever was
guessed, on an engine whose single token is computed unlike a batch (as llama.cpp's is)."""

from __future__ import annotations

import pytest

from agents.policies.lookup_decoding import (
    LookupStats,
    PromptLookup,
    ReplyDrafts,
    ReplyMemory,
    greedy,
)


def test_the_guess_is_what_followed_the_latest_occurrence_of_the_longest_tail():
    lookup = PromptLookup([1, 2, 3, 9, 9, 2, 3, 4, 5, 7, 2, 3], max_ngram=3, max_draft=3)
    # the tail (7, 2, 3) never occurred; (2, 3) last occurred before 4 5 7
    assert lookup.draft() == [4, 5, 7]
    assert lookup.draft(limit=1) == [4]
    assert lookup.draft(limit=0) == []
    lookup.extend([4, 5, 8])  # (4, 5) is followed by 7, then by 8: the latest wins
    lookup.extend([6, 4, 5])
    assert lookup.draft() == [8, 6, 4]
    assert PromptLookup([1, 2, 3]).draft() == []  # nothing repeats
    assert PromptLookup([5, 1, 5]).draft() == [1, 5]  # a 1-gram when no longer one matches


class _Engine:
    """A transformers model with a KV cache as the engine: runs tokens, trims the cache."""

    def __init__(self, model, prompt: list[int]) -> None:
        import torch
        from transformers import DynamicCache

        self.torch, self.model, self.cache = torch, model, DynamicCache()
        self.runs: list[int] = []
        self.first = self._run(prompt)[-1]

    def _run(self, tokens: list[int]) -> list[int]:
        with self.torch.no_grad():
            out = self.model(self.torch.tensor([tokens]), past_key_values=self.cache, use_cache=True)
        return out.logits[0].argmax(-1).tolist()

    def verify(self, tokens: list[int]) -> list[int]:
        self.runs.append(len(tokens))
        return self._run(tokens)

    def rollback(self, keep: int) -> None:
        self.cache.crop(keep - self.cache.get_seq_length())  # this transformers: minus the count to drop
        assert self.cache.get_seq_length() == keep


def _model(seed: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=48, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    return LlamaForCausalLM(config).double().eval()


def _plain(model, prompt: list[int], budget: int, stop) -> list[int]:
    """Greedy a token at a time, each from a full forward over everything so far."""
    import torch

    out: list[int] = []
    while len(out) < budget:
        with torch.no_grad():
            logits = model(torch.tensor([prompt + out])).logits
        out.append(int(logits[0, -1].argmax()))
        if stop(out):
            break
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_with_guesses_is_plain_greedy_token_for_token(seed):
    import random

    model = _model(seed)
    rng = random.Random(seed)
    motif = [rng.randrange(48) for _ in range(6)]
    prompt = [rng.randrange(48) for _ in range(10)] + motif * 3 + [rng.randrange(48) for _ in range(5)]
    eos = 47
    for budget in (1, 5, 40):
        seen_plain: list[list[int]] = []
        seen_lookup: list[list[int]] = []

        def stop_plain(out, seen=seen_plain):
            seen.append(list(out))
            return out[-1] == eos

        def stop_lookup(out, seen=seen_lookup):
            seen.append(list(out))
            return out[-1] == eos

        want = _plain(model, prompt, budget, stop_plain)
        engine = _Engine(model, prompt)
        stats = LookupStats()
        got = greedy(engine.first, PromptLookup(prompt), engine, len(prompt), budget, stop_lookup, stats)
        assert got == want
        assert seen_lookup == seen_plain  # the stop is asked once per token, in order
        assert stats.steps == len(engine.runs) and stats.accepted <= stats.drafted
        # each run gives its kept guesses and the model's own token (but a run whose kept
        # guesses ended the turn): so kept guesses are model runs saved
        assert len(got) - 1 - stats.accepted <= stats.steps <= len(got) - stats.accepted
        if budget == 40:
            assert stats.accepted > 0  # a random model repeats itself: guesses were kept


def test_a_stop_inside_the_kept_guesses_ends_the_turn_there():
    model = _model(3)
    prompt = [3, 4, 5, 6, 7] * 4
    want_full = _plain(model, prompt, 30, lambda out: False)
    cut = want_full[len(want_full) // 2]  # a token the greedy turn does produce

    def stop(out):
        return out[-1] == cut

    want = _plain(model, prompt, 30, stop)
    engine = _Engine(model, prompt)
    got = greedy(engine.first, PromptLookup(prompt), engine, len(prompt), 30, stop)
    assert got == want and got[-1] == cut
    # the context holds the prompt and the reply but its last token, as a plain loop leaves it
    assert engine.cache.get_seq_length() == len(prompt) + len(got) - 1


def test_the_reply_memory_guesses_only_what_always_followed():
    memory = ReplyMemory(min_ngram=2, max_ngram=3, max_draft=8)
    frame = [90, 91, 92, 93]  # e.g. `<tool_call>`, `{"name": "`: the same every time
    memory.add([1, 2, *frame, 10, 94, 95])
    assert memory.draft([1, 2]) == [*frame, 10, 94, 95]  # all it saw, after the run it knows
    memory.add([1, 2, *frame, 11, 94, 95])  # another choice after the frame
    assert memory.draft([1, 2]) == frame  # the frame, then not the choice: it differed
    assert memory.draft([1, 2], limit=2) == frame[:2]
    assert memory.draft([7, 93, 11]) == [94, 95]  # after the choice, the frame again
    assert memory.draft([5, 6]) == []  # never seen
    assert memory.draft([2]) == []  # shorter than its shortest run

    full = ReplyMemory(min_ngram=2, max_ngram=2, max_entries=3)
    full.add([1, 2, 3, 4, 5, 6])  # 5 runs of 2 tokens: the first 3 are kept
    assert full.draft([1, 2]) == [3, 4, 5] and full.draft([4, 5]) == []


def test_reply_drafts_fall_back_on_one_token_from_the_prompt():
    memory = ReplyMemory()
    drafts = ReplyDrafts(memory, [4, 5, 6, 4, 5])
    assert drafts.draft() == [6]  # the memory knows nothing: the prompt's latest `4 5` -> 6, one token
    memory.add([4, 5, 9, 10, 11])
    assert drafts.draft() == [9, 10, 11]  # the memory's, as far as it knows
    drafts.extend([9, 10, 11, 4])
    assert drafts.draft() == [5]  # nothing after `11 4` in memory: the prompt's latest `4` -> 5


class _Rounding(_Engine):
    """The engine above, but a run of one token comes out with other arithmetic (a small
    change to its logits), as llama.cpp's single-token path does against its batches."""

    def _run(self, tokens: list[int]) -> list[int]:
        with self.torch.no_grad():
            out = self.model(self.torch.tensor([tokens]), past_key_values=self.cache, use_cache=True)
        logits = out.logits[0]
        if len(tokens) == 1:  # a near-tie goes the other way: the runner-up wins if close
            top = logits[-1].topk(2)
            if float(top.values[0] - top.values[1]) < 0.5:
                return [int(top.indices[1])]
        return logits.argmax(-1).tolist()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_padded_runs_give_the_same_tokens_whatever_was_guessed(seed):
    import random

    model = _model(seed)
    rng = random.Random(seed)
    motif = [rng.randrange(48) for _ in range(5)]
    prompt = [rng.randrange(48) for _ in range(8)] + motif * 3 + [rng.randrange(48) for _ in range(4)]

    def never(out):
        return False

    got = {}
    for name, memory in (("empty", ReplyMemory()), ("one", ReplyMemory(max_draft=1)),
                         ("warm", ReplyMemory())):  # fmt: skip
        if name == "warm":  # learnt from this very turn: it guesses most of it
            memory.add(prompt[-4:] + got["empty"])
        engine = _Rounding(model, prompt)
        stats = LookupStats()
        got[name] = greedy(engine.first, ReplyDrafts(memory, prompt), engine, len(prompt), 30,
                           never, stats, pad=True)  # fmt: skip
        assert len(got[name]) == 30  # the budget, never a kept guess past it
        assert min(engine.runs) >= 2  # every run a batch
        if name == "warm":
            assert stats.steps < 15  # fewer runs than half the tokens
    assert got["empty"] == got["one"] == got["warm"]
    # and they are the batch arithmetic's greedy tokens: a plain forward over everything
    assert got["empty"] == _plain(model, prompt, 30, never)
