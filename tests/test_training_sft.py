"""SFT on the tiny model with real TRL and PEFT: masking, train/inference agreement, a step
that changes the adapter, and resume after kill -9 with the same step counter and data order."""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from agents.policies.protocol import PolicyReply
from training.sft.demos import conversation_row, write_rows

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add_primitive",
            "description": "Add a primitive object.",
            "parameters": {
                "type": "object",
                "properties": {"kind": {"type": "string"}, "name": {"type": "string"}},
                "required": ["kind", "name"],
            },
        },
    }
]
ROOT = Path(__file__).resolve().parent.parent


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _png(colour) -> str:
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), colour).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def loop_messages(i: int) -> tuple[list[dict], dict]:
    """An episode as the loop shows it to a policy, and the call it answered with."""
    kind = ["cube", "sphere", "cylinder", "cone"][i % 4]
    call = {
        "id": "c0",
        "type": "function",
        "function": {
            "name": "add_primitive",
            "arguments": json.dumps({"kind": kind, "name": f"P{i}"}),
        },
    }
    messages = [
        {"role": "system", "content": "You build 3D models."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": f"Goal: add a {kind} named P{i}."},
                {"type": "image_url", "image_url": {"url": _png((10 * i, 0, 0))}},
                {"type": "text", "text": 'Scene: {"objects":[]}'},
            ],
            "_step": -1,
        },
        {"role": "assistant", "content": None, "tool_calls": [call], "_step": 0},
        {"role": "tool", "tool_call_id": "c0", "content": f"TOOLRESULT ok {kind}", "_step": 0},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Step 0 done: 1 call(s) ok, 0 failed."},
                {"type": "image_url", "image_url": {"url": _png((0, 10 * i, 0))}},
            ],
            "_step": 0,
        },
    ]
    return messages, call


def demo_rows(n: int) -> list[dict]:
    rows = []
    for i in range(n):
        messages, _ = loop_messages(i)
        row = conversation_row(messages, TOOLS, PolicyReply(text="Done.", tool_calls=[]))
        row.update(episode_id=f"ep{i}", success=True, source="oracle", reward=1.0, model="oracle")
        rows.append(row)
    return rows


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("demos") / "demos.parquet"
    rows = demo_rows(6)
    rows.append({**demo_rows(1)[0], "episode_id": "failed", "success": False})
    write_rows(rows, path)
    return path


def test_only_assistant_turns_carry_loss(tiny_model_dir, demos):
    from transformers import AutoProcessor

    from training.sft.data import ConversationCollator, load_conversations

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    data = load_conversations(demos)
    assert "failed" not in data["episode_id"]  # success_only by default
    batch = ConversationCollator(processor)([data[0], data[1]])
    tok = processor.tokenizer
    ids, labels = batch["input_ids"][0], batch["labels"][0]
    learnt = tok.decode(ids[labels != -100])
    assert learnt == (
        '<tool_call>\n{"name": "add_primitive", "arguments": {"kind": "cube", "name": "P0"}}\n'
        "</tool_call><|im_end|>\nDone.<|im_end|>\n"
    )
    # The tool result, the tools block, the prompt and every image token are masked.
    masked = tok.decode(ids[labels == -100])
    assert "TOOLRESULT ok cube" in masked and "<tool_response>" in masked and "<tools>" in masked
    image_id = tok.convert_tokens_to_ids("<|image_pad|>")
    assert bool((ids == image_id).any()) and not bool((labels[ids == image_id] != -100).any())
    assert batch["pixel_values"].shape[0] > 0 and batch["image_grid_thw"].shape[0] == 4


def test_batches_pad_to_a_multiple_with_the_padding_masked(tiny_model_dir, demos):
    """`sft.pad_to_multiple_of`: a batch's width is rounded up, and what was added carries no
    loss and no attention, so the same rows train the same tokens."""
    from transformers import AutoProcessor

    from training.sft.data import ConversationCollator, load_conversations

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    data = load_conversations(demos)
    plain = ConversationCollator(processor)([data[0], data[1]])
    padded = ConversationCollator(processor, pad_to_multiple_of=64)([data[0], data[1]])
    width = plain["input_ids"].shape[1]
    assert padded["input_ids"].shape[1] == -(-width // 64) * 64 > width
    for key in ("input_ids", "labels", "attention_mask"):
        assert padded[key][:, :width].equal(plain[key])
    assert (padded["labels"][:, width:] == -100).all()
    assert (padded["attention_mask"][:, width:] == 0).all()


def test_training_rows_render_exactly_what_the_hf_policy_sees(tiny_model_dir):
    from transformers import AutoProcessor

    from agents.policies.hf_policy import encode_prompt
    from training.sft.data import ConversationCollator

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    messages, call = loop_messages(3)
    train = ConversationCollator(processor).encode(demo_rows(4)[3])["input_ids"][0].tolist()
    for upto in (2, 5):  # the first turn, and the turn after the tool result + observation
        prompt = encode_prompt(processor, messages[:upto], TOOLS)["input_ids"][0].tolist()
        assert train[: len(prompt)] == prompt


def _adapter_tensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


def _sft_config(tmp_path: Path, model: Path, demos: Path, steps: int, save: int) -> Path:
    cfg = tmp_path / "sft.yaml"
    cfg.write_text(
        f"kind: sft\nmodel: {{path: {model}}}\nlora: {{r: 4, alpha: 8}}\n"
        f"run: {{seed: 3, save_steps: {save}, report_to: [tensorboard]}}\n"
        f"sft: {{data: [{demos}], max_steps: {steps}, learning_rate: 1.0e-3}}\n"
    )
    return cfg


def test_one_sft_step_changes_the_adapter(tmp_path, tiny_model_dir, demos):
    import torch

    from training.sft.trainer import run_sft
    from training.train_config import load_config

    cfg = load_config(_sft_config(tmp_path, tiny_model_dir, demos, steps=1, save=1))
    torch.set_num_threads(1)
    cfg.sft.cpu_threads = 2  # the stage's own setting, for this run only
    result = run_sft(cfg, tmp_path / "run")
    assert torch.get_num_threads() == 1  # a pipeline's next stage keeps its own
    assert result.steps == 1
    tensors = _adapter_tensors(result.adapter_dir)
    b = [t for k, t in tensors.items() if "lora_B" in k]
    assert b and any(float(t.abs().sum()) > 0 for t in b)  # LoRA B starts at zero
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["step"] == 1 and "loss" in rows[0] and "time" in rows[0]
    assert (tmp_path / "run" / "checkpoint-1" / "COMPLETE").is_file()
    assert any((tmp_path / "run" / "tensorboard").iterdir())


def test_resume_after_kill_continues_step_counter_and_data_order(tmp_path, tiny_model_dir, demos):
    from training.sft.trainer import run_sft
    from training.train_config import load_config

    steps = 14
    cfg_path = _sft_config(tmp_path, tiny_model_dir, demos, steps=steps, save=2)
    reference = run_sft(load_config(cfg_path), tmp_path / "straight")
    order = [
        json.loads(x) for x in (tmp_path / "straight" / "samples.jsonl").read_text().splitlines()
    ]
    assert reference.steps == steps and [r["step"] for r in order] == list(range(1, steps + 1))

    run_dir = tmp_path / "killed"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "studio.cli",
            "train",
            "sft",
            "--config",
            str(cfg_path),
            "--out",
            str(run_dir),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    deadline = time.time() + 240
    while not (run_dir / "checkpoint-4" / "COMPLETE").is_file():
        assert proc.poll() is None and time.time() < deadline, (
            "the run ended before it could be killed"
        )
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    from training.runs import checkpoint_step, latest_checkpoint

    last_step = checkpoint_step(latest_checkpoint(run_dir))
    assert 4 <= last_step < steps

    resumed = run_sft(load_config(cfg_path), run_dir, resume=True)
    assert resumed.resumed_from == last_step and resumed.steps == steps
    after = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    # Same steps, same examples per step, whether or not the run was killed on the way.
    assert after == order
    logged = [json.loads(x)["step"] for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert logged[:steps] == list(range(1, steps + 1))


def test_resuming_a_finished_run_trains_nothing_more(tmp_path, tiny_model_dir, demos):
    from training.sft.trainer import run_sft
    from training.train_config import load_config

    cfg = load_config(_sft_config(tmp_path, tiny_model_dir, demos, steps=2, save=1))
    done = run_sft(cfg, tmp_path / "run")
    order = (tmp_path / "run" / "samples.jsonl").read_text()
    final = _adapter_tensors(done.adapter_dir)
    (done.adapter_dir / "adapter_model.safetensors").unlink()  # as if killed before the save
    again = run_sft(cfg, tmp_path / "run", resume=True)
    assert (again.steps, again.resumed_from) == (2, 2)
    assert (tmp_path / "run" / "samples.jsonl").read_text() == order  # no step 3
    restored = _adapter_tensors(again.adapter_dir)
    assert restored.keys() == final.keys()
    assert all(bool((restored[k] == final[k]).all()) for k in final)
    assert not (again.adapter_dir / "optimizer.pt").exists()


def test_each_checkpoint_is_hot_loaded_into_a_running_server(
    tmp_path, tiny_model_dir, demos, monkeypatch
):
    import http.server
    import threading

    from training.sft.trainer import run_sft
    from training.train_config import load_config

    posted: list[dict] = []

    class Server(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # /v1/models: what the server serves so far
            body = json.dumps({"data": [{"id": p["lora_name"]} for p in posted]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            length = int(self.headers["Content-Length"])
            payload = json.loads(self.rfile.read(length))
            if self.path == "/v1/load_lora_adapter":
                posted.append(payload)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv("MODELWRIGHT_ADAPTER_REGISTRY", str(tmp_path / "registry.json"))
    try:
        text = _sft_config(tmp_path, tiny_model_dir, demos, steps=2, save=1).read_text()
        cfg = tmp_path / "serve.yaml"
        url = f"http://127.0.0.1:{httpd.server_port}/v1"
        cfg.write_text(
            text.replace("report_to: [tensorboard]", f"report_to: [], serve_url: '{url}'")
        )
        run_sft(load_config(cfg), tmp_path / "run")
    finally:
        httpd.shutdown()
    assert [p["lora_name"] for p in posted] == ["modelwright-v1", "modelwright-v2"]
    assert [Path(p["lora_path"]).name for p in posted] == ["checkpoint-1", "checkpoint-2"]


def test_a_rows_encoding_is_reused_only_for_the_same_row(tiny_model_dir, demos, tmp_path):
    """Later epochs take a row's encoding from the collator's cache: the same tensors as a fresh
    encode; another row, an abridged view of it or a changed image is encoded anew; the cache
    keeps to its byte bound, dropping the least recently used row first."""
    import torch
    from transformers import AutoProcessor

    from training.sft.data import ConversationCollator, load_conversations
    from training.sft.views import abridge

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    data = load_conversations(demos)
    collator = ConversationCollator(processor)
    first = collator([data[0], data[1]])
    again = collator([data[0], data[1]])  # new dicts from the dataset, the same rows
    assert (collator.misses, collator.hits) == (2, 2)
    assert first.keys() == again.keys()
    assert all(torch.equal(first[k], again[k]) for k in first)
    fresh = ConversationCollator(processor).encode_row(data[0])
    assert all(torch.equal(fresh[k], collator.encode(data[0])[k]) for k in fresh)

    view = collator.encode(abridge(data[0], "no_tools"))
    assert collator.misses == 3 and view["input_ids"].shape[1] < fresh["input_ids"].shape[1]
    row = dict(data[0])
    row["images"] = [data[1]["images"][0], *row["images"][1:]]  # another render, same words
    collator.encode(row)
    assert collator.misses == 4
    image = tmp_path / "render.png"  # an image given as a file: its bytes count, not its path
    image.write_bytes(base64.b64decode(_png((1, 2, 3)).split(",", 1)[1]))
    on_disk = {**data[0], "images": [str(image), *data[0]["images"][1:]]}
    misses, hits = collator.misses, collator.hits
    collator.encode(on_disk)
    collator.encode(on_disk)
    image.write_bytes(base64.b64decode(_png((3, 2, 1)).split(",", 1)[1]))
    collator.encode(on_disk)
    assert (collator.misses - misses, collator.hits - hits) == (2, 1)

    one = sum(t.numel() * t.element_size() for t in fresh.values())
    small = ConversationCollator(processor, cache_bytes=int(one * 1.5))
    small.encode(data[0])
    small.encode(data[2])  # over the bound: row 0, the least recently used, goes
    small.encode(data[2])
    small.encode(data[0])
    assert (small.hits, small.misses) == (1, 3)


def test_prompt_views_drop_prompt_parts_and_keep_every_label(tiny_model_dir, demos):
    """The curriculum's views cut the tools block, the scene JSON, the system prompt and the
    images, and the tokens that carry loss stay exactly those of the full row."""
    from transformers import AutoProcessor

    from training.sft.data import ConversationCollator, load_conversations
    from training.sft.views import VIEWS, abridge

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    tok = processor.tokenizer
    collator = ConversationCollator(processor)
    row = load_conversations(demos)[0]
    full = collator.encode(row)

    def learnt(enc):
        return enc["input_ids"][0][enc["labels"][0] != -100].tolist()

    seen = {}
    for view in VIEWS:
        enc = collator.encode(abridge(row, view))
        assert learnt(enc) == learnt(full)
        seen[view] = tok.decode(enc["input_ids"][0])
    assert "<tools>" in tok.decode(full["input_ids"][0])
    assert all("<tools>" not in text for text in seen.values())
    assert "Scene: " in seen["no_tools"]
    assert "Scene: " not in seen["no_scene"] and "<|image_pad|>" in seen["no_scene"]
    text = seen["goal_only"]
    assert "Scene: " not in text and "<|image_pad|>" not in text
    assert "You build 3D models." not in text and "Goal: add a cube named P0." in text
    assert "TOOLRESULT ok cube" in text  # later turns stay, without their images
    assert row["tools"] and "Scene: " in json.dumps(row["messages"])  # the row is unchanged


def test_a_prompt_curriculum_trains_its_phases_before_the_run(tmp_path, tiny_model_dir, demos):
    import torch
    from safetensors.torch import load_file

    from training.sft.trainer import run_sft
    from training.train_config import PromptPhase, load_config

    path = _sft_config(tmp_path, tiny_model_dir, demos, steps=1, save=1)
    plain = load_config(path)
    plain.sft.full_finetune = True
    staged = plain.model_copy(deep=True)
    staged.sft.prompt_curriculum = [
        PromptPhase(view="goal_only", steps=2), PromptPhase(view="no_scene", steps=1)
    ]
    a = run_sft(plain, tmp_path / "plain")
    b = run_sft(staged, tmp_path / "staged")
    assert a.steps == b.steps == 1  # the phases' steps do not count in max_steps
    phases = json.loads((tmp_path / "staged" / "curriculum.json").read_text())
    assert [(p["view"], p["steps"]) for p in phases] == [("goal_only", 2), ("no_scene", 1)]
    assert all(p["loss"] > 0 for p in phases)
    assert not (tmp_path / "plain" / "curriculum.json").exists()
    # The run proper logs only its own steps, and starts from the phases' weights.
    order = (tmp_path / "staged" / "samples.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in order] == [1]
    wa = load_file(str(a.adapter_dir / "model.safetensors"))
    wb = load_file(str(b.adapter_dir / "model.safetensors"))
    assert any(not torch.equal(wa[k], wb[k]) for k in wa)
