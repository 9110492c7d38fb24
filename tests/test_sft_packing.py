"""`sft.pack`: rows with shared prefixes run as one sequence, with the loss and gradients of
the rows apart (training/sft/packing.py), on a real (tiny, random) Llama and through TRL."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _rows(seed: int = 0):
    """Four rows as an episode's turns make them: a shared system + tools prefix, a goal, a
    history that grows, a scored reply at the end of each; one row from another family."""
    import random

    rng = random.Random(seed)

    def toks(n: int) -> list[int]:
        return [rng.randrange(5, 90) for _ in range(n)]

    system, goal = toks(30), toks(8)
    reply1, obs1, reply2, obs2, reply3 = toks(5), toks(7), toks(4), toks(6), toks(5)
    turn1 = system + goal
    turn2 = turn1 + reply1 + obs1
    turn3 = turn2 + reply2 + obs2
    other = toks(25)
    rows, labels = [], []
    for prompt, reply in ((turn1, reply1), (turn2, reply2), (turn3, reply3), (other, toks(3))):
        rows.append(prompt + reply)
        labels.append([-100] * len(prompt) + reply)
    return rows, labels


def family_rows(tmp_path) -> str:
    """A Parquet file of SFT rows as demonstrations make them: 2 families x 2 episodes x 2
    turns, each family's rows starting with its system prompt."""
    from training.sft.demos import write_rows

    system = "You build 3D scenes with tools. " * 8
    rows = []
    for family in ("materials", "primitive_placement"):
        for episode in range(2):
            for turn in range(2):
                history = [{"role": "assistant", "content": "done step one"},
                           {"role": "user", "content": "ok"}] if turn else []  # fmt: skip
                rows.append({
                    "messages": [{"role": "system", "content": system + family},
                                 {"role": "user", "content": f"goal {family} {episode}"},
                                 *history,
                                 {"role": "assistant", "content": f"reply {turn}"}],
                    "tools": "[]", "task_id": f"{family}:1:{episode}",
                    "episode_id": f"{family}-{episode}",
                })  # fmt: skip
    data = tmp_path / "rows.parquet"
    write_rows(rows, data)
    return str(data)


def test_packed_rows_give_the_loss_and_gradients_of_the_rows_apart(tiny_text_dir):
    import torch
    from transformers import AutoModelForCausalLM

    from training.sft.packing import PrefixPacker, pack_rows

    model = AutoModelForCausalLM.from_pretrained(str(tiny_text_dir), dtype=torch.float32)
    model.train()
    rows, labels = _rows()
    width = max(map(len, rows))
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    lab = torch.tensor([x + [-100] * (width - len(x)) for x in labels])

    def loss_and_grads() -> tuple[float, dict]:
        model.zero_grad()
        loss = model(input_ids=ids, attention_mask=mask, labels=lab).loss
        loss.backward()
        return float(loss), {n: p.grad.clone() for n, p in model.named_parameters()}

    apart, grads_apart = loss_and_grads()
    packer = PrefixPacker()
    handle = packer.attach(model)
    try:
        packed, grads_packed = loss_and_grads()
    finally:
        handle.remove()
    assert packer.tokens_in == sum(map(len, rows))
    # Turns 2 and 3 run only past turn 1's prompt (through reply 1, shared as history).
    tree = pack_rows(rows, labels)
    assert packer.tokens_run == len(tree["input_ids"]) < packer.tokens_in - 60
    assert abs(packed - apart) < 1e-5, (packed, apart)
    for name, grad in grads_apart.items():
        assert torch.allclose(grads_packed[name], grad, atol=1e-5, rtol=1e-4), name
    # Every scored token once, each predicted from its own row's previous token.
    scored = [t for t in tree["labels"] if t != -100]
    assert sorted(scored) == sorted(t for x in labels for t in x if t != -100)
    with torch.no_grad():  # inference is left alone
        handle = packer.attach(model)
        before = packer.tokens_in
        model(input_ids=ids, attention_mask=mask)
        handle.remove()
    assert packer.tokens_in == before


def test_pack_order_gives_each_batch_one_family_in_turn_order_seeded():
    from training.sft.packing import pack_order

    keys = [(f, f"{f}-{e}", t) for f in ("a", "b", "c") for e in range(3) for t in range(2)]
    order = pack_order(keys, batch=2, seed=0)
    assert sorted(order) == list(range(len(keys)))
    for k in range(0, len(order), 2):
        pair = [keys[i] for i in order[k : k + 2]]
        assert pair[0][0] == pair[1][0]  # one family
        assert pair[0][1] == pair[1][1] and pair[0][2] < pair[1][2]  # an episode's turns in order
    assert pack_order(keys, 2, 0) == order and pack_order(keys, 2, 1) != order


def test_sft_with_pack_trains_through_trl_on_family_batches(tmp_path, tiny_text_dir):
    """A real TRL SFT run with `sft.pack`: batches come from one family, the packed forward
    ran fewer tokens than the rows hold, and the loss is finite."""
    import math

    from training.sft.trainer import run_sft
    from training.train_config import TrainConfig

    data = family_rows(tmp_path)
    cfg = TrainConfig.model_validate({
        "kind": "sft", "model": {"path": str(tiny_text_dir)}, "lora": {"r": 4, "alpha": 8},
        "sft": {"data": [data], "max_steps": 3, "per_device_train_batch_size": 2,
                "pack": True, "learning_rate": 1e-3},
        "run": {"save_steps": 100, "report_to": []},
    })  # fmt: skip
    result = run_sft(cfg, tmp_path / "run")
    assert result.steps == 3 and result.final_loss is not None and math.isfinite(result.final_loss)
    packing = json.loads((tmp_path / "run" / "packing.json").read_text())
    assert 0 < packing["tokens_run"] < packing["row_tokens"]
    steps = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    for step in steps:
        assert len(step["ids"]) == 2 and len({s.split("-")[0] for s in step["ids"]}) == 1, step


def test_unmasked_right_padding_gives_the_loss_and_gradients_of_masked_padding(tiny_text_dir):
    """`sft.mask_padding: false`: the collator's right padding stays in the attention mask
    (all ones, so attention runs causal, no mask) but out of the loss; a real token never
    attends to the padding after it, so loss and gradients are those of the masked batch."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_text_dir), dtype=torch.float32)
    model.train()
    rows, labels = _rows()
    width = -(-max(map(len, rows)) // 16) * 16
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    lab = torch.tensor([x + [-100] * (width - len(x)) for x in labels])
    masked = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])

    def loss_and_grads(mask) -> tuple[float, dict]:
        model.zero_grad()
        loss = model(input_ids=ids, attention_mask=mask, labels=lab).loss
        loss.backward()
        return float(loss), {n: p.grad.clone() for n, p in model.named_parameters()}

    loss_m, grads_m = loss_and_grads(masked)
    loss_u, grads_u = loss_and_grads(torch.ones_like(masked))
    assert abs(loss_m - loss_u) < 1e-5
    for name, grad in grads_m.items():
        assert torch.allclose(grads_u[name], grad, atol=1e-5, rtol=1e-4), name
    # the collator's switch
    from transformers import AutoTokenizer

    from training.sft.data import ConversationCollator

    tok = AutoTokenizer.from_pretrained(str(tiny_text_dir))
    row = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}],
           "tools": "[]"}  # fmt: skip
    for mask_padding, ones in ((True, False), (False, True)):
        batch = ConversationCollator(tok, pad_to_multiple_of=64, mask_padding=mask_padding)([row])
        assert batch["input_ids"].shape[1] == 64
        assert bool((batch["attention_mask"] == 1).all()) is ones
        assert int((batch["labels"] != -100).sum()) > 0


def test_a_runs_mmap_threshold_is_what_training_sets():
    from training.runs import allocator_args
    from training.train_config import RunSpec

    assert allocator_args(RunSpec()) == {}  # the env's, else 2 MB
    assert allocator_args(RunSpec(mmap_threshold_mb=32)) == {"mmap_threshold": 32 << 20}
