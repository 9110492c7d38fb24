"""GRPO rollouts render only for a model that is shown images: a text-only model's rollouts
(the packaged SmolLM2) make no render, and its vocabulary has no image token."""

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
    assert loop_config(GRPOSpec(), sees_images=False).observe == "never"
    assert loop_config(GRPOSpec(observe="always"), sees_images=False).observe == "always"
    assert loop_config(GRPOSpec(observe="never")).observe == "never"
