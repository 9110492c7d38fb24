"""GRPO on the product's episode loop, with real TRL, PEFT, the tiny model and sandboxed workers.

Must-shows of issue 12: a rollout is a `run`/`eval` episode (same messages, images and token
ids per turn); the ids TRL optimises are the ids the policy generated; a rollout that hits the
loop's repeat/stuck handling and context compaction trains on those turns as shown; no private
TRL member is used anywhere in the project.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import pytest

from tools import ToolSession
from training.rl.curriculum import Curriculum
from training.train_config import CurriculumSpec

TOOLS = ["add_primitive"]
ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_no_private_trl_member_is_used_anywhere():
    """Every `_name` TRL's trainers define, looked for as an attribute access in our code."""
    import trl

    trl_dir = Path(trl.__file__).parent
    private = set()
    for src in [*trl_dir.glob("trainer/*.py"), *trl_dir.glob("experimental/async_grpo/*.py")]:
        text = src.read_text()
        private |= set(re.findall(r"self\.(_[a-z]\w*)", text))
        private |= set(re.findall(r"def (_[a-z]\w*)", text))
    assert {"_generate", "_metrics", "_env_tools"} <= private  # the search finds them
    grpo_private = set(re.findall(r"def (_[a-z]\w*)", (trl_dir / "trainer/grpo_trainer.py").read_text()))
    assert "_generate_and_score_completions" in grpo_private
    ours = [p for d in ("agents", "training", "studio", "tools", "benchmarks", "scripts")
            for p in (ROOT / d).rglob("*.py")]  # fmt: skip
    offenders = []
    for path in ours:
        text = path.read_text()
        # A method of ours named like a private one of GRPOTrainer's reads as an override.
        for name in re.findall(r"\n[ \t]+def (_[a-z]\w*)", text):
            if name in grpo_private:
                offenders.append(f"{path.relative_to(ROOT)}: method {name}")
        if "trl" not in text and "trainer" not in text:
            continue
        for name in re.findall(r"(?:trainer|super\(\))\.(_[a-z]\w*)", text):
            offenders.append(f"{path.relative_to(ROOT)}: {name}")
        if re.search(r"class \w+\((?:trl\.)?\w*GRPOTrainer\)", text):
            offenders.append(f"{path.relative_to(ROOT)}: subclasses a TRL trainer")
    assert offenders == []


def test_grpo_starts_from_the_model_sft_would_with_build_tiny(tmp_path):
    """`model.build_tiny` means for GRPO what it means for SFT (`base_model_path`): the tiny
    model, built once into RUN/base-model, under a fresh LoRA; nothing asks for a hub id."""
    from training.rl.grpo import load_policy_model
    from training.train_config import load_config

    cfg = tmp_path / "grpo.yaml"
    cfg.write_text("kind: grpo\nmodel: {build_tiny: true}\n"
                   "grpo: {per_device_train_batch_size: 2, num_generations: 2, max_turns: 1}\n")
    run = tmp_path / "run"
    model, processor, lora = load_policy_model(load_config(cfg), run, None, None)
    assert (run / "base-model" / "config.json").is_file()
    assert Path(model.name_or_path) == run / "base-model"
    assert lora is not None and processor is not None


def _token_answer(prompt_ids: list[int], completion_ids: list[int] | None = None) -> tuple:
    """A vLLM-style chat reply with token ids and one log-prob per completion token."""
    from test_agents_openai_policy import completion

    completion_ids = completion_ids or [7]
    body = completion("")
    body["prompt_token_ids"], body["choices"][0]["token_ids"] = prompt_ids, completion_ids
    body["choices"][0]["logprobs"] = {"content": [
        {"token": "a", "logprob": -0.5, "bytes": None, "top_logprobs": []} for _ in completion_ids
    ]}  # fmt: skip
    return (200, body)


@contextlib.contextmanager
def _scripted_sync(tmp_path: Path, plan: list, vision=None):
    """Server mode against a real loopback server that answers `plan` in order."""
    import http.server
    import threading

    from test_agents_openai_policy import Scripted

    from training.rl.grpo_server import ServerSync
    from training.train_config import GRPOSpec

    Scripted.plan, Scripted.seen = list(plan), []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        spec = GRPOSpec(generation="server", server_url=url, num_generations=2, max_turns=1,
                        per_device_train_batch_size=2)  # fmt: skip
        sync = ServerSync(spec, tmp_path, vision)
        sync.served = "rl-v1"  # as after the first step's adapter sync
        yield sync
    finally:
        server.shutdown()
        server.server_close()


def test_server_mode_rollouts_are_shown_only_the_configs_tools(tmp_path):
    """`tools:` limits what a server-mode rollout's model is shown, as it does in-process and
    in the SFT rows (a real loopback server records the request the policy sent)."""
    from test_agents_openai_policy import Scripted, first_prompt

    from agents.loop.episode_loop import openai_tools
    from tools import catalogue

    with _scripted_sync(tmp_path, [_token_answer([5, 6])]) as sync:
        reply = sync.policy(0, 32, 1.0, TOOLS).act(first_prompt("x"), openai_tools(catalogue()))
    assert [t["function"]["name"] for t in Scripted.seen[0]["tools"]] == TOOLS
    assert Scripted.seen[0]["model"] == "rl-v1" and reply.tokens.completion_ids == [7]


def test_server_mode_turns_carry_the_pixels_of_the_prompt_the_server_was_sent(
    tmp_path, tiny_model_dir
):
    """The server sends token ids, not pixels: the trainer renders the same messages through
    the trained model's processor, keeps the tensors only when they fill exactly the image
    tokens of the server's prompt ids, and its forward pass then scores the turn with them."""
    import torch
    from test_agents_openai_policy import first_prompt
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from agents.loop.episode_loop import openai_tools
    from agents.policies.hf_policy import encode_prompt, shown_tools
    from tools import catalogue
    from training.rl.grpo import image_token_id
    from training.rl.grpo_server import ServerVision
    from training.rl.rollouts import VisionRows

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    image_token = image_token_id(processor)
    messages, catalog = first_prompt("x", image=True), openai_tools(catalogue())
    local = encode_prompt(processor, messages, shown_tools(catalog, TOOLS))
    ids = local["input_ids"][0].tolist()
    assert ids.count(image_token) > 1

    one_short = list(ids)
    one_short.remove(image_token)  # a server whose processor made one patch fewer
    plan = [_token_answer(ids), _token_answer(one_short)]
    with _scripted_sync(tmp_path, plan, ServerVision(processor, image_token)) as sync:
        turn = sync.policy(0, 32, 1.0, TOOLS).act(messages, catalog).tokens
        short = sync.policy(0, 32, 1.0, TOOLS).act(messages, catalog).tokens
    assert turn.prompt_ids == ids and turn.vision is not None
    for key in ("pixel_values", "image_grid_thw"):
        assert torch.equal(turn.vision[key], local[key])
    assert short.vision is None and (sync.vision.matched, sync.vision.mismatches) == (1, 1)

    # The trainer's forward (ids only, as TRL's rollout_func path calls it) gets the pixels.
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir).eval()
    rows = VisionRows(image_token)
    rows.add(turn.prompt_ids, turn.completion_ids, turn.vision)
    full = torch.tensor([turn.prompt_ids + turn.completion_ids])
    hook = rows.attach(model)
    try:
        with torch.no_grad():
            hooked = model(input_ids=full, attention_mask=torch.ones_like(full)).logits
    finally:
        hook.remove()
    with torch.no_grad():
        direct = model(input_ids=full, attention_mask=torch.ones_like(full),
                       pixel_values=local["pixel_values"], image_grid_thw=local["image_grid_thw"],
                       mm_token_type_ids=(full == image_token).long()).logits  # fmt: skip
    assert rows.attached == 1 and rows.misses == 0
    assert torch.equal(hooked, direct)


def test_a_ray_nodes_server_turn_gets_its_pixels_on_the_trainers_side(tmp_path, tiny_model_dir):
    """On a Ray node there is no processor of the trained model: the node's server policy
    (`keep_prompt`, as GRPO's policy spec for the nodes sets it) sends the turn's messages back
    with its ids, and the trainer builds the same pixels from them as on one machine."""
    import pickle
    from types import SimpleNamespace

    import torch
    from test_agents_openai_policy import Scripted, first_prompt
    from transformers import AutoProcessor

    from agents.loop.episode_loop import openai_tools
    from agents.policies import make_policy
    from agents.policies.hf_policy import encode_prompt, shown_tools
    from tools import catalogue
    from training.rl.grpo import image_token_id
    from training.rl.grpo_server import ServerVision, rebuild_vision

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    image_token = image_token_id(processor)
    catalog = openai_tools(catalogue())
    with_image, blind = first_prompt("x", image=True), first_prompt("x")
    local = encode_prompt(processor, with_image, shown_tools(catalog, TOOLS))
    ids = local["input_ids"][0].tolist()
    with _scripted_sync(tmp_path, [_token_answer(ids), _token_answer([5, 6])]) as sync:
        node = make_policy("openai", base_url=sync.spec.server_url, model="rl-v1", seed=0,
                           token_ids=True, tools=TOOLS, keep_prompt=True)  # fmt: skip
        sent = [node.act(with_image, catalog).tokens, node.act(blind, catalog).tokens]
    assert Scripted.seen[0]["messages"] == with_image  # what the server was sent is kept
    assert sent[0].vision is None and sent[0].prompt is not None and sent[1].prompt is None
    turns = pickle.loads(pickle.dumps(sent))  # the trip back from the node, as Ray makes it
    rollout = SimpleNamespace(turns=turns)
    vision = ServerVision(processor, image_token)
    assert rebuild_vision([[rollout]], vision) == 1
    for key in ("pixel_values", "image_grid_thw"):
        assert torch.equal(turns[0].vision[key], local[key])
    assert turns[1].vision is None and all(t.prompt is None for t in turns)  # never kept on
    assert (vision.matched, vision.mismatches) == (1, 0)


def test_curriculum_is_reproducible_and_prefers_tasks_solved_sometimes():
    spec = CurriculumSpec(floor=0.01, window=10)
    a = Curriculum(["primitive_placement", "materials"], [1, 2], seed=7, spec=spec)
    b = Curriculum(["primitive_placement", "materials"], [1, 2], seed=7, spec=spec)
    assert [a.task_for(s) for s in range(20)] == [b.task_for(s) for s in range(20)]
    for i in range(10):
        a.record("primitive_placement:1:1", True)  # always solved
        a.record("materials:1:1", i % 2 == 0)  # solved half the time
        a.record("materials:2:1", False)  # never solved
    w = dict(zip(a.buckets, a.weights(), strict=True))
    assert w["materials:1"] == pytest.approx(0.01 + 0.25) == w["primitive_placement:2"]
    assert w["primitive_placement:1"] == pytest.approx(0.01) == w["materials:2"]
    c = Curriculum(["primitive_placement", "materials"], [1, 2], seed=7, spec=spec)
    c.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert [c.task_for(s) for s in range(20, 40)] == [a.task_for(s) for s in range(20, 40)]


def test_dynamic_sampling_keeps_groups_with_reward_spread():
    from training.rl.rollouts import Rollout, keep_groups

    def group(*rewards):
        return [Rollout("t", i, None, {"reward": r}) for i, r in enumerate(rewards)]

    a, b, c, d = group(0, 0), group(0, 1), group(1, 1), group(0.5, 0.2)
    kept, zero = keep_groups([a, b, c, d], 2)
    assert kept == [b, d] and zero == 0.5
    kept, _ = keep_groups([a, b, c], 2)
    assert kept == [a, b]  # too few with spread: topped up in order


def test_rows_are_blocks_of_one_turn_per_rollout_with_masked_padding():
    """TRL normalises over blocks of `group_size` rows: block (group, turn t) = turn t of each
    rollout; a rollout that ended sooner gives a no-loss row that keeps its episode reward."""
    from types import SimpleNamespace

    from agents.policies.protocol import TurnTokens
    from training.rl.rollouts import Rollout, training_rows

    def rollout(reward, *turns):
        steps = [SimpleNamespace(tokens=TurnTokens(p, c, [-0.5] * len(c))) for p, c in turns]
        return Rollout("t", 0, SimpleNamespace(steps=steps), {"reward": reward})

    a = rollout(1.0, ([1, 2], [3, 4]), ([1, 2, 3, 4, 9], [5]))
    b = rollout(0.0, ([1, 2], [6]))
    rows = training_rows([[a, b]], 2, pad_id=0, eos_id=7)
    assert rows["prompt_ids"] == [[1, 2], [1, 2], [1, 2, 3, 4, 9], [0]]
    assert rows["completion_ids"] == [[3, 4], [6], [5], [7]]
    assert rows["env_mask"] == [[1, 1], [1], [1], [0]]
    assert rows["episode_reward"] == [1.0, 0.0, 1.0, 0.0]  # each block's mean: the group's
    assert rows["turn_ref"] == [(0, 0, 0), (0, 1, 0), (0, 0, 1), None]


class Recording:
    """Wraps a policy and keeps the messages it was shown per turn (the parity check)."""

    def __init__(self, policy, seen: list) -> None:
        self.policy, self.seen, self.name = policy, seen, policy.name

    def reset(self, task_info=None):
        self.policy.reset(task_info)

    def act(self, messages, tools):
        self.seen.append(json.dumps([messages, tools], sort_keys=True))
        return self.policy.act(messages, tools)


def _oracle_call(task):
    return task.oracle[0]["args"]


def _prompts(task, session, config, turns: int, budget=None) -> list:
    """The (messages, tools) the loop shows at each of `turns` turns of a policy that always
    sends the task's first oracle call (the second time, the name is taken: it fails), under
    `budget` (a model's `PromptBudget`; None: the estimated one)."""
    from agents.loop.episode_loop import EpisodeLoop
    from agents.policies.protocol import PolicyReply, ToolCall

    seen: list = []

    class Repeats:
        name = "repeats"

        def reset(self, task_info=None):
            pass

        def prompt_budget(self):
            return budget

        def act(self, messages, tools):
            seen.append((messages, tools))
            return PolicyReply(text=None, tool_calls=[ToolCall("c", "add_primitive",
                                                               _oracle_call(task))])  # fmt: skip

    EpisodeLoop(Repeats(), session, task.prompt, setup=task.setup, config=config).run()
    return seen[:turns]


def _teach(out: Path, model_dir: Path, task, prompts: list) -> Path:
    """Overfit the tiny model to answer each of `prompts` with the task's first oracle call
    (a random model never calls a tool)."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from agents.policies.hf_policy import encode_prompt, shown_tools

    processor = AutoProcessor.from_pretrained(model_dir)
    model = AutoModelForImageTextToText.from_pretrained(model_dir)
    target = ('<tool_call>\n{"name": "add_primitive", "arguments": '
              + json.dumps(_oracle_call(task)) + "}\n</tool_call><|im_end|>")  # fmt: skip
    ids = processor.tokenizer(target, add_special_tokens=False, return_tensors="pt")["input_ids"]
    batches = []
    for messages, tools in prompts:
        prompt = encode_prompt(processor, messages, shown_tools(tools, TOOLS))
        batch = dict(prompt)
        batch["input_ids"] = torch.cat([prompt["input_ids"], ids], 1)
        batch["attention_mask"] = torch.ones_like(batch["input_ids"])
        batch["mm_token_type_ids"] = torch.cat(
            [prompt["mm_token_type_ids"], torch.zeros_like(ids)], 1)  # fmt: skip
        labels = batch["input_ids"].clone()
        labels[:, : prompt["input_ids"].shape[1]] = -100
        batches.append((batch, labels))
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(120):
        opt.zero_grad()
        for batch, labels in batches:
            model(**batch, labels=labels).loss.backward()
        opt.step()
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def _task():
    from training.tasks import get_task

    # the generator's own wording (:w0): these tests pin the loop's prompts, not the phrasing
    return get_task(Curriculum(["primitive_placement"], [1], "train", 0).task_for(0) + ":w0")


@pytest.fixture(scope="module")
def taught(tmp_path_factory, tiny_model_dir, worker_pool):
    """The tiny model taught the first call of a task on the loop's first prompt."""
    from agents.loop.episode_loop import LoopConfig

    task = _task()
    session = ToolSession(worker_pool, deadline_s=300)
    try:
        prompts = _prompts(task, session, LoopConfig(max_steps=1, render_size=128), 1)
    finally:
        session.close()
    out = tmp_path_factory.mktemp("grpo") / "taught"
    return _teach(out, tiny_model_dir, task, prompts), task


# The loop of the stuck rollout: warned on the 2nd failure of the same call, stuck on the
# 3rd (turn 3 is shown the warning), and prompts capped so low (1,000 of the tiny model's
# tokens: its 4th prompt holds ~1,300) that the budget rule leaves the older steps out.
STUCK_LOOP = {"max_steps": 4, "render_size": 128, "record_artifacts": False,
              "repeat_warning": 2, "stuck_after": 3}  # fmt: skip


def _stuck_loop():
    from agents.loop.context import ContextConfig
    from agents.loop.episode_loop import LoopConfig

    return LoopConfig(**STUCK_LOOP, context=ContextConfig(max_prompt_tokens=1000))


def _config(tmp_path: Path, model: Path, extra: str = "", **grpo) -> Path:
    spec = {"tasks": {"families": ["primitive_placement"], "levels": [1]}, "max_steps": 1,
            "per_device_train_batch_size": 4, "num_generations": 2, "max_turns": 2,
            "max_completion_length": 96, "temperature": 1.0, "learning_rate": 1.0e-2,
            "render_size": 128, "rollout_workers": 2, "tool_deadline_s": 300, **grpo}  # fmt: skip
    cfg = tmp_path / "grpo.yaml"
    cfg.write_text(f"kind: grpo\nmodel: {{path: {model}}}\ntools: {TOOLS}\n"
                   "run: {seed: 1, save_steps: 1, report_to: []}\n"
                   f"grpo: {json.dumps(spec)}\n{extra}")  # fmt: skip
    return cfg


def _pin_task(runtime, task_id: str, n: int = 8) -> None:
    runtime.curriculum.load_state_dict({"assigned": {str(i): task_id for i in range(n)}})


@pytest.fixture
def roomy_session(worker_pool):
    """A session whose calls may take long on a loaded machine: a call that timed out would
    show the model an error the other run did not see (parity is exact, deadlines are not)."""
    s = ToolSession(worker_pool, deadline_s=300)
    yield s
    s.close()


@pytest.mark.parametrize("batched", [True, False], ids=["batched-first-turn", "one-by-one"])
def test_rollouts_are_eval_episodes_and_trl_trains_on_the_generated_ids(tmp_path, taught,
                                                                          roomy_session, batched):  # fmt: skip
    session = roomy_session
    from peft import get_peft_model
    from safetensors.torch import load_file
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from agents.policies.hf_policy import GroupSampler, HFPolicy
    from agents.store import EpisodeFilter, Store
    from training.eval.harness import run_spec, task_spec
    from training.rl.grpo import build_runtime, loop_config, run_grpo
    from training.rl.rollouts import rollout_seed
    from training.sft.trainer import peft_config
    from training.train_config import load_config

    model_dir, task = taught
    config = load_config(_config(tmp_path, model_dir, batch_first_turn=batched))
    store = Store(tmp_path / "store")
    runtime = build_runtime(config.grpo, config.run.seed, TOOLS, store)
    _pin_task(runtime, task.id)
    try:
        result = run_grpo(config, tmp_path / "run", runtime=runtime)
    finally:
        runtime.close()
    assert result.steps == 1
    last = result.last_rollout
    rollouts = [r for g in last["groups"] for r in g]
    assert len(rollouts) == 2 and all(r.turns for r in rollouts)

    # 1. Parity: the same episode through `eval`'s path (run_spec), same seed and weights
    # (a fresh LoRA adapter adds exactly zero), shows the policy the same messages and images,
    # and the policy generates the same ids, turn by turn. Batched, the group's first turns
    # are one generate with the group's seed: the replays share a sampler seeded the same way.
    processor = AutoProcessor.from_pretrained(model_dir)
    base = AutoModelForImageTextToText.from_pretrained(model_dir)
    model = get_peft_model(base, peft_config(config.lora))
    sampler = GroupSampler(2, rollout_seed(config.run.seed, 0, 2))  # slot 0, 2 rollouts
    if batched:
        firsts = [r.turns[0] for r in rollouts]
        assert firsts[0].seen == firsts[1].seen  # one start state, one first prompt
    for index, rollout in enumerate(rollouts):
        seen: list = []
        policy = HFPolicy.from_loaded(model, processor, model=model_dir.name,
                                      max_tokens=96, temperature=1.0, top_p=1.0,
                                      seed=rollout.seed, tools=TOOLS)  # fmt: skip
        if batched:
            policy.share_first_turn(sampler, index)
        record = run_spec(task_spec(rollout.task_id), Recording(policy, seen), session,
                          config=loop_config(config.grpo))  # fmt: skip
        again = [s.tokens for s in record["_result"].steps if s.tokens is not None]
        assert len(again) == len(rollout.turns) == len(seen)
        for mine, theirs in zip(rollout.turns, again, strict=True):
            assert mine.seen == theirs.seen  # messages + images + tools, digested
            assert mine.prompt_ids == theirs.prompt_ids
            assert mine.completion_ids == theirs.completion_ids
        assert record["reward"] == rollout.reward  # the same checker as eval
    assert sampler.served == (2 if batched else 0)
    assert any(o.tokens.vision for r in rollouts for o in r.result.steps)  # renders were shown

    # 2. Rows are the generated ids; TRL's loss forward saw exactly those sequences (with the
    # turns' image tensors attached), and nothing else but masked padding rows.
    generated = set()
    for (g, j, t), p, c, lp, m in zip(
        *[[x for x, ref in zip(last[k], last["turn_ref"], strict=True) if ref]
          for k in ("turn_ref", "prompt_ids", "completion_ids", "logprobs", "env_mask")],
        strict=True,
    ):  # fmt: skip
        tok = last["groups"][g][j].turns[t]
        assert (p, c, lp) == (tok.prompt_ids, tok.completion_ids, tok.logprobs)
        assert m == [1] * len(c)
        generated.add(tuple(p + c))
    trained = {row for row in last["trained_rows"] if len(row) > 2}
    assert trained == generated
    assert last["vision_attached"] > 0 and last["vision_misses"] == 0

    metrics = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    for key in ("loss", "reward", "reward/success", "rollout/zero_spread_share",
                "rollout/logprob_mismatch", "time/rollout_s", "time/update_s",
                "time/generate_s", "time/tools_s", "time/start_s", "time/reward_s"):  # fmt: skip
        assert key in metrics, key
    assert metrics["time/reward_s"] > 0 and metrics["time/start_s"] > 0  # scored, started
    # Sampling and training log-probs agree (same weights, same pixels): float noise only.
    assert metrics["rollout/logprob_mismatch"] < 1e-3, metrics
    adapter = load_file(str(result.adapter_dir / "adapter_model.safetensors"))
    if metrics["reward_std"] > 0:
        assert any(float(t.abs().max()) > 0 for k, t in adapter.items() if "lora_B" in k)

    # 3. Every rollout is an episode in the store, filterable as RL rollouts of this run.
    episodes = Store(tmp_path / "store").list_episodes(EpisodeFilter(source="rollout"))
    assert len(episodes) == 2
    assert all("step:1" in e.tags and "run:run" in e.tags for e in episodes)


def test_a_greedy_member_is_the_eval_episode_scored_at_the_groups_temperature(tmp_path, taught,
                                                                             roomy_session):  # fmt: skip
    """`grpo.greedy_member`: rollout 0 of a group is exactly the episode `eval` runs (greedy
    decoding, the same ids turn by turn, the same reward); its log-probs are those of the
    group's sampling temperature, which the trainer scores, not of temperature 1; rollout 1
    still samples with its own seed."""
    from peft import get_peft_model
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from agents.policies.hf_policy import HFPolicy
    from training.eval.harness import run_spec, task_spec
    from training.rl.grpo import build_runtime, image_token_id, loop_config, run_grpo
    from training.rl.rollouts import VisionRows, logprob_mismatch, training_rows
    from training.sft.trainer import peft_config
    from training.train_config import load_config

    model_dir, task = taught
    from agents.store import EpisodeFilter, Store

    config = load_config(_config(tmp_path, model_dir, temperature=0.5, greedy_member=True))
    runtime = build_runtime(config.grpo, config.run.seed, TOOLS, Store(tmp_path / "store"))
    _pin_task(runtime, task.id)
    try:
        result = run_grpo(config, tmp_path / "run", runtime=runtime)
    finally:
        runtime.close()
    greedy, sampled = result.last_rollout["groups"][0]
    stored = Store(tmp_path / "store").list_episodes(EpisodeFilter(source="rollout"))
    assert len(stored) == 2
    assert sorted("greedy" in (e.tags or []) for e in stored) == [False, True]

    processor = AutoProcessor.from_pretrained(model_dir)
    model = get_peft_model(AutoModelForImageTextToText.from_pretrained(model_dir),
                           peft_config(config.lora))  # fmt: skip
    for rollout, temperature in ((greedy, None), (sampled, 0.5)):
        policy = HFPolicy.from_loaded(model, processor, model=model_dir.name, max_tokens=96,
                                      temperature=temperature, seed=rollout.seed, tools=TOOLS)  # fmt: skip
        record = run_spec(task_spec(rollout.task_id), policy, roomy_session,
                          config=loop_config(config.grpo))  # fmt: skip
        again = [s.tokens for s in record["_result"].steps if s.tokens is not None]
        assert [(t.prompt_ids, t.completion_ids) for t in again] == [
            (t.prompt_ids, t.completion_ids) for t in rollout.turns]  # fmt: skip
        assert record["reward"] == rollout.reward

    rows = training_rows([[greedy]], 2, processor.tokenizer.pad_token_id,
                         processor.tokenizer.eos_token_id)  # fmt: skip
    vision = VisionRows(image_token_id(processor))
    for tok in greedy.turns:
        vision.add(tok.prompt_ids, tok.completion_ids, tok.vision)
    hook = vision.attach(model)
    try:
        at_group, at_one = (logprob_mismatch(model, rows, t) for t in (0.5, 1.0))
    finally:
        hook.remove()
    assert vision.misses == 0
    # scored at the group's temperature it matches; at 1.0 it is far off (>= 100x)
    assert at_group < 1e-4 and at_one > max(1e-3, 100 * at_group), (at_group, at_one)


def test_a_stuck_compacted_rollout_trains_on_its_turns_as_shown(tmp_path, tiny_model_dir,
                                                                session):  # fmt: skip
    from transformers import AutoProcessor, AutoTokenizer

    from agents.policies.hf_policy import counting_budget
    from training.rl.grpo import build_runtime, run_grpo
    from training.train_config import load_config

    # A model taught to repeat its one call on every turn of the loop above: the second time
    # the name is taken, so the loop warns on the repeat, leaves old steps out, and ends
    # `stuck`. It is taught on the prompts the rollouts' hf policy is sent: the same budget
    # rule, the tokens counted by the same processor.
    task = _task()
    budget = counting_budget(AutoProcessor.from_pretrained(tiny_model_dir), 10**9, TOOLS)
    prompts = _prompts(task, session, _stuck_loop(), 4, budget)
    model_dir = _teach(tmp_path / "repeats", tiny_model_dir, task, prompts)
    config = load_config(_config(tmp_path, model_dir, max_turns=4, per_device_train_batch_size=8,
                                 temperature=0.1))  # fmt: skip
    runtime = build_runtime(config.grpo, config.run.seed, TOOLS)
    runtime.loop = _stuck_loop()
    _pin_task(runtime, task.id)
    try:
        result = run_grpo(config, tmp_path / "run", runtime=runtime)
    finally:
        runtime.close()
    last = result.last_rollout
    tok = AutoTokenizer.from_pretrained(model_dir)
    stuck = [r for g in last["groups"] for r in g if r.result.status == "stuck"]
    assert stuck, [r.result.status for g in last["groups"] for r in g]
    shown = [tok.decode(t.prompt_ids) for t in stuck[0].turns]
    assert len(shown) == 4 and "This exact call has now failed" in shown[3]
    # the 4th prompt left the older steps out: their outputs are marks, one of a failure
    assert "[ok]" in shown[3] and "[error]" in shown[3], shown[-1][-2000:]
    trained = {row for row in last["trained_rows"] if len(row) > 2}
    for t in stuck[0].turns:  # every turn, warnings and compacted context included, as shown
        assert tuple(t.prompt_ids + t.completion_ids) in trained
    # Sampled at temperature 0.1: the training-time log-probs are taken at the same temperature
    # (TRL's loss divides the logits by it), so they agree up to float noise.
    metrics = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert metrics["rollout/logprob_mismatch"] < 1e-3, metrics


def test_the_update_forward_skips_the_batchs_shared_left_padding_with_the_same_log_probs():
    """`LeftPaddingTrim`: a micro-batch padded to a longer prompt elsewhere in the generation
    batch runs only its own columns, and the completions' log-probs are those of the padded
    forward (rotary positions are relative); a micro-batch of padding rows runs 2 columns plus
    the completion width. Without the hook the same call runs every column."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from training.rl.rollouts import LeftPaddingTrim

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4,
                                         num_key_value_heads=2, max_position_embeddings=256))  # fmt: skip
    model.train()
    width, keep = 40, 5  # the generation batch's longest prompt + completion; the scored tail

    def batch(lengths: list[int]) -> dict:
        ids = torch.zeros(len(lengths), width, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for b, n in enumerate(lengths):  # left-padded prompt, then a `keep`-token completion
            ids[b, width - n:] = torch.randint(1, 97, (n,))
            mask[b, width - n:] = 1
        labels = ids.masked_fill(mask == 0, -100)
        labels[:, :-keep] = -100
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}

    def scored(kwargs: dict) -> torch.Tensor:
        logits = model(**kwargs).logits[:, -keep - 1 : -1].float()
        target = kwargs["input_ids"][:, -keep:]
        return torch.log_softmax(logits, -1).gather(-1, target.unsqueeze(-1)).squeeze(-1)

    seen: list[int] = []
    probe = model.register_forward_pre_hook(
        lambda _m, _a, kw: seen.append(kw["input_ids"].shape[1]), with_kwargs=True)
    real = batch([17, 12, 9])
    plain = scored(dict(real))
    trim = LeftPaddingTrim()
    handle = trim.attach(model)
    probe.remove()  # the probe must see what the trim leaves: after it
    probe = model.register_forward_pre_hook(
        lambda _m, _a, kw: seen.append(kw["input_ids"].shape[1]), with_kwargs=True)
    trimmed = scored(dict(real))
    padding_rows = scored(batch([keep + 1] * 4))  # 1 prompt token + the completion each
    handle.remove()
    probe.remove()
    assert seen == [width, 17, keep + 1]
    assert torch.allclose(plain, trimmed, atol=1e-5), (plain - trimmed).abs().max()
    assert padding_rows.shape == (4, keep)
    assert trim.columns_in == 3 * width + 4 * width and trim.columns_kept == 3 * 17 + 4 * (keep + 1)
    with torch.no_grad():  # generation and scoring without a gradient are left alone
        trim.attach(model)
        seen.clear()
        model.register_forward_pre_hook(
            lambda _m, _a, kw: seen.append(kw["input_ids"].shape[1]), with_kwargs=True)
        model(**batch([9]))
    assert seen == [width]
