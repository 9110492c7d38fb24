"""Long episodes within the model's context (agents/loop/context.py's budget rule), with the
packaged base's real tokenizer: a synthetic 24-call history fitted to a budget; a level-4
oracle episode through the real loop and workers under a budget small enough to compact it,
run to the end with the success it has unbudgeted; its SFT rows hold, token for token, the
prompts the loop sends the hf policy at those turns."""

from __future__ import annotations

import json
import os
import threading

import pytest

from agents.policies.hf_policy import DEFAULT_LOCAL_MODEL

TASK = "feature_edits:4:0"  # 6 calls: unbudgeted, its last prompt is ~2,750 tokens
LIMIT = 1900  # over its first prompt (~1,320), under its later ones: the rule must compact
MAX_TOKENS = 8  # the hf policy's new tokens per turn in these tests


@pytest.fixture(scope="module")
def base_dir(base_data_dir):
    from agents import resolve_model

    old = os.environ.get("MODELWRIGHT_DATA_DIR")
    os.environ["MODELWRIGHT_DATA_DIR"] = str(base_data_dir)
    yield resolve_model(DEFAULT_LOCAL_MODEL, probe=False).name
    if old is None:
        os.environ.pop("MODELWRIGHT_DATA_DIR", None)
    else:
        os.environ["MODELWRIGHT_DATA_DIR"] = old


@pytest.fixture(scope="module")
def tokenizer(base_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(base_dir, local_files_only=True)


def _shown(task_id: str) -> list[str]:
    from training.tasks import get_task
    from training.tasks.base import family_tools

    return list(family_tools(get_task(task_id).family))


# -- the rule on a synthetic history ---------------------------------------------------------


def _long_history(steps: int) -> list[dict]:
    """A level-5-like conversation: CAD calls with arguments, JSON outputs, observations with
    a scene listing, one failed call."""
    from agents.loop.config import DEFAULT_SYSTEM
    from agents.loop.context import ContextConfig, observation

    cfg = ContextConfig()
    scene = {"objects": [{"name": f"Part{k}", "location": [0.01 * k, 0, 0],
                          "dimensions": [0.06, 0.03, 0.024]} for k in range(3)]}  # fmt: skip
    h = [{"role": "system", "content": DEFAULT_SYSTEM},
         observation("Goal: make three brackets ... " * 20, None, scene, cfg, -1)]  # fmt: skip
    for i in range(steps):
        args = {"name": f"Part{i % 3}", "diameter": 5, "positions": [[i, 2 * i]], "face": ">Y"}
        call = {"id": f"c{i}", "type": "function",
                "function": {"name": "cad_hole", "arguments": json.dumps(args)}}  # fmt: skip
        h.append({"role": "assistant", "content": None, "tool_calls": [call], "_step": i})
        ok = i != 5
        text = (json.dumps({"name": f"Part{i % 3}", "volume": 16037.65 + i, "area": 9340.98,
                            "bbox_min": [-40.0, -0.017835, -0.017835], "valid": True,
                            "faces": 17 + i, "edges": 45 + i}) * 3
                if ok else "ERROR (validation): no object 'Part9'; the scene has Part0, Part1")  # fmt: skip
        h.append({"role": "tool", "tool_call_id": f"c{i}", "content": text, "_step": i, "_ok": ok})
        words = f"Step {i} done: {int(ok)} call(s) ok, {int(not ok)} failed."
        h.append(observation(words, None, scene, cfg, i))
    return h


def test_the_rule_fits_a_long_history_to_the_real_tokenizer_keeping_every_call(tokenizer):
    from agents.loop.context import ContextConfig, ContextOverflow, ContextWindow
    from agents.policies.hf_policy import counting_budget, encode_prompt, prompt_length
    from tools import catalogue
    from tools.specs import openai_tool

    tools = [openai_tool(s) for s in catalogue() if s["name"] in ("cad_hole", "cad_box")]
    history = _long_history(24)
    window = ContextWindow(ContextConfig())
    whole = counting_budget(tokenizer, 10**6)
    window.view(history, tools, whole)
    unbudgeted = window.tokens
    assert window.moves == 0 and unbudgeted > 4000

    # the shortest form (every older step left out, the newest on one line), and below it
    with pytest.raises(ContextOverflow) as raised:
        window.view(history, tools, counting_budget(tokenizer, 1000))
    shortest = raised.value.tokens
    assert raised.value.limit == 1000 and 1000 < shortest < unbudgeted / 2
    assert "\n" not in str(raised.value)

    for limit in (unbudgeted - 1, (unbudgeted + shortest) // 2, shortest):
        budget = counting_budget(tokenizer, limit)
        view = window.view(history, tools, budget)
        tokens, moves = window.tokens, window.moves
        # it fits, by the policy's own encoding, and needed the rule to
        assert tokens == prompt_length(encode_prompt(tokenizer, view, tools)) <= limit
        assert moves > 0
        # the same history and budget: the same prompt
        assert ContextWindow(ContextConfig()).view(history, tools, budget) == view
        # every call, in order, each followed by its tool message; the goal and system stay
        calls = [c["id"] for m in view if m["role"] == "assistant" for c in m["tool_calls"]]
        assert calls == [f"c{i}" for i in range(24)]
        assert [m["tool_call_id"] for m in view if m["role"] == "tool"] == calls
        assert view[0] == {"role": "system", "content": history[0]["content"]}
        assert view[1]["content"][0]["text"].startswith("Goal: make three brackets")
        # a left-out failure still says it failed (its drop is move 23 + 5 + 1)
        if moves > 23 + 5:
            assert next(m for m in view if m.get("tool_call_id") == "c5")["content"] == "[error]"
    assert moves == 2 * 23 + 1  # at the shortest form's size, every move


# -- a level-4 episode through the real loop -------------------------------------------------


class BudgetOf:
    """Plays the oracle and keeps every prompt the loop hands it, under the prompt budget of
    `hf` (an `HFPolicy`): what the loop sends that policy at each turn of this episode."""

    def __init__(self, hf, sink: dict, lock: threading.Lock) -> None:
        from training.eval.oracle import OraclePolicy

        self.hf, self.sink, self.lock = hf, sink, lock
        self.oracle, self.name = OraclePolicy(), "oracle"
        self.task_id = None

    def reset(self, task_info=None) -> None:
        self.task_id = (task_info or {}).get("task_id")
        self.hf.reset(task_info)  # its shown tools: the task's toolbox
        self.oracle.reset(task_info)

    def prompt_budget(self):
        return self.hf.prompt_budget()

    def act(self, messages, tools):
        with self.lock:
            self.sink.setdefault(self.task_id, []).append(list(messages))
        return self.oracle.act(messages, tools)


@pytest.fixture(scope="module")
def episodes(tokenizer, base_dir):
    """The task's oracle episode three times through the eval harness: unbudgeted; captured
    as demonstrations under a `LIMIT`-token budget; under the hf policy's own budget."""
    from agents.policies.hf_policy import HFPolicyConfig, counting_budget, load_model
    from training.eval.oracle import OraclePolicy
    from training.eval.run_eval import run_episodes
    from training.sft.demos import CapturingPolicy

    shown = _shown(TASK)
    lock = threading.Lock()
    plain = run_episodes([TASK], OraclePolicy, 40)
    demos: list[dict] = []
    budget = counting_budget(tokenizer, LIMIT, shown)
    captured = run_episodes(
        [TASK], lambda: CapturingPolicy(OraclePolicy(), demos, lock, shown, budget), 40)
    model, processor = load_model(HFPolicyConfig(model=DEFAULT_LOCAL_MODEL))
    from agents.policies.hf_policy import HFPolicy

    hf = HFPolicy(HFPolicyConfig(model=DEFAULT_LOCAL_MODEL, max_tokens=MAX_TOKENS,
                                 context_tokens=LIMIT + MAX_TOKENS),
                  model=model, processor=processor)  # fmt: skip
    sent: dict = {}
    under_hf = run_episodes([TASK], lambda: BudgetOf(hf, sent, lock), 40)
    return {"plain": plain, "captured": captured, "demos": demos, "hf": hf,
            "sent": sent[TASK], "under_hf": under_hf, "shown": shown}  # fmt: skip


@pytest.mark.timeout(1200)
def test_a_level4_episode_under_a_small_budget_runs_to_the_end_as_it_does_unbudgeted(episodes,
                                                                                     tokenizer):  # fmt: skip
    from agents.policies.hf_policy import encode_prompt, prompt_length

    plain = episodes["plain"]["episodes"][0]
    for name in ("captured", "under_hf"):
        report = episodes[name]
        ep = report["episodes"][0]
        assert (ep["status"], ep["success"], ep["calls"]) == (plain["status"], True, plain["calls"])
        assert ep["context_limit"] == LIMIT and ep["compacted_turns"] > 0
        assert max(ep["prompt_tokens"]) <= LIMIT and len(ep["prompt_tokens"]) == plain["steps"]
        level = report["levels"]["4"]
        assert level["overflowed"] == 0 and level["max_prompt_tokens"] <= LIMIT
        assert level["mean_calls"] == plain["calls"] and level["success_rate"] == 1.0
    # unbudgeted, the same episode's later prompts are over the limit
    assert plain["context_limit"] is None
    late = episodes["demos"][-1]["conversation"]
    assert prompt_length(encode_prompt(tokenizer, late[0], late[1])) <= LIMIT
    assert episodes["plain"]["levels"]["4"]["overflowed"] == 0


@pytest.mark.timeout(1200)
def test_sft_rows_of_a_compacted_episode_are_the_prompts_the_loop_sends_the_hf_policy(episodes,
                                                                                     tokenizer):  # fmt: skip
    from agents.policies.hf_policy import encode_prompt
    from training.pipeline import _demo_rows
    from training.sft.data import ConversationCollator

    turns = sorted(episodes["demos"], key=lambda d: d["turn"])
    sent = episodes["sent"]
    assert len(turns) == len(sent) == episodes["plain"]["episodes"][0]["steps"]
    # the demonstrations' prompts are, message for message, what the hf policy is sent
    assert [t["conversation"][0] for t in turns] == sent
    rows = _demo_rows(turns, episodes["captured"], "", first_turn=0)
    collator = ConversationCollator(tokenizer)
    for turn, row in zip(turns, rows, strict=True):
        messages, tools, _ = turn["conversation"]
        prompt = encode_prompt(tokenizer, messages, tools)["input_ids"][0].tolist()
        encoded = collator.encode_row(row)
        ids, labels = encoded["input_ids"][0].tolist(), encoded["labels"][0].tolist()
        # the row trains the reply of that turn on exactly the prompt's tokens
        assert ids[: len(prompt)] == prompt and labels[len(prompt)] != -100
        assert all(label == -100 for label in labels[len(prompt) - 2 : len(prompt)])
    # and the hf policy, handed the last (most compacted) turn, runs those very tokens
    messages, tools, _ = turns[-1]["conversation"]
    hf = episodes["hf"]
    hf.reset({"task_id": TASK, "tools": episodes["shown"]})
    reply = hf.act(messages, tools)
    assert reply.tokens.prompt_ids == encode_prompt(tokenizer, messages, tools)["input_ids"][
        0].tolist()  # fmt: skip
    assert len(reply.tokens.prompt_ids) <= LIMIT


def test_the_pipelines_demonstrations_use_the_budget_the_hf_policy_acts_with(base_dir):
    """`demo_budget` (the pipeline's demonstrations) and the hf policy's own: the same limit
    for the same context and new tokens per turn."""
    from transformers import AutoConfig

    from agents.policies.hf_policy import context_length
    from training.pipeline import demo_budget
    from training.train_config import TrainConfig

    config = TrainConfig.model_validate({
        "kind": "sft", "model": {"path": DEFAULT_LOCAL_MODEL}, "tools": ["add_primitive"],
        "sft": {"data": ["unused.parquet"]}, "eval": {"max_tokens": 96}})  # fmt: skip
    budget = demo_budget(config, base_dir)
    context = context_length(AutoConfig.from_pretrained(base_dir, local_files_only=True))
    assert context == 8192 and budget.limit == context - 96
