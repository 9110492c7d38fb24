"""Export: Parquet that `datasets` loads as TRL conversational rows, which the tiny Qwen3-VL
processor and TRL's vision collator (what SFT consumes) accept; failures leave OUT as it was."""

from __future__ import annotations

import io
import json
from importlib import resources
from pathlib import Path

import datasets
import pytest
from PIL import Image

from agents.store import CorruptFrame, EpisodeFilter, ExportError, Store
from agents.store.conversation import ALL_ROLES, inline_images
from agents.store.export import export_parquet
from agents.store.importer import import_into

TOOLS = [
    {"name": "add_primitive", "description": "Add a primitive.", "mutating": True,
     "kernel": "blender", "parameters": {"type": "object", "properties": {
         "kind": {"type": "string", "enum": ["cube", "sphere"]},
         "dimensions": {"type": "array", "items": {"type": "number"}}}, "required": ["kind"]}},
    {"name": "set_material", "description": "Colour an object.", "mutating": True,
     "kernel": "blender", "parameters": {"type": "object", "properties": {
         "name": {"type": "string"}, "color": {"type": "string"}}}},
]


def png(shade: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (shade, 0, 0)).save(buf, "PNG")
    return buf.getvalue()


def record(store: Store, *, success: bool = True, source: str = "oracle", family: str = "prim") -> str:
    """Initial frame shade 10, then frames 11, 12 (step 1 has none), 13: the image order."""
    rec = store.begin_episode(task_id=f"{family}:1:3", task_params={"n": 1}, source=source,
                              tools=TOOLS, system="You build 3D models.", prompt="A red cube.",
                              initial_frame=png(10))
    rec.add_step(tool="add_primitive", args={"kind": "cube", "dimensions": [1, 2, 3]},
                 result={"name": "Cube"}, frame=png(11), scene_hash="h0",
                 model_message="I add a cube, then colour it.", turn=0)
    rec.add_step(tool="set_material", args={"name": "Cube", "color": "#ff0000"}, result="ok",
                 scene_hash="h1", turn=0)
    rec.add_step(tool="add_primitive", args={"kind": "cone"}, error_kind="validation",
                 error_message="kind must be cube or sphere", frame=png(12), scene_hash="h1")
    rec.add_step(tool="add_primitive", args={"kind": "sphere"}, result={"name": "Sphere"},
                 frame=png(13), scene_hash="h2")
    return rec.finish(reward=0.5, components={"iou": 0.25, "validity": 1.0}, success=success,
                      final_message="Done: a red cube and a sphere.").id


def load(path: Path, split="train"):
    return datasets.load_dataset("parquet", data_files=str(path), split=split)


def test_export_loads_with_datasets_in_trl_conversational_format(tmp_path):
    with Store(tmp_path / "store") as store:
        eid = record(store)
        record(store, success=False, source="agent", family="cad")
        store.begin_episode(prompt="still running")  # never exported
        report = export_parquet(store, tmp_path / "out")
    assert (report.episodes, report.steps, report.images) == (2, 8, 8)
    ds = load(tmp_path / "out" / "episodes.parquet")
    assert ds.num_rows == 2
    assert isinstance(ds.features["images"].feature, datasets.Image)
    row = next(r for r in ds if r["episode_id"] == eid)
    m = row["messages"]
    assert [x["role"] for x in m] == ["system", "user", "assistant", "tool", "tool", "assistant",
                                      "tool", "assistant", "tool", "assistant"]
    assert m[0]["content"] == [{"type": "text", "text": "You build 3D models."}]
    assert m[1]["content"] == [{"type": "text", "text": "A red cube."}, {"type": "image", "text": None}]
    # one assistant reply, two calls; arguments are JSON strings
    assert m[2]["content"] == [{"type": "text", "text": "I add a cube, then colour it."}]
    calls = m[2]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["add_primitive", "set_material"]
    assert all(c["type"] == "function" for c in calls)
    assert json.loads(calls[0]["function"]["arguments"]) == {"kind": "cube", "dimensions": [1, 2, 3]}
    assert m[3]["content"] == [{"type": "text", "text": '{"name":"Cube"}'}, {"type": "image", "text": None}]
    assert m[4]["content"] == [{"type": "text", "text": "ok"}]  # no frame: no image part
    assert m[5]["content"] is None  # tool-call-only turn: content null, not ""
    assert m[6]["content"][0]["text"] == "ERROR (validation): kind must be cube or sphere"
    assert m[9] == {"role": "assistant", "content": [{"type": "text", "text":
                    "Done: a red cube and a sphere."}], "tool_calls": None}
    shades = [img.convert("RGB").getpixel((0, 0))[0] for img in row["images"]]
    assert shades == [10, 11, 12, 13]  # the order of the placeholders
    tools = json.loads(row["tools"])
    assert tools[0] == {"type": "function", "function": {
        "name": "add_primitive", "description": "Add a primitive.",
        "parameters": TOOLS[0]["parameters"]}}
    assert (row["reward"], json.loads(row["components"]), row["success"]) == (
        0.5, {"iou": 0.25, "validity": 1.0}, True)
    assert (row["task"], row["task_family"], row["source"], row["n_steps"]) == (
        "prim:1:3", "prim", "oracle", 4)
    steps = load(tmp_path / "out" / "steps.parquet")
    assert steps.num_rows == 8
    s = [r for r in steps if r["episode_id"] == eid]
    assert [r["index"] for r in s] == [0, 1, 2, 3] and s[1]["frame"] is None
    assert s[0]["frame"].convert("RGB").getpixel((0, 0))[0] == 11
    assert (s[2]["error_kind"], s[0]["scene_hash"], json.loads(s[0]["arguments"])["kind"]) == (
        "validation", "h0", "cube")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["episodes"] == 2 and list(manifest["tool_specs"].values()) == [TOOLS]


def test_export_filters(tmp_path):
    with Store(tmp_path / "store") as store:
        record(store)
        record(store, success=False, source="agent", family="cad")
        r = export_parquet(store, tmp_path / "out", EpisodeFilter(success=True))
        assert r.episodes == 1
        assert load(tmp_path / "out" / "episodes.parquet")["source"] == ["oracle"]
        r = export_parquet(store, tmp_path / "out2", EpisodeFilter(task_family="cad"))
        assert load(tmp_path / "out2" / "episodes.parquet")["task_family"] == ["cad"]


def test_rows_pass_the_tiny_processor_chat_template_and_trl_collator(tmp_path, tiny_model_dir):
    from transformers import AutoProcessor
    from trl.trainer.sft_trainer import DataCollatorForVisionLanguageModeling

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    with Store(tmp_path / "store") as store:
        record(store)
        record(store, success=False)
        export_parquet(store, tmp_path / "out")
    ds = load(tmp_path / "out" / "episodes.parquet")
    for row in ds:
        # the processor's own chat template, with the tools, every image in its turn
        messages, left = inline_images(row["messages"], row["images"], ALL_ROLES)
        assert left == []
        out = processor.apply_chat_template(messages, tools=json.loads(row["tools"]),
                                            tokenize=True, return_dict=True)
        assert out["image_grid_thw"].shape[0] == len(row["images"]) == 4
        text = processor.decode(out["input_ids"][0] if hasattr(out["input_ids"][0], "__len__")
                                else out["input_ids"])
        assert '"name": "add_primitive"' in text and "<tool_response>" in text
        assert "<|im_start|>assistant\n<tool_call>" in text  # content null renders no "\n\n"
    # TRL's vision collator, as SFTTrainer builds it (training template, assistant-only loss)
    training_template = (resources.files("trl") / "chat_templates" /
                         "qwen3_vl_training.jinja").read_text()
    collator = DataCollatorForVisionLanguageModeling(
        processor, assistant_only_loss=True, chat_template=training_template)
    batch = []
    for row in ds:
        messages, images = inline_images(row["messages"], row["images"])  # tool-turn images
        batch.append({"messages": messages, "images": images})
    out = collator(batch)
    assert out["image_grid_thw"].shape[0] == 8
    labels = out["labels"][0][out["labels"][0] != -100]
    trained = processor.decode(labels)
    assert "<tool_call>" in trained and "Done: a red cube" in trained
    assert "<tool_response>" not in trained and "A red cube." not in trained


def test_export_to_an_unwritable_dir_is_a_clear_error(tmp_path):
    with Store(tmp_path / "store") as store:
        record(store)
        blocker = tmp_path / "a-file"
        blocker.write_text("not a folder")
        with pytest.raises(ExportError, match="cannot write the export to .*a-file/out"):
            export_parquet(store, blocker / "out")
        with pytest.raises(ExportError, match="cannot write the export to /sys/modelwright"):
            export_parquet(store, Path("/sys/modelwright-export"))
        assert blocker.read_text() == "not a folder"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "store"]


def test_a_corrupt_frame_fails_the_export_and_leaves_out_as_it_was(tmp_path):
    out = tmp_path / "out"
    with Store(tmp_path / "store") as store:
        eid = record(store)
        export_parquet(store, out)
        before = {p.name: p.read_bytes() for p in out.iterdir()}
        frame = store.episode_dir(eid) / store.steps(eid)[2].frame
        frame.write_bytes(frame.read_bytes()[:-30])
        with pytest.raises(CorruptFrame, match=f"episode {eid}.*000002.png"):
            export_parquet(store, out)
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no temp folder either


def test_export_then_import_round_trips(tmp_path):
    with Store(tmp_path / "a") as a:
        eid = record(a)
        export_parquet(a, tmp_path / "out")
        src_ep, src_steps = a.episode(eid), a.steps(eid)
    with Store(tmp_path / "b") as b:
        report = import_into(b, tmp_path / "out")
        assert report.kind == "export" and report.imported == [eid]
        ep = b.episode(eid)
        assert ep.to_dict() == {**src_ep.to_dict(), "artifacts": []}  # exports carry no artifacts
        assert b.steps(eid) == src_steps
        assert b.initial_frame(ep) == png(10)
        export_parquet(b, tmp_path / "again")
    assert load(tmp_path / "again" / "episodes.parquet")["messages"] == load(
        tmp_path / "out" / "episodes.parquet")["messages"]
