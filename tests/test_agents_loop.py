"""The episode loop on the real tool runtime: feedback, budgets, cancellation, recording."""

from __future__ import annotations

import json
import threading

import pytest

from agents.loop import events as ev
from agents.loop.context import SCENE_DEFAULTS, ContextConfig
from agents.loop.episode_loop import LoopConfig, run_episode
from agents.policies import make_policy
from agents.policies.protocol import PolicyError, PolicyReply, ToolCall
from agents.policies.simple import PlanPolicy, calls_from_plan

CUBE = {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}
# Renders cost ~1 s each on a loaded CPU: tests that do not look at images skip them.
BLIND = LoopConfig(observe="never")


def plan(*steps: tuple[str, dict | str]) -> PlanPolicy:
    return PlanPolicy([[ToolCall(f"c{i}", name, args)] for i, (name, args) in enumerate(steps)])


def test_episode_feeds_results_and_errors_back(session) -> None:
    events: list[ev.Event] = []
    policy = plan(
        ("add_primitive", CUBE),
        ("add_primitive", {"kind": "pyramid", "name": "B", "dimensions": [1, 1, 1]}),  # invalid
        ("make_cube", {"size": 1}),  # hallucinated tool
        ("transform", '{"name": "A", "location": [0, 0,'),  # unparsed arguments
        ("transform", {"name": "A", "location": [0, 0, 1]}),
    )
    result = run_episode(policy, session, "a cube at z=1", subscribers=[events.append])
    assert result.status == "done"
    assert len(result.steps) == 6  # five calls, then the reply without calls
    oks = [c.ok for s in result.steps for c in s.calls]
    assert oks == [True, False, False, False, True]
    kinds = [c.error_kind for s in result.steps for c in s.calls]
    assert kinds == [None, "validation", "validation", "validation", None]
    texts = [c.text for s in result.steps for c in s.calls]
    assert "kind" in texts[1] and "'cube'" in texts[1]
    assert "unknown tool 'make_cube'" in texts[2] and "add_primitive" in texts[2]
    assert "not a JSON object" in texts[3]
    # the scene really changed: A is at z=1
    a = next(o for o in session.scene()["objects"] if o["name"] == "A")
    assert a["location"] == pytest.approx([0, 0, 1])
    # what the checker gets, with the call's place in the session's ledger (how the verifier
    # finds what the trusted side itself saw of it)
    first = dict(result.calls[0])
    seq = first.pop("seq")
    assert first == {"tool": "add_primitive", "args": CUBE, "ok": True, "error_kind": None}
    entry = next(e for e in session.ledger.snapshot()[1] if e.seq == seq)
    assert (entry.tool, entry.outcome) == ("add_primitive", "answered")
    assert result.calls[2]["seq"] is None  # refused by the loop: it never reached the session
    assert result.tool_errors == 3
    # events, in order, as plain data
    order = [e.kind for e in events]
    assert order[0] == ev.EPISODE_STARTED and order[-1] == ev.DONE
    assert order.count(ev.STEP_STARTED) == 6 and order.count(ev.RESULT) == 5
    renders = [e for e in events if e.kind == ev.RENDER]
    assert renders[0].data["step"] == -1 and renders[0].data["png"][:4] == b"\x89PNG"
    # renders only after steps that changed the scene: start, step 0, step 4
    assert [e.data["step"] for e in renders] == [-1, 0, 4]
    done = events[-1].data
    assert done["status"] == "done" and done["steps"] == 6


def test_model_sees_tool_messages_and_observations(session) -> None:
    seen: list[list[dict]] = []

    class Spy(PlanPolicy):
        def act(self, messages, tools):
            seen.append(messages)
            return super().act(messages, tools)

    spy = Spy(calls_from_plan([{"tool": "add_primitive", "args": CUBE}]))
    run_episode(spy, session, "a cube")
    first, second = seen
    assert first[0]["role"] == "system"
    parts = first[1]["content"]
    assert parts[0]["text"] == "Goal: a cube"
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert parts[2]["text"].startswith("Scene: ")
    assistant, tool, obs = second[2:5]
    assert assistant["tool_calls"][0]["function"]["name"] == "add_primitive"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == CUBE
    assert tool["role"] == "tool" and tool["tool_call_id"] == assistant["tool_calls"][0]["id"]
    assert '"A"' in obs["content"][2]["text"]
    assert all(not k.startswith("_") for m in second for k in m)


def test_repeated_failing_call_is_noticed_and_ends_the_episode(session) -> None:
    bad = ("transform", {"name": "Nope", "location": [0, 0, 1]})
    config = LoopConfig(stuck_after=4, observe="never")
    result = run_episode(plan(*[bad] * 10), session, "move Nope", config=config)
    assert result.status == "stuck"
    assert len(result.steps) == 4
    texts = [s.calls[0].text for s in result.steps]
    assert "failed 2 times" in texts[1] and "failed 4 times" in texts[3]
    assert "times" not in texts[0]
    assert result.repeated_failures == 3


def test_budget_ends_the_episode(session) -> None:
    steps = [("add_primitive", {**CUBE, "name": f"C{i}"}) for i in range(5)]
    result = run_episode(
        plan(*steps), session, "cubes", config=LoopConfig(max_steps=3, observe="never")
    )
    assert result.status == "budget"
    assert len(result.steps) == 3
    assert sorted(o["name"] for o in session.scene()["objects"]) == ["C0", "C1", "C2"]


def test_recall_step_returns_compacted_output(session) -> None:
    policy = plan(
        ("add_primitive", CUBE),
        ("get_scene", {}),
        ("recall_step", {"index": 0}),
        ("recall_step", {"index": 99}),
    )
    config = LoopConfig(
        observe="never", context=ContextConfig(keep_full_outputs=1, compact_chars=20)
    )
    seen: list[list[dict]] = []

    class Spy(PlanPolicy):
        def act(self, messages, tools):
            seen.append(messages)
            return super().act(messages, tools)

    spy = Spy(policy.steps)
    result = run_episode(spy, session, "a cube", config=config)
    full = result.steps[0].calls[0].text
    recalled = result.steps[2].calls[0]
    assert recalled.ok and full in recalled.text
    assert not result.steps[3].calls[0].ok and "no step 99" in result.steps[3].calls[0].text
    # in the last prompt the first output is shortened and names recall_step
    tool_msgs = [m for m in seen[-1] if m["role"] == "tool"]
    assert "recall_step" in tool_msgs[0]["content"] and len(tool_msgs[0]["content"]) < len(full)


def test_cancel_while_the_policy_thinks(session) -> None:
    release = threading.Event()

    class Slow:
        name = "slow"

        def reset(self, task_info=None):
            pass

        def act(self, messages, tools):
            cancel.set()  # the user cancels while the policy is still thinking
            release.wait(120)  # a loop that waits for the answer sees it after 120 s
            answered.set()
            return PolicyReply(text=None, tool_calls=[ToolCall("x", "add_primitive", CUBE)])

    cancel, answered = threading.Event(), threading.Event()
    result = run_episode(Slow(), session, "a cube", cancel=cancel, config=BLIND)
    assert not answered.is_set()  # returned without waiting for the policy's answer
    release.set()
    assert result.status == "cancelled"
    assert session.scene()["objects"] == []


def test_cancel_between_steps_from_a_subscriber(session) -> None:
    cancel = threading.Event()

    def stop_after_first_result(event: ev.Event) -> None:
        if event.kind == ev.RESULT:
            cancel.set()

    steps = [("add_primitive", {**CUBE, "name": f"C{i}"}) for i in range(3)]
    result = run_episode(
        plan(*steps),
        session,
        "cubes",
        cancel=cancel,
        subscribers=[stop_after_first_result],
        config=BLIND,
    )
    assert result.status == "cancelled"
    assert [o["name"] for o in session.scene()["objects"]] == ["C0"]


def test_fatal_policy_error_ends_the_episode(session) -> None:
    class Down:
        name = "down"

        def reset(self, task_info=None):
            pass

        def act(self, messages, tools):
            raise PolicyError("cannot reach the server at http://127.0.0.1:9/v1")

    result = run_episode(Down(), session, "a cube", config=BLIND)
    assert result.status == "fatal" and "cannot reach" in result.error


def test_subscriber_errors_do_not_break_the_episode(session) -> None:
    def broken(event: ev.Event) -> None:
        raise RuntimeError("a broken view")

    result = run_episode(
        plan(("add_primitive", CUBE)), session, "a cube", subscribers=[broken], config=BLIND
    )
    assert result.status == "done" and result.tool_errors == 0


def test_setup_and_checker_are_used(session) -> None:
    def setup(s) -> None:
        s.call("add_primitive", {**CUBE, "name": "Base"})

    def checker(s, calls):
        names = [o["name"] for o in s.scene()["objects"]]

        class Verdict:
            total = 1.0 if names == ["A", "Base"] else 0.0
            components = {"constraints": total}
            success = total == 1.0

        return Verdict()

    result = run_episode(
        plan(("add_primitive", CUBE)), session, "add A", setup=setup, checker=checker, config=BLIND
    )
    assert result.success is True and result.reward == 1.0
    assert result.components == {"constraints": 1.0}


def test_checker_every_step_stops_on_success(session) -> None:
    import time

    checks: list[int] = []

    def checker(s, calls):
        checks.append(len(calls))
        time.sleep(0.02)  # the verifier's time is the checker's: result.check_ms counts it

        class Verdict:
            success = any(o["name"] == "A" for o in s.scene()["objects"])
            total = float(success)
            components = {}

        return Verdict()

    steps = [("add_primitive", CUBE), ("add_primitive", {**CUBE, "name": "B"})]
    result = run_episode(
        plan(*steps),
        session,
        "a cube",
        checker=checker,
        config=LoopConfig(check_every_step=True, observe="never"),
    )
    assert result.status == "success" and len(result.steps) == 1
    # Every verdict's time is in check_ms (GRPO's step split reports it as time/reward_s).
    assert checks and result.check_ms >= 20 * len(checks)
    assert result.start_ms > 0


def test_episode_is_recorded(session, tmp_path) -> None:
    from agents.store import Store

    store = Store(tmp_path / "data")

    def setup(s) -> None:
        s.call("add_primitive", {**CUBE, "name": "Base"})

    def recorder_factory(**meta):
        return store.begin_episode(task_id="demo:1:0", source="agent", **meta)

    policy = plan(("add_primitive", CUBE), ("make_cube", {}))
    result = run_episode(policy, session, "add A", setup=setup, recorder_factory=recorder_factory)
    assert result.episode_id
    episode = store.episode(result.episode_id)
    assert episode.status == "finished"
    assert episode.prompt == "add A" and episode.policy == "plan"
    assert episode.setup == [{"tool": "add_primitive", "args": {**CUBE, "name": "Base"}}]
    assert episode.final_message == "Done."
    steps = store.steps(result.episode_id)
    assert [(s.tool, s.ok) for s in steps] == [("add_primitive", True), ("make_cube", False)]
    assert steps[0].frame is not None and store.step_frame(steps[0])[:4] == b"\x89PNG"
    assert steps[1].error_kind == "validation"
    assert store.initial_frame(episode)[:4] == b"\x89PNG"
    # the final scene is kept beside the episode, and reloads with the cubes in it
    assert sorted(episode.artifacts) == ["final.blend", "final.glb"]
    import trimesh

    folder = store.episode_dir(result.episode_id) / "artifacts"
    glb = trimesh.load(folder / "final.glb", force="scene")
    assert len(glb.geometry) == 2


def test_script_policy_file(session, tmp_path) -> None:
    script = tmp_path / "steps.jsonl"
    script.write_text(
        json.dumps({"tool": "add_primitive", "args": CUBE})
        + "\n# a comment\n"
        + json.dumps(
            {
                "tool_calls": [
                    {"name": "transform", "arguments": {"name": "A", "location": [1, 0, 0]}}
                ]
            }
        )
        + "\n"
    )
    result = run_episode(make_policy(f"script:{script}"), session, "a cube at x=1", config=BLIND)
    assert result.status == "done" and result.tool_errors == 0 and result.n_calls == 2
    assert session.scene()["objects"][0]["location"] == pytest.approx([1, 0, 0])


class PageCounter:
    """The real session, noting the `get_scene` calls; reading the whole scene is a failure
    (at 10 000 objects it costs ~1 s a turn; the model is shown one page)."""

    def __init__(self, session) -> None:
        self.session, self.pages = session, []

    def __getattr__(self, name):
        return getattr(self.session, name)

    def call(self, tool, args=None):
        if tool == "get_scene":
            self.pages.append(dict(args or {}))
        return self.session.call(tool, args)

    def scene(self):
        raise AssertionError("the loop read every page of the scene for an observation")


def test_an_observation_reads_one_page_of_a_large_scene(session) -> None:
    lines = []
    for i in range(60):  # 60 flat quads named q00..q59, one import
        lines += [f"o q{i:02d}"] + [f"v {i + dx} {dy} 0" for dx, dy in ((0, 0), (1, 0), (1, 1))]
        lines.append(f"f {3 * i + 1} {3 * i + 2} {3 * i + 3}")
    (session.workspace / "many.obj").write_text("\n".join(lines) + "\n")
    seen: list[list[dict]] = []

    class Spy(PlanPolicy):
        def act(self, messages, tools):
            seen.append(messages)
            return super().act(messages, tools)

    spy = Spy(calls_from_plan([{"tool": "transform", "args": {"name": "q05", "location": [0, 0, 2]}}]))
    counted = PageCounter(session)
    config = LoopConfig(context=ContextConfig(scene_objects=40))
    result = run_episode(spy, counted, "lift q05",
                         setup=lambda s: s.call("import_file", {"path": "many.obj"}), config=config)
    assert result.status == "done" and result.steps[0].calls[0].ok
    assert counted.pages == [{"limit": 40}, {"limit": 40}]  # the start, then after the change
    listing = seen[1][-1]["content"][-1]["text"].removeprefix("Scene: ")
    scene = json.loads(listing.removeprefix(SCENE_DEFAULTS))
    assert len(scene["objects"]) == 40 and scene["more_objects"] == 20
    assert scene["changed"] == ["q05"]
