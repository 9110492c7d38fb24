"""Stop-on-prose (agents/policies/hf_policy.py `ProseStop`): when the first reply's first N
generated tokens begin no tool call, generation stops there and the episode ends with no call,
counted in tokens, never in time. A real tiny model with a real LoRA adapter taught to answer
one goal in prose and another with a call (tests/support/teach_adapter.py); real workers for
the episode."""

from __future__ import annotations

import pytest

from agents.policies.hf_policy import begins_call

PROSE = ("I am sorry, but I cannot write poems with these tools; they only add, paint, move "
         "and delete objects in the scene, so there is nothing I can do for this request.")
CALL = ('<tool_call>\n{"name": "add_primitive", "arguments": {"kind": "cube", "name": "A", '
        '"dimensions": [1, 1, 1]}}\n</tool_call>')
SHOWN = ["add_primitive", "set_material", "delete", "transform"]
BUDGET = 6


def test_what_begins_a_call():
    names = ["add_primitive"]
    for text in ("<tool_call>", "  \n<tool_call>\n{", '{"name": "x"}', "```json\n", "[{",
                 "add_primitive(kind='cube')", "<think>hm</think>\n<tool_call>"):
        assert begins_call(text, names) is True, text
    for text in ("", "  ", "<tool_", "<", "add_prim", "<think>still thinking"):
        assert begins_call(text, names) is None, text
    for text in ("To add a cube", "Sure! <tool_call>", "<think>x</think> Well", "add_primitives",
                 "<tool call>"):
        assert begins_call(text, names) is False, text


def test_a_counted_reply_begins_a_call_after_its_step_note():
    """A counted agent (`demos.count_steps`) writes "Step k of n." before its call: the note
    is not prose, whatever the token budget; prose after it is."""
    from training.eval.oracle import step_text

    names = ["add_primitive"]
    note = step_text(2, 3)
    for text in (note + "\n<tool_call>", note + " <tool_call>\n{", "Step 10 of 12.\n{"):
        assert begins_call(text, names) is True, text
    for text in ("S", "Step", "Step 1", "Step 1 of", "Step 1 of 3", note, note + "\n<tool"):
        assert begins_call(text, names) is None, text
    for text in ("Step up", "Steps", note + " Sure!", "Step 1 of three."):
        assert begins_call(text, names) is False, text


@pytest.fixture(scope="module")
def taught(tiny_model_dir, worker_pool, tmp_path_factory):
    """(lessons by name, adapter folder): the first turns of two free-form goals as the loop
    shows them, and an adapter on the tiny model that answers one in prose, one with a call."""
    from support.teach_adapter import capture_turns, teach_adapter

    from tools import ToolSession

    lessons = {}
    with ToolSession(worker_pool, deadline_s=120) as session:
        for key, goal, reply in (("prose", "Write me a poem about cubes.", PROSE),
                                 ("call", "Add a cube named A.", CALL)):
            session.reset()
            lessons[key] = capture_turns(session, goal, [reply], SHOWN, max_steps=1)[0]
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a loaded 2-core machine: two threads spin against each other
    try:  # a random tiny model's logits stay nearly flat: a lead of 0.02 is ~1000x fp32 noise
        adapter = teach_adapter(tiny_model_dir, tmp_path_factory.mktemp("prose") / "adapter",
                                list(lessons.values()), steps=600, margin=0.02)
    finally:
        torch.set_num_threads(threads)
    return lessons, adapter


def policy(tiny_model_dir, adapter, **options):
    from agents.policies.hf_policy import HFPolicy, HFPolicyConfig

    return HFPolicy(HFPolicyConfig(model=str(tiny_model_dir), adapter=str(adapter),
                                   max_tokens=96, goal_tools=SHOWN, **options))


def test_a_prose_first_reply_stops_after_the_budget_in_tokens(taught, tiny_model_dir, one_torch_thread):
    lessons, adapter = taught
    prose = lessons["prose"]
    free = policy(tiny_model_dir, adapter)
    whole = free.act(prose.messages, prose.tools)
    assert whole.raw["completion"] == PROSE and whole.tokens_out > 3 * BUDGET  # as taught
    assert not whole.raw["stopped_on_prose"]
    stopping = policy(tiny_model_dir, adapter, prose_stop_tokens=BUDGET)
    cut = stopping.act(prose.messages, prose.tools)
    assert cut.tokens_out == BUDGET and len(cut.tokens.completion_ids) == BUDGET
    assert cut.raw["stopped_on_prose"] and cut.tool_calls == []
    assert PROSE.startswith(cut.raw["completion"]) and cut.raw["no_call"] == "prose"


def test_a_reply_that_begins_a_call_runs_to_its_end(taught, tiny_model_dir, one_torch_thread):
    lessons, adapter = taught
    call = lessons["call"]
    reply = policy(tiny_model_dir, adapter, prose_stop_tokens=BUDGET).act(call.messages, call.tools)
    assert not reply.raw["stopped_on_prose"] and reply.tokens_out > BUDGET
    assert [c.name for c in reply.tool_calls] == ["add_primitive"]
    assert reply.tool_calls[0].arguments == {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}


def test_only_the_first_turn_has_the_budget(taught, tiny_model_dir, one_torch_thread):
    """A closing reply after a call is prose by design: it is never cut."""
    lessons, adapter = taught
    p = policy(tiny_model_dir, adapter, prose_stop_tokens=BUDGET)
    p.reset()
    p.act(lessons["call"].messages, lessons["call"].tools)
    later = p.act(lessons["prose"].messages, lessons["prose"].tools)  # turn 1
    assert later.raw["completion"] == PROSE and not later.raw["stopped_on_prose"]


def test_the_episode_ends_with_no_call_after_the_budget(taught, tiny_model_dir, session,
                                                        one_torch_thread):
    from agents import EpisodeLoop, LoopConfig, StartState

    _, adapter = taught
    session.reset()
    loop = EpisodeLoop(policy(tiny_model_dir, adapter, prose_stop_tokens=BUDGET), session,
                       "Write me a poem about cubes.", setup=StartState((), keep=True),
                       config=LoopConfig(max_steps=20))
    result = loop.run()
    assert result.status == "done" and result.n_calls == 0 and len(result.steps) == 1
    assert result.tokens_out == BUDGET and PROSE.startswith(result.final_message)
