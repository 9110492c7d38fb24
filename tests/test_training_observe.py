"""GRPO rollouts render only for a model that is shown images: a text-only model's rollouts
(the packaged SmolLM2) make no render but read the same scene listing as in eval, and its
vocabulary has no image token."""

from __future__ import annotations

from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

from training.rl.grpo import image_token_id, loop_config
from training.train_config import GRPOSpec


def _tokenizer(extra: list[str]) -> PreTrainedTokenizerFast:
    vocab = {"<|endoftext|>": 0, "a": 1, "b": 2, **{t: 3 + i for i, t in enumerate(extra)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|endoftext|>"))
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<|endoftext|>")


def test_a_text_only_vocabulary_has_no_image_token() -> None:
    # converting the missing token gives the unknown token's id (0 here, as in SmolLM2), which
    # the vision hook once took for an image token
    assert _tokenizer([]).convert_tokens_to_ids("<|image_pad|>") == 0
    assert image_token_id(_tokenizer([])) is None
    assert image_token_id(_tokenizer(["<|image_pad|>"])) == 3


def test_rollouts_render_only_for_a_model_that_sees_images() -> None:
    assert loop_config(GRPOSpec()).observe == "changed"
    assert loop_config(GRPOSpec(), sees_images=False).observe == "text"
    assert loop_config(GRPOSpec(observe="always"), sees_images=False).observe == "always"
    assert loop_config(GRPOSpec(observe="never")).observe == "never"


def test_text_observations_are_the_text_only_models_eval_prompt(worker_pool) -> None:
    """"text" shows the scene listing exactly as "changed" does (what eval shows a text-only
    model once its chat format drops the images), and renders nothing; "never" drops both."""
    from agents import LoopConfig, run_episode
    from agents.policies.chat_format import hermes_messages
    from agents.policies.protocol import PolicyReply, ToolCall
    from tools import ToolSession
    from training.tasks import get_task

    task = get_task("scene_editing:1:0")

    class Seen:
        name = "seen"

        def __init__(self):
            self.prompts, self.plan = [], [c for c in task.oracle]

        def reset(self, task_info=None):
            pass

        def act(self, messages, tools):
            self.prompts.append(messages)
            if not self.plan:
                return PolicyReply(text="done")
            c = self.plan.pop(0)
            return PolicyReply(text=None, tool_calls=[ToolCall(f"c{len(self.plan)}", c["tool"], c["args"])])

    seen = {}
    for mode in ("changed", "text", "never"):
        policy = Seen()
        with ToolSession(worker_pool) as s:
            result = run_episode(policy, s, task.prompt, setup=task.setup,
                                 config=LoopConfig(max_steps=4, observe=mode))
        seen[mode] = (policy.prompts, result)
    images = lambda prompts: sum(isinstance(p, dict) and p.get("type") == "image_url"  # noqa: E731
                                 for m in prompts[-1] for p in (m["content"] if isinstance(m["content"], list) else []))
    assert images(seen["changed"][0]) > 0 and images(seen["text"][0]) == 0
    assert seen["text"][1].initial_frame is None
    as_text = {m: [hermes_messages(p, None, text_only=True) for p in prompts] for m, (prompts, _) in seen.items()}
    assert as_text["text"] == as_text["changed"]
    assert "Scene:" in str(as_text["text"][0]) and "Scene:" not in str(as_text["never"][0])
