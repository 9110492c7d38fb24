"""Bounded context: old images and outputs are compacted, older steps fitted to the budget, events
delivered."""

from __future__ import annotations

import json

from agents.loop import events as ev
from agents.loop.context import (
    RECALL_TOOL,
    SCENE_DEFAULTS,
    SCENE_PREFIX,
    ContextConfig,
    ContextOverflow,
    ContextWindow,
    PromptBudget,
    compact_scene,
    estimate_tokens,
    fit,
    observation,
)

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64


def history(steps: int, output_chars: int = 600, png: bytes | None = PNG) -> list[dict]:
    """A conversation of `steps` steps, each observed with a montage (`png` None: a montage
    not rendered, as `observe="text"` marks it)."""
    cfg = ContextConfig()
    msgs = [
        {"role": "system", "content": "sys"},
        observation("Goal: g", png, {"objects": []}, cfg, -1, render_skipped=png is None),
    ]
    for i in range(steps):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "get_scene", "arguments": "{}"},
        }
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call], "_step": i})
        msgs.append(
            {
                "role": "tool",
                "tool_call_id": f"c{i}",
                "content": f"{i}:" + "x" * output_chars,
                "_step": i,
            }
        )
        msgs.append(observation(f"Step {i} done", png, {"objects": []}, cfg, i,
                                render_skipped=png is None))
    return msgs


def images(messages: list[dict]) -> int:
    return sum(
        1
        for m in messages
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if p["type"] == "image_url"
    )


def test_keeps_last_k_images_and_names_the_rest() -> None:
    view = ContextWindow(ContextConfig(keep_images=2)).view(history(5))
    assert images(view) == 2
    texts = [
        p["text"]
        for m in view
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if p["type"] == "text"
    ]
    assert "[render of the start omitted]" in texts
    assert "[render of step 2 omitted]" in texts
    # the newest two observations keep their images
    assert view[-1]["content"][1]["type"] == "image_url"


def test_a_montage_not_rendered_compacts_to_the_same_text_as_a_rendered_one() -> None:
    """What a text model reads (its chat format drops images) is the same whether the loop
    rendered its montages or only marked where they would be; the notes of older ones too."""
    from agents.policies.chat_format import hermes_messages

    window = ContextWindow(ContextConfig(keep_images=2))
    rendered, marked = window.view(history(5)), window.view(history(5, png=None))
    assert images(marked) == 0 and images(rendered) == 2
    as_text = [hermes_messages(v, None, text_only=True) for v in (rendered, marked)]
    assert as_text[0] == as_text[1]
    assert "[render of step 2 omitted]" in str(as_text[1])
    assert "[render of step 3 omitted]" not in str(as_text[1])  # kept (newest two) in `rendered`


def test_only_the_newest_scene_listing_stays() -> None:
    view = ContextWindow(ContextConfig(keep_scenes=1)).view(history(3))
    scenes = [
        p["text"]
        for m in view
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if p["type"] == "text" and ("Scene:" in p["text"] or "scene listing" in p["text"])
    ]
    assert len(scenes) == 4 and scenes[-1].startswith("Scene: ")
    assert all(s == "[scene listing omitted: a newer one follows]" for s in scenes[:-1])


def test_compacts_old_outputs_with_a_recall_hint() -> None:
    cfg = ContextConfig(keep_full_outputs=2, compact_chars=50)
    view = ContextWindow(cfg).view(history(4))
    tools = [m["content"] for m in view if m["role"] == "tool"]
    assert [len(t) > 600 for t in tools] == [False, False, True, True]
    assert tools[0].startswith("0:") and f'{RECALL_TOOL} {{"index": 0}}' in tools[0]
    assert '{"index": 1}' in tools[1]


def test_view_does_not_change_history_and_strips_private_keys() -> None:
    h = history(3)
    before = repr(h)
    view = ContextWindow(ContextConfig(keep_images=1, keep_full_outputs=1, compact_chars=10)).view(
        h
    )
    assert repr(h) == before
    assert all(not k.startswith("_") for m in view for k in m)


def test_over_the_estimated_budget_older_steps_go_to_one_line_then_out_every_call_kept() -> None:
    cfg = ContextConfig(token_budget=1100, image_tokens=256, max_output_chars=4000)
    h = history(12, output_chars=2000)
    window = ContextWindow(cfg)
    view = window.view(h)
    assert window.tokens == estimate_tokens(view, None, cfg) <= cfg.token_budget
    assert window.moves > 0
    assert view[0]["role"] == "system" and view[1]["content"][0]["text"] == "Goal: g"
    # every call stays, each with its tool message, in order
    ids = [tc["id"] for m in view if m["role"] == "assistant" for tc in m["tool_calls"]]
    assert ids == [f"c{i}" for i in range(12)]
    assert [m["tool_call_id"] for m in view if m["role"] == "tool"] == ids
    outputs = [m["content"] for m in view if m["role"] == "tool"]
    # the oldest steps' outputs are left out (an [ok] mark), the newest step's is whole
    assert outputs[0] == "[ok]" and outputs[-1].startswith("11:") and len(outputs[-1]) > 2000
    assert all(len(o) <= cfg.line_chars + 4 or o is outputs[-1] for o in outputs)
    # the newest observation keeps its render and scene listing
    assert images(view) == 1 and view[-1]["content"][-1]["text"].startswith(SCENE_PREFIX)


def test_the_budget_rule_is_the_shortest_prefix_of_its_moves_that_fits() -> None:
    """Step by step: each tighter budget compacts at least as much as a looser one, the
    same history and budget give the same prompt, and nothing fits below the shortest form."""
    cfg = ContextConfig(image_tokens=0)
    h = history(8, output_chars=300)

    def fitted(limit: int):
        budget = PromptBudget(limit, lambda m, t: estimate_tokens(m, t, cfg))
        return fit(ContextWindow(cfg).compacted(h), None, budget, cfg.line_chars)

    whole = fitted(10**9)
    assert whole.moves == 0
    moves, last = [], None
    for limit in range(whole.tokens, 0, -40):
        try:
            f = fitted(limit)
        except ContextOverflow as exc:
            assert exc.limit == limit and exc.tokens > limit and "context full" in str(exc)
            break
        assert f.tokens <= limit and f == fitted(limit)
        moves.append(f.moves)
        last = f
    else:
        raise AssertionError("no budget was too small")
    assert moves == sorted(moves) and moves[-1] == 2 * 7 + 1  # every move, at the end
    calls = [m for m in last.messages if m["role"] == "assistant"]
    assert len(calls) == 8 and [m["role"] for m in last.messages].count("tool") == 8
    # the shortest form: the newest step on one line, no listing, no render
    assert last.messages[-1]["content"] == "Step 7 done"


def test_a_first_prompt_over_the_budget_is_an_overflow() -> None:
    cfg = ContextConfig()
    budget = PromptBudget(5, lambda m, t: estimate_tokens(m, t, cfg))
    try:
        ContextWindow(cfg).view(history(0), budget=budget)
    except ContextOverflow as exc:
        assert exc.limit == 5
    else:
        raise AssertionError("an overflow was expected")


def test_under_budget_nothing_is_folded() -> None:
    view = ContextWindow(ContextConfig()).view(history(3))
    assert len(view) == len(history(3))


def test_estimate_counts_images_and_text() -> None:
    cfg = ContextConfig(image_tokens=100)
    one = observation("x" * 400, PNG, None, cfg, 0)
    assert estimate_tokens([one], None, cfg) == (400 + 8) // 4 + 100


def test_compact_scene_is_short_and_rounded() -> None:
    obj = {
        "name": "A",
        "type": "mesh",
        "source": "blender",
        "location": [0.123456789, 0, 1],
        "rotation_deg": [0, 0, 0],
        "dimensions": [1, 1, 1],
        "material": {"color": "#ff0000", "metallic": 0, "roughness": 0.5},
        "vertices": 8,
        "bbox_min": [0, 0, 0],
    }
    text = compact_scene({"objects": [obj] * 3}, limit=2)
    assert '"location":[0.1235,0.0,1.0]' in text and '"color":"#ff0000"' in text
    assert "bbox_min" not in text and '"more_objects":1' in text


def test_event_bus_isolates_broken_subscribers() -> None:
    got: list[ev.Event] = []

    def broken(event: ev.Event) -> None:
        raise ValueError("boom")

    bus = ev.EventBus([broken, got.append])
    unsubscribe = bus.subscribe(lambda e: got.append(e))
    bus.emit(ev.STEP_STARTED, step=1)
    assert [e.kind for e in got] == [ev.STEP_STARTED, ev.STEP_STARTED]
    unsubscribe()
    bus.emit(ev.DONE, status="done")
    assert len(got) == 3 and got[-1].data == {"status": "done"}


def test_compact_scene_leaves_out_defaults_and_says_so() -> None:
    """A Blender mesh with no rotation lists only what differs; the observation names the
    defaults once, and a CadQuery part or a rotated object still shows them."""
    plain = {"name": "A", "type": "mesh", "source": "blender", "location": [1, 2, 3],
             "rotation_deg": [0, 0, 0], "dimensions": [1, 1, 1]}  # fmt: skip
    other = dict(plain, name="B", type="empty", source="cadquery", rotation_deg=[0, 0, 90])
    rows = json.loads(compact_scene({"objects": [plain, other]}, limit=5))["objects"]
    assert rows[0] == {"name": "A", "location": [1.0, 2.0, 3.0], "dimensions": [1.0, 1.0, 1.0]}
    assert rows[1]["type"] == "empty" and rows[1]["source"] == "cadquery"
    assert rows[1]["rotation_deg"] == [0.0, 0.0, 90.0]
    msg = observation("go", None, {"objects": [plain]}, ContextConfig(), 0)
    assert msg["content"][-1]["text"].startswith(SCENE_PREFIX + SCENE_DEFAULTS)
    empty = observation("go", None, {"objects": []}, ContextConfig(), 0)
    assert empty["content"][-1]["text"] == SCENE_PREFIX + '{"objects":[]}'
