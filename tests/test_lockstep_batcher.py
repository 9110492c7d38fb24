"""`LockstepBatcher` (agents/policies/hf_policy.py): which turns of an eval wave share a batch
depends only on the episodes, never on which thread asks first; finished episodes leave their
wave; a failed batch reaches every member it held."""

from __future__ import annotations

import random
import threading
import time

import pytest

from agents.policies.hf_policy import LockstepBatcher


def _run(waves, turns, delays):
    """Each member asks for `turns[key]` turns, sleeping its seeded delays in between."""
    batcher = LockstepBatcher(waves, max_turns=max(turns.values()))
    seen: dict[str, list] = {}

    def generate(prompts):
        return [(list(p), None) for p in prompts]

    def member(key):
        got = []
        for t in range(turns[key]):
            time.sleep(delays[key][t])
            got.append(batcher.request(key, (key, t), generate))
        batcher.finish(key)
        seen[key] = got

    threads = [threading.Thread(target=member, args=(k,)) for w in waves for k in w]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not any(th.is_alive() for th in threads)
    return batcher.batches, seen


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_batches_depend_on_the_episodes_not_on_timing(seed):
    waves = [["a", "b", "c"], ["d", "e"]]
    turns = {"a": 2, "b": 1, "c": 3, "d": 1, "e": 2}
    rng = random.Random(seed)
    delays = {k: [rng.uniform(0, 0.02) for _ in range(n)] for k, n in turns.items()}
    batches, seen = _run(waves, turns, delays)
    # Each member gets its own prompt's row back, turn by turn.
    assert all(seen[k] == [([k, t], None) for t in range(n)] for k, n in turns.items())
    per_wave = [[b for b in batches if b[0] in w] for w in waves]
    assert per_wave[0] == [["a", "b", "c"], ["a", "c"], ["c"]]
    assert per_wave[1] == [["d", "e"], ["e"]]


def test_a_failed_batch_reaches_every_member():
    batcher = LockstepBatcher([["a", "b"]], max_turns=1)
    errors = []

    def boom(prompts):
        raise RuntimeError("generation failed")

    def member(key):
        try:
            batcher.request(key, key, boom)
        except RuntimeError as exc:
            errors.append((key, str(exc)))

    threads = [threading.Thread(target=member, args=(k,)) for k in "ab"]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert sorted(errors) == [("a", "generation failed"), ("b", "generation failed")]


def test_a_batch_is_split_by_padded_prompt_tokens_in_member_order():
    """`max_tokens`: rows x the longest prompt stays within the budget; a long prompt is not
    padded onto its wave's short ones."""
    batcher = LockstepBatcher([["a", "b", "c", "d", "e"]], max_turns=1, max_tokens=1000,
                              size=len)  # fmt: skip
    lengths = {"a": 300, "b": 300, "c": 900, "d": 200, "e": 250}
    calls = []

    def generate(prompts):
        calls.append([len(p) for p in prompts])
        return [(len(p), None) for p in prompts]

    got = {}

    def member(key):
        got[key] = batcher.request(key, "x" * lengths[key], generate)

    threads = [threading.Thread(target=member, args=(k,)) for k in lengths]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert got == {k: (n, None) for k, n in lengths.items()}
    assert calls == [[300, 300], [900], [200, 250]]
    assert batcher.batches == [["a", "b"], ["c"], ["d", "e"]]
