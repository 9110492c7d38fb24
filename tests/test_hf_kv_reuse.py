"""KV-cache reuse across turns in the `hf` policy (issue #48): a turn starts from the cached
prefix its conversation's previous turn left and runs only the new tokens, and generates
exactly what a fresh forward of the whole prompt does.

Real models, no mocks: a tiny random Llama built from a config (with the tiny model's
tokenizer and tool template), and the packaged base with the shipped adapter on a scripted
level-3-style conversation. Seeded weights, greedy decoding, no timing."""

from __future__ import annotations

import json

import pytest

from agents.policies.hf_policy import DEFAULT_LOCAL_MODEL, HFPolicy, KVStore, common_prefix

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TOOLS = [
    {"type": "function", "function": {
        "name": "add_primitive", "description": "Add a primitive object to the scene.",
        "parameters": {"type": "object", "properties": {
            "kind": {"type": "string", "enum": ["cube", "sphere", "cylinder"]},
            "name": {"type": "string"},
            "location": {"type": "array", "items": {"type": "number"}}},
            "required": ["kind"]}}},
    {"type": "function", "function": {
        "name": "transform", "description": "Move, rotate or scale an object.",
        "parameters": {"type": "object", "properties": {
            "name": {"type": "string"}, "location": {"type": "array", "items": {"type": "number"}}},
            "required": ["name"]}}},
]  # fmt: skip

RESULTS = [
    'ok: added cube "A" at [0, 0, 0.5]. Scene: A cube 1x1x1 at [0, 0, 0.5]',
    'ok: moved "A" to [1, 0, 0.5]. Scene: A cube 1x1x1 at [1, 0, 0.5]',
    'ok: added sphere "B" at [0, 2, 0.5]. Scene: A cube at [1, 0, 0.5]; B sphere r 0.5',
    "error: no object named 'C'; the scene has A, B",
]


def _converse(policy: HFPolicy, turns: int, goal: str = "Place a cube A, then a sphere B "
              "two metres behind it, then move A one metre along +X.") -> list:  # fmt: skip
    """A scripted episode: each reply goes back into the conversation as the loop writes it
    (its parsed calls, or its text), followed by a scripted tool result."""
    policy.reset({"task_id": "scripted:3:0"})
    messages = [{"role": "system", "content": "You build 3D models by calling tools."},
                {"role": "user", "content": f"Goal: {goal}"}]  # fmt: skip
    replies = []
    for k in range(turns):
        reply = policy.act(messages, TOOLS)
        replies.append(reply)
        calls = [c.to_openai() for c in reply.tool_calls]
        if calls:
            messages.append({"role": "assistant", "content": reply.text, "tool_calls": calls})
            for call in calls:
                messages.append({"role": "tool", "tool_call_id": call["id"],
                                 "content": RESULTS[k % len(RESULTS)]})  # fmt: skip
        else:
            messages.append({"role": "assistant", "content": reply.raw["completion"]})
            messages.append({"role": "user", "content": RESULTS[k % len(RESULTS)]})
    return replies


def _same_turns(off: list, on: list) -> None:
    for k, (a, b) in enumerate(zip(off, on, strict=True)):
        assert a.tokens.prompt_ids == b.tokens.prompt_ids, f"turn {k}: prompts differ"
        assert a.tokens.completion_ids == b.tokens.completion_ids, f"turn {k}: tokens differ"
        assert len(a.tokens.logprobs) == len(b.tokens.logprobs)
        worst = max((abs(x - y) for x, y in zip(a.tokens.logprobs, b.tokens.logprobs,
                                                strict=True)), default=0.0)  # fmt: skip
        assert worst < 1e-4, f"turn {k}: log-probs differ by {worst}"


# --- the store on its own (no model) ------------------------------------------------------------


def _cache(n: int, layers: int = 2):
    import torch
    from transformers.cache_utils import DynamicCache

    g = torch.Generator().manual_seed(n)
    return DynamicCache([(torch.randn(1, 2, n, 4, generator=g), torch.randn(1, 2, n, 4, generator=g))
                         for _ in range(layers)])  # fmt: skip


def test_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix([1, 2], [1, 2]) == 2


def test_store_hands_back_the_longest_prefix_and_leaves_a_token_to_run():
    me, other = object(), object()
    store = KVStore(capacity=2, min_prefix=2)
    ids = list(range(40))
    full = _cache(30)
    keys = full.layers[0].keys.clone()
    store.put(other, ids[:30], full)
    # another conversation's entry is copied, cut to the shared prefix, and stays
    cache, n = store.take(me, ids[:20] + [999])
    assert n == 20 and cache.get_seq_length() == 20 and len(store) == 1
    assert (cache.layers[0].keys == keys[..., :20, :]).all()
    assert store._entries[0]["cache"].get_seq_length() == 30
    # the whole prompt cached: the last token still runs
    cache, n = store.take(me, ids[:10])
    assert n == 9
    # too short a prefix: a fresh forward
    assert store.take(me, [0, 7, 7]) == (None, 0)
    # its own entry is handed over (cut in place) and superseded
    store.put(me, ids[:35], _cache(35))
    cache, n = store.take(me, ids[:33] + [5])
    assert n == 33 and cache.get_seq_length() == 33 and len(store) == 1
    # at most `capacity` entries, least recently used out first
    store.put(me, ids, _cache(40))
    store.put(object(), [7] * 10, _cache(10))
    assert len(store) == 2 and store._entries[0]["owner"] == id(me)


def test_a_cache_that_cannot_be_cut_is_not_kept():
    from transformers.cache_utils import DynamicCache

    store = KVStore()
    store.put(object(), [1, 2, 3], DynamicCache())  # no layers filled
    store.put(object(), [1, 2, 3], None)
    assert len(store) == 0


# --- a tiny random text-only model --------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_text(tiny_text_dir):
    """A random 2-layer Llama (float32) over the tiny model's tokenizer and tool template."""
    from transformers import AutoTokenizer, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_text_dir), local_files_only=True)
    model = LlamaForCausalLM.from_pretrained(str(tiny_text_dir), dtype="float32").eval()
    return model, tokenizer


def _tiny_policy(tiny_text, **options) -> HFPolicy:
    model, tokenizer = tiny_text
    return HFPolicy.from_loaded(model, tokenizer, model="tiny-llama", max_tokens=24, **options)


def test_tiny_model_turns_are_the_same_with_reuse_and_run_fewer_prompt_tokens(tiny_text):
    off = _converse(_tiny_policy(tiny_text, reuse_kv=False), 4)
    policy = _tiny_policy(tiny_text)
    on = _converse(policy, 4)
    _same_turns(off, on)
    full = [len(r.tokens.prompt_ids) for r in on]
    assert [r.tokens.prompt_encoded for r in off] == full
    ran = [r.tokens.prompt_encoded for r in on]
    assert ran[0] == full[0]  # nothing cached yet
    assert all(0 < n < f for n, f in zip(ran[1:], full[1:], strict=True)), (ran, full)
    assert policy.prompt_encoded == sum(ran) and policy.prompt_tokens == sum(full)
    assert on[1].raw["prompt_encoded"] == ran[1]


def test_a_shared_store_gives_the_next_episode_the_system_and_tools_prefix(tiny_text):
    store = KVStore(capacity=2)
    first, second = _tiny_policy(tiny_text), _tiny_policy(tiny_text)
    first.share_kv(store)
    second.share_kv(store)
    _converse(first, 2)
    other_goal = "Add a cylinder C on top of a cube A."
    replies = _converse(second, 2, goal=other_goal)
    fresh = _converse(_tiny_policy(tiny_text, reuse_kv=False), 2, goal=other_goal)
    _same_turns(fresh, replies)
    assert replies[0].tokens.prompt_encoded < len(replies[0].tokens.prompt_ids) / 2


def test_sampled_turns_and_reuse_off_run_the_whole_prompt(tiny_text):
    """RL rollouts sample, and training keeps their log-probs: those come from whole prompts."""
    for options in ({"temperature": 1.0, "seed": 3}, {"reuse_kv": False},
                    {"score_temperature": 1.0}):  # fmt: skip
        replies = _converse(_tiny_policy(tiny_text, **options), 3)
        assert all(r.tokens.prompt_encoded == len(r.tokens.prompt_ids) for r in replies), options


def test_a_bfloat16_model_runs_the_whole_prompt(tiny_text):
    """In bf16 a cached prefix's log-probs drift (3e-2 on the packaged base): no reuse."""
    import copy

    import torch

    model, tokenizer = tiny_text
    half = copy.deepcopy(model).to(torch.bfloat16)
    policy = HFPolicy.from_loaded(half, tokenizer, model="tiny-llama", max_tokens=8)
    replies = _converse(policy, 2)
    assert all(r.tokens.prompt_encoded == len(r.tokens.prompt_ids) for r in replies)


def test_a_vision_model_runs_the_whole_prompt(tiny_model_dir):
    from agents.policies import make_policy

    policy = make_policy("hf", model=str(tiny_model_dir), max_tokens=8, device="cpu")
    replies = _converse(policy, 2)
    assert all(r.tokens.prompt_encoded == len(r.tokens.prompt_ids) for r in replies)


# --- the packaged base with the shipped adapter -------------------------------------------------


@pytest.fixture(scope="module")
def base_agent(base_data_env):
    """The Local agent as `modelwright eval --policy hf` loads it: the shipped adapter on the
    packaged base, in the default dtype."""
    from agents.policies.hf_policy import make_hf

    return make_hf(max_tokens=64)


def test_packaged_base_with_the_shipped_adapter_gives_the_same_calls_with_reuse(base_agent):
    from agents.policies.hf_policy import HFPolicyConfig

    assert base_agent.config.adapter and DEFAULT_LOCAL_MODEL in base_agent.config.model

    def policy(reuse: bool) -> HFPolicy:
        options = {**base_agent.config.__dict__, "reuse_kv": reuse}
        return HFPolicy(HFPolicyConfig(**options), model=base_agent.model,
                        processor=base_agent.processor)  # fmt: skip

    off = _converse(policy(False), 3)
    on = _converse(policy(True), 3)
    _same_turns(off, on)
    assert any(r.tool_calls for r in on), [r.raw["completion"] for r in on]
    assert [json.dumps([c.to_openai() for c in r.tool_calls]) for r in off] == [
        json.dumps([c.to_openai() for c in r.tool_calls]) for r in on]
    full = sum(len(r.tokens.prompt_ids) for r in on)
    ran = sum(r.tokens.prompt_encoded for r in on)
    assert ran < full / 2, (ran, full)
