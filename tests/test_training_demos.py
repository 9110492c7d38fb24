"""Demonstrations are captured one row per turn, each exactly as the agent saw that turn."""

from __future__ import annotations

import json
import threading

from agents.policies.protocol import ToolCall
from agents.policies.simple import PlanPolicy
from training.sft.demos import CapturingPolicy, conversation_row

TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("add_primitive", "render", "delete")
]
FIRST = [
    {"role": "system", "content": "You build 3D models."},
    {
        "role": "user",
        "content": [{"type": "text", "text": 'Goal: add a cube.\nScene: {"objects":[]}'}],
    },
]
CALL = ToolCall(id="c0", name="add_primitive", arguments={"kind": "cube", "name": "Box"})
# The loop's second view: the first listing compacted, a tool result and a newer listing.
SECOND = [
    FIRST[0],
    {
        "role": "user",
        "content": [{"type": "text", "text": "Goal: add a cube.\n[scene listing omitted]"}],
    },
    {"role": "assistant", "content": None, "tool_calls": [CALL.to_openai()]},
    {"role": "tool", "tool_call_id": "c0", "content": '{"created": "Box"}'},
    {"role": "user", "content": [{"type": "text", "text": 'Scene: {"objects":["Box"]}'}]},
]


def test_every_turn_becomes_a_row_with_the_prompt_of_that_turn():
    sink: list[dict] = []
    policy = CapturingPolicy(
        PlanPolicy([[CALL]]), sink, threading.Lock(), ["add_primitive", "delete"]
    )
    policy.reset({"task_id": "primitive_placement:1:0"})
    assert policy.act(FIRST, TOOLS).tool_calls == [CALL]
    assert sink == []  # nothing is kept before the episode ends
    assert policy.act(SECOND, TOOLS).done
    assert [(s["task_id"], s["turn"]) for s in sink] == [
        ("primitive_placement:1:0", 0),
        ("primitive_placement:1:0", 1),
    ]
    first = conversation_row(*sink[0]["conversation"])
    # Turn 0 is trained on the uncompacted first prompt, answered with the call.
    assert first["messages"][1]["content"][0]["text"].endswith('Scene: {"objects":[]}')
    assert [m["role"] for m in first["messages"]] == ["system", "user", "assistant"]
    assert first["messages"][2]["tool_calls"][0]["function"]["name"] == "add_primitive"
    assert '"render"' not in first["tools"]  # only the shown tools
    last = conversation_row(*sink[1]["conversation"])
    assert [m["role"] for m in last["messages"]][-2:] == ["user", "assistant"]
    assert last["messages"][-1]["content"][0]["text"] == "Done."


def test_recovery_demonstrations_show_the_retry_after_the_error_never_the_wrong_call(tmp_path):
    """`demos.recovery_per_family`: real oracle episodes on Blender whose first call names a
    decoy; the rows start at the retry, whose prompt holds the tool's error listing the
    scene's objects, and whose answer is the oracle's own first call."""
    import json
    from pathlib import Path

    import pandas as pd

    from training.pipeline import collect_demos
    from training.sft.demos import DECOYS
    from training.tasks import get_task
    from training.train_config import load_config

    root = Path(__file__).resolve().parent.parent
    config = load_config(root / "configs" / "pipeline-tiny-cpu.yaml")
    demos = config.demos.model_copy(update={"families": ["materials", "scene_editing"],
                                            "per_family": 1, "recovery_per_family": 1})  # fmt: skip
    config = config.model_copy(update={"demos": demos})
    info = collect_demos(config, tmp_path)
    assert info["recovery_kept"] == info["recovery_episodes"] == 2
    rows = pd.read_parquet(tmp_path / "demos.parquet")
    assert len(rows) == info["rows"] == info["recovery_rows"] + 4  # 2 episodes x 2 turns
    retries = rows[rows["episode_id"].str.endswith("#recovery#turn1")]
    assert len(retries) == 2
    assert not rows["episode_id"].str.endswith("#recovery#turn0").any()  # never the wrong call
    for _, row in retries.iterrows():
        messages = list(row["messages"])
        text = json.dumps(messages[:-1], default=str)
        assert "no object named" in text and any(f"'{d}'" in text for d in DECOYS)
        answer = json.dumps(messages[-1], default=str)
        first = get_task(row["task_id"]).oracle[0]
        assert first["tool"] in answer and f'\\"name\\": \\"{first["args"]["name"]}\\"' in answer
        assert not any(f'\\"{d}\\"' in answer for d in DECOYS)


def test_demonstrations_on_two_workers_are_the_rows_of_one(tmp_path):
    """`demos.workers`: oracle episodes run two at a time; the rows (sorted by task and turn)
    are the ones a single worker writes."""
    from pathlib import Path

    import pandas as pd

    from training.pipeline import collect_demos
    from training.train_config import load_config

    root = Path(__file__).resolve().parent.parent
    config = load_config(root / "configs" / "pipeline-tiny-cpu.yaml")
    frames = []
    for workers in (1, 2):
        demos = config.demos.model_copy(update={"families": ["materials", "scene_editing"],
                                                "per_family": 2, "workers": workers})  # fmt: skip
        out = tmp_path / f"w{workers}"
        out.mkdir()
        info = collect_demos(config.model_copy(update={"demos": demos}), out)
        assert info["kept"] == 4
        frames.append(pd.read_parquet(out / "demos.parquet"))
    one, two = frames
    assert list(two["episode_id"]) == list(one["episode_id"])
    assert two["messages"].map(str).tolist() == one["messages"].map(str).tolist()


def test_without_a_list_the_rows_show_each_tasks_toolbox_and_count_it():
    from agents.policies.protocol import PromptBudget

    sink: list[dict] = []
    counted: list[list[str]] = []

    def count(messages, tools):
        counted.append([t["function"]["name"] for t in tools])
        return 1

    policy = CapturingPolicy(PlanPolicy([[CALL]]), sink, threading.Lock(), None,
                             PromptBudget(100, count))  # fmt: skip
    policy.reset({"task_id": "primitive_placement:1:0", "tools": ["add_primitive"]})
    policy.prompt_budget().count(FIRST, TOOLS)
    assert counted == [["add_primitive"]]  # the budget counts the task's toolbox
    policy.act(FIRST, TOOLS)
    policy.act(SECOND, TOOLS)
    row = conversation_row(*sink[0]["conversation"])
    assert [t["function"]["name"] for t in json.loads(row["tools"])] == ["add_primitive"]


def test_whole_plan_demonstrations_write_every_call_in_one_reply_then_close(tmp_path):
    """`demos.calls_per_turn: 0`: real oracle episodes on Blender at level 2, where a request
    lists several objects; each success is two rows: one reply holding all of its plan's calls
    (as `<tool_call>` blocks, in the plan's order), then the closing reply once the scene it
    left is in the prompt. With 1 (the default), one row a call and then the close."""
    from pathlib import Path

    import pandas as pd

    from training.pipeline import collect_demos
    from training.tasks import get_task
    from training.train_config import load_config

    root = Path(__file__).resolve().parent.parent
    config = load_config(root / "configs" / "pipeline-tiny-cpu.yaml")
    per_turn = {}
    for calls_per_turn in (0, 1):
        demos = config.demos.model_copy(update={"families": ["materials"], "levels": [2],
                                                "per_family": 1, "calls_per_turn": calls_per_turn})  # fmt: skip
        out = tmp_path / f"c{calls_per_turn}"
        out.mkdir()
        info = collect_demos(config.model_copy(update={"demos": demos}), out)
        assert info["kept"] == 1
        per_turn[calls_per_turn] = pd.read_parquet(out / "demos.parquet")
    whole, one = per_turn[0], per_turn[1]
    (task_id,) = set(whole["task_id"])
    plan = get_task(task_id).oracle
    assert len(plan) >= 2 and len(one) == len(plan) + 1 and len(whole) == 2
    first = list(whole["messages"].iloc[0])[-1]
    names = [c["function"]["name"] for c in first["tool_calls"]]
    args = [json.loads(c["function"]["arguments"]) for c in first["tool_calls"]]
    assert names == [s["tool"] for s in plan] and args == [s["args"] for s in plan]
    closing = list(whole["messages"].iloc[1])
    assert closing[-1]["content"][0]["text"] == "Done."
    assert sum(1 for m in closing if m["role"] == "tool") == len(plan)  # every result seen


def test_an_oracle_reply_holds_at_most_what_the_loop_accepts():
    from agents.loop.config import LoopConfig
    from training.eval.oracle import OraclePolicy
    from training.tasks import get_task

    task = next(t for t in (get_task(f"recovery:3:{s}") for s in range(40))
                if len(t.oracle) > LoopConfig().max_calls_per_step)  # fmt: skip
    policy = OraclePolicy(calls_per_turn=0)
    policy.reset({"task_id": task.id})
    replies = []
    while (reply := policy.act([], [])).tool_calls:
        replies.append([c.name for c in reply.tool_calls])
    assert [n for r in replies for n in r] == [s["tool"] for s in task.oracle]
    assert max(map(len, replies)) == LoopConfig().max_calls_per_step
    # a reply ends at the call that reads the scene: the calls after it are written once its
    # answer is in (here: the failed first call, then the listing, then the fixes)
    cut = [s["tool"] for s in task.oracle].index("get_scene") + 1
    assert replies[0][-1] == "get_scene" and len(replies[0]) == cut


def test_counting_demonstrations_say_which_step_each_reply_is(tmp_path):
    """`demos.count_steps: true`: real oracle episodes on Blender at level 2. Each call row's
    reply says "Step k of n" (n: the plan's calls, one a turn) before its call, the closing
    row's reply is "Done.", and every row shows the steps said before it in its history."""
    from pathlib import Path

    import pandas as pd

    from training.pipeline import collect_demos
    from training.tasks import get_task
    from training.train_config import load_config

    root = Path(__file__).resolve().parent.parent
    config = load_config(root / "configs" / "pipeline-tiny-cpu.yaml")
    demos = config.demos.model_copy(update={"families": ["materials"], "levels": [2],
                                            "per_family": 1, "count_steps": True})  # fmt: skip
    info = collect_demos(config.model_copy(update={"demos": demos}), tmp_path)
    assert info["kept"] == 1
    rows = pd.read_parquet(tmp_path / "demos.parquet")
    (task_id,) = set(rows["task_id"])
    n = len(get_task(task_id).oracle)
    assert n >= 2 and len(rows) == n + 1

    def text(message: dict) -> str | None:
        content = message.get("content")
        if content is None or isinstance(content, str):
            return content
        return "".join(p.get("text") or "" for p in content) or None

    said = []
    for i in range(len(rows)):
        messages = list(rows["messages"].iloc[i])
        history = [text(m) for m in messages[:-1] if m["role"] == "assistant"]
        assert history == said  # what the earlier replies said is in the prompt
        reply = messages[-1]
        said.append(text(reply))
    assert said == [f"Step {k} of {n}." for k in range(1, n + 1)] + ["Done."]


def test_a_counting_fumble_and_its_retry_are_the_same_step():
    """The recovery demonstration's wrong first call is "Step 1 of n" and so is the retry
    after the error: a failed step is done again, the count does not move on."""
    from training.sft.demos import FumblingOracle
    from training.tasks import get_task

    task = next(t for t in (get_task(f"materials:2:{s}") for s in range(40))
                if "name" in (t.oracle[0].get("args") or {}))  # fmt: skip
    policy = FumblingOracle(count_steps=True)
    policy.reset({"task_id": task.id})
    n = len(task.oracle)
    texts = []
    while (reply := policy.act([], [])).tool_calls:
        texts.append(reply.text)
    assert texts == [f"Step 1 of {n}."] + [f"Step {k} of {n}." for k in range(1, n + 1)]
    assert reply.text == "Done."
    plain = FumblingOracle()
    plain.reset({"task_id": task.id})
    assert plain.act([], []).text is None  # off by default: the replies carry calls only
