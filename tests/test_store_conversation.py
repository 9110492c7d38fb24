"""Property tests of the episode → TRL conversation mapping (pure functions, no disk)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.store.conversation import ALL_ROLES, episode_conversation, inline_images
from agents.store.models import Episode, Step

text = st.text(max_size=20)
args = st.dictionaries(st.text(min_size=1, max_size=5),
                       st.one_of(st.integers(), st.floats(allow_nan=False), text,
                                 st.lists(st.integers(), max_size=3)), max_size=3)


@st.composite
def episodes(draw):
    n = draw(st.integers(0, 8))
    turn, steps = 0, []
    for i in range(n):
        turn += draw(st.sampled_from([0, 1])) if i else 0
        failed = draw(st.booleans())
        steps.append(Step(
            episode_id="e", index=i, turn=turn, at=0.0, tool=draw(st.sampled_from(["a", "b"])),
            args=draw(args), result=None, result_text=None if failed else draw(text),
            error_kind="kernel" if failed else None, error_message="bad" if failed else None,
            duration_ms=0.0, frame=f"frames/{i:06d}.png" if draw(st.booleans()) else None,
            frame_sha256=None, scene_hash=None, model_message=draw(st.one_of(st.none(), text)),
            tokens_in=0, tokens_out=0, latency_ms=0.0, token_ids=None, logprobs=None))
    initial = draw(st.booleans())
    ep = Episode(
        id="e", created_at=0.0, finished_at=1.0, status="finished", task_id=None,
        task_family=None, task_level=None, task_seed=None, task_params=None, source="agent",
        policy=None, model=None, adapter=None, tools_version=None,
        system=draw(st.one_of(st.none(), text)), prompt=draw(text),
        initial_frame="frames/initial.png" if initial else None, initial_frame_sha256=None,
        setup=[], initial_scene_hash=None, final_message=draw(st.one_of(st.none(), text)),
        reward=None, components=None, success=None, n_steps=n, n_errors=0, tool_ms=0.0,
        latency_ms=0.0, tokens_in=0, tokens_out=0, versions={}, tags=[], notes="", artifacts=[])
    return ep, steps


@settings(max_examples=150, deadline=None)
@given(episodes())
def test_conversation_invariants(case):
    ep, steps = case
    messages, images = episode_conversation(ep, steps, lambda rel, sha: rel.encode())
    # one shape for every message and every part: one Arrow type per column
    assert all(set(m) == {"role", "content", "tool_calls"} for m in messages)
    parts = [p for m in messages for p in (m["content"] or [])]
    assert all(set(p) == {"type", "text"} for p in parts)
    # placeholders and images agree, in order
    placeholders = [p for p in parts if p["type"] == "image"]
    expected = ([b"frames/initial.png"] if ep.initial_frame else []) + [
        s.frame.encode() for s in steps if s.frame]
    assert images == expected and len(placeholders) == len(images)
    # every step appears once, as a call (arguments a JSON string) answered by a tool turn
    calls = [c for m in messages if m["role"] == "assistant" for c in (m["tool_calls"] or [])]
    assert [c["function"]["name"] for c in calls] == [s.tool for s in steps]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [s.args for s in steps]
    assert sum(m["role"] == "tool" for m in messages) == len(steps)
    # assistant content is null exactly when it only calls tools and said nothing
    for m in messages:
        if m["role"] == "assistant":
            assert m["content"] is None or m["content"][0]["text"]
            assert m["content"] is not None or m["tool_calls"]
    # inline_images puts each image where its placeholder was
    inlined, left = inline_images(messages, images, ALL_ROLES)
    assert left == []
    assert [p["image"] for m in inlined for p in (m.get("content") or [])
            if p["type"] == "image"] == images
    tool_only, rest = inline_images(messages, images)
    assert rest == ([b"frames/initial.png"] if ep.initial_frame else [])
