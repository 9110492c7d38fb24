"""The Agent dock says what the selected agent can do before a run (the shipped adapter's
measured table; for the bare base, that it makes no tool calls and what to use instead), says
plainly when a run made no tool call and what to try, and keeps every run's transcript (a
"Run N" header each, a selector that jumps to one). Offscreen Qt, the real tool runtime, the
real packaged base."""

from __future__ import annotations

import os
from pathlib import Path

os.environ["QT_QPA_PLATFORM"] = "offscreen"

import pytest  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402
from studio_support import fresh_scene, studio_window  # noqa: E402
from test_shipped_adapter import pipeline_run  # noqa: E402

from agents.models.registry import BASE_NAME  # noqa: E402
from agents.models.shipped import ENV_VAR, ship  # noqa: E402


@pytest.fixture(scope="module")
def agents_dir(tmp_path_factory):
    """A folder of shipped adapters for this module (empty: the bare base is the default)."""
    root = tmp_path_factory.mktemp("agents")
    before = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = str(root)
    yield root
    if before is None:
        os.environ.pop(ENV_VAR, None)
    else:
        os.environ[ENV_VAR] = before


@pytest.fixture(scope="module")
def studio(qapp, worker_pool, tmp_path_factory, request, agents_dir, base_data_dir):
    root = tmp_path_factory.mktemp("agent-dock")
    link = root / "data" / "models" / BASE_NAME  # the packaged base, as if built there
    link.parent.mkdir(parents=True)
    link.symlink_to(base_data_dir / "models" / BASE_NAME, target_is_directory=True)
    with studio_window(worker_pool, root, request) as window:
        yield window


def lines(dock) -> list[str]:
    return [dock.steps.item(i).text() for i in range(dock.steps.count())]


def test_before_a_run_it_says_what_the_selected_agent_can_do(studio, agents_dir, tmp_path):
    dock = studio.agent
    dock.policy.setCurrentText("hf")
    dock.model.clear()
    dock.adapter.clear()
    bare = dock.about.text()  # nothing shipped: the default local agent is the bare base
    assert f"The bare {BASE_NAME} makes no tool calls" in bare and "Ollama" in bare
    assert "modelwright serve" in bare and "Use in agent" in bare
    ship(pipeline_run(tmp_path / "run"), None, "smollm2-level1", dest=agents_dir)
    dock.update_about()
    shipped = dock.about.text()
    assert shipped.startswith("Local agent smollm2-level1 (shipped, on smollm2-135m-instruct) "
                              "can do one-call edits: add a primitive, set a material, delete, "
                              "move; ~97 % of its 60 test tasks solved")
    dock.fill_local()
    names = [dock.local.itemText(i) for i in range(dock.local.count())]
    assert "Local agent (default): smollm2-level1" in names
    shipped_item = names.index("    smollm2-level1 (adapter, shipped)")
    base_item = names.index(next(n for n in names if n.startswith(f"{BASE_NAME} (")))
    assert shipped_item > base_item  # listed under the base it was trained on
    assert dock.local.itemData(shipped_item, Qt.ItemDataRole.ToolTipRole) == (
        "adapter on smollm2-135m-instruct\n"
        "variants: standard; fast (tick Fast): made on first use")
    # a fast variant made (agents/models/variants.py): its size and the speed measured here
    made = Path(studio.controller.data_dir) / "variants" / "smollm2-level1-0123456789abcdef.q8_0.gguf"
    made.parent.mkdir(parents=True, exist_ok=True)
    with open(made, "wb") as f:
        f.truncate(145_000_000)
    made.with_suffix(".speed.json").write_text(
        '{"turns": 40, "new_tokens": 1720, "decode_s": 20.0, "prompt_encoded": 9000, '
        '"prefill_s": 30.0}')
    dock.fill_local()
    assert dock.local.itemData(shipped_item, Qt.ItemDataRole.ToolTipRole).endswith(
        "variants: standard; fast (llama.cpp q8_0, 145 MB, 86 new tokens/s here)")
    made.unlink()
    made.with_suffix(".speed.json").unlink()
    bare_item = next(i for i in range(dock.local.count())
                     if dock.local.itemText(i).startswith(f"{BASE_NAME} ("))
    dock.local.setCurrentIndex(bare_item)
    dock.local.activated.emit(bare_item)  # the person picks the bare base
    assert dock.model.text() == BASE_NAME and dock.adapter.text() == ""
    words = dock.about.text()
    assert "makes no tool calls (0 % valid calls on its test tasks)" in words  # the table's
    assert "the shipped agent smollm2-level1 (clear Model and Adapter)" in words
    request = dock.request()
    assert request.policy == f"hf:{BASE_NAME}" and "adapter" not in request.options
    assert request.prose_stop_tokens == 12
    dock.model.clear()  # back to the default: the shipped adapter, its trained tools
    request = dock.request()
    assert request.options["adapter"] == str(agents_dir / "smollm2-level1")
    assert request.options["goal_tools"] == ["add_primitive", "set_material", "delete",
                                             "transform"]
    assert "variant" not in request.options
    dock.fast.setChecked(True)  # the fast variant (--variant fast)
    assert dock.request().options["variant"] == "fast"
    dock.fast.setChecked(False)
    # a curriculum adapter keeps a rule for a goal's toolbox (its prompts showed each
    # family's): the dock hands it over with the default tools
    rule = [{"name": "cad", "words": ["hole"], "tools": ["cad_box", "cad_hole"]}]
    ship(pipeline_run(tmp_path / "cur"), None, "smollm2-curriculum", dest=agents_dir,
         toolboxes=rule)
    request = dock.request()
    assert request.options["adapter"] == str(agents_dir / "smollm2-curriculum")
    assert request.options["goal_toolboxes"] == rule
    dock.policy.setCurrentText("oracle")
    assert dock.about.text().startswith("Plays the chosen task's own solution")
    for folder in (agents_dir / "smollm2-level1", agents_dir / "smollm2-curriculum",
                   agents_dir / "DEFAULT"):  # as it was
        if folder.is_dir():
            import shutil

            shutil.rmtree(folder)
        else:
            folder.unlink()
    dock.policy.setCurrentText("hf")
    assert "makes no tool calls" in dock.about.text()


def test_a_run_without_a_tool_call_says_so_and_what_to_try(studio, qtbot, agents_dir):
    """The bare base answers a goal in prose: stopped after the token budget, the run ends
    with no call, and the dock says so in words, not only in a status."""
    w = fresh_scene(studio, qtbot)
    dock = w.agent
    dock.policy.setCurrentText("hf")
    dock.model.clear()
    dock.adapter.clear()
    dock.use_task.setChecked(False)
    dock.approval.setChecked(False)
    qtbot.keyClicks(dock.goal, "Write a short poem about the sea.")
    with qtbot.waitSignal(dock.sig_finished, timeout=600_000) as done:
        dock.run_button.click()
    summary = done.args[0]
    assert summary["status"] == "done" and summary["calls"] == 0, summary
    assert summary["tokens_out"] == 12  # the first reply's budget, in tokens
    shown = lines(dock)
    hint = next(t for t in shown if t.startswith("No tool call was made"))
    assert "the scene is unchanged" in hint and "pick a task in the Task dock" in hint
    assert "Ollama or `modelwright serve`" in hint
    assert "no tool call made" in dock.status.text()
    assert not w.controller.scene.objects


def test_every_run_keeps_its_transcript(studio, qtbot):
    w = fresh_scene(studio, qtbot)
    dock = w.agent
    dock.policy.setCurrentText("none")
    dock.use_task.setChecked(False)
    before = len(dock.run_headers())
    for goal in ("first goal", "second goal"):
        dock.goal.setPlainText(goal)
        with qtbot.waitSignal(dock.sig_finished, timeout=120_000):
            dock.run()
    headers = dock.run_headers()[before:]
    assert [h.split(": ", 1)[1].split(" (")[0] for h in headers] == ["first goal", "second goal"]
    shown = lines(dock)
    first = shown.index(headers[0])
    assert any(t.startswith("end: ") for t in shown[first:shown.index(headers[1])])  # kept
    assert "No tool call was made: the none policy never makes one." in shown
    assert dock.runs.count() == len(dock.run_headers()) and dock.runs.currentIndex() == \
        dock.runs.count() - 1
    assert dock.runs.itemText(dock.runs.count() - 1).startswith(f"Run {before + 2}: second goal")
    dock.show_run(before)  # the selector jumps to an earlier run
    from studio.project.contents import chat_of, restore_chat

    runs = dock.runs.count()
    restore_chat(dock, chat_of(dock))  # a project saved and opened again: its runs are listed
    assert dock.runs.count() == runs and dock.run_headers()[before:] == headers
    dock.steps.clear()  # File > New clears the chat: the selector follows
    assert dock.runs.count() == 0 and not dock.runs.isEnabled()


def test_a_run_whose_every_call_failed_says_nothing_changed(studio, qtbot, tmp_path):
    w = fresh_scene(studio, qtbot)
    dock = w.agent
    script = tmp_path / "calls.jsonl"
    script.write_text('{"tool": "transform", "args": {"name": "Nope", "location": [0, 0, 1]}}\n')
    dock.policy.setCurrentText(f"script:{script}")
    dock.use_task.setChecked(False)
    dock.approval.setChecked(False)
    dock.goal.setPlainText("move Nope up")
    with qtbot.waitSignal(dock.sig_finished, timeout=120_000) as done:
        dock.run()
    summary = done.args[0]
    assert summary["calls"] == 1 and summary["tool_errors"] == 1, summary
    hint = next(t for t in lines(dock) if t.startswith("Nothing was changed"))
    assert hint.startswith("Nothing was changed: its tool call failed (the errors are above), "
                           "and the scene is as it was. Try: pick a task")
    assert "every tool call failed" in dock.status.text()
