"""GRPO resume after kill -9: the resumed run keeps the step counter, the prompt order and the
curriculum of an uninterrupted run (real TRL, PEFT, tiny model and sandboxed tool workers).

The tiny model is random, so its rollouts call no tools; the tasks they are drawn for still go
through the curriculum (by step number), which is what the data order is made of.
Two curriculum buckets (levels 1 and 2) make the draws depend on the saved success history, so
a resume that lost the curriculum state would draw different tasks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STEPS = 3


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _grpo_config(tmp_path: Path, model_dir: Path) -> Path:
    cfg = tmp_path / "grpo.yaml"
    cfg.write_text(
        f"kind: grpo\nmodel: {{path: {model_dir}}}\ntools: [add_primitive]\n"
        "run: {seed: 3, save_steps: 1, report_to: []}\n"
        "grpo: {tasks: {families: [primitive_placement], levels: [1, 2]},"
        f" max_steps: {STEPS}, per_device_train_batch_size: 2, num_generations: 2,"
        " max_completion_length: 32, max_turns: 1, render_size: 64}\n"
    )
    return cfg


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _curricula(run_dir: Path) -> dict[int, dict]:
    """The curriculum state saved with each checkpoint, by step."""
    return {
        int(c.name.split("-")[1]): json.loads((c / "extra_state.json").read_text())
        for c in run_dir.glob("checkpoint-*")
    }


def _killable(run_dir: Path) -> bool:
    if not (run_dir / "checkpoint-1" / "COMPLETE").is_file():
        return False
    try:
        return any(r["step"] >= 2 for r in _rows(run_dir / "samples.jsonl"))
    except ValueError:  # a line being written
        return False


@pytest.fixture(scope="module")
def straight(tmp_path_factory, tiny_model_dir):
    """(config, run folder) of a run of STEPS steps, never interrupted."""
    import torch

    from training.rl.grpo import run_grpo
    from training.train_config import load_config

    tmp_path = tmp_path_factory.mktemp("grpo-straight")
    cfg_path = _grpo_config(tmp_path, tiny_model_dir)
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # as `one_torch_thread`, which a module fixture runs before
    try:
        reference = run_grpo(load_config(cfg_path), tmp_path / "straight")
    finally:
        torch.set_num_threads(before)
    assert reference.steps == STEPS
    return cfg_path, tmp_path / "straight"


def test_grpo_resume_after_kill_continues_step_counter_and_data_order(tmp_path, straight):
    from training.rl.grpo import run_grpo
    from training.runs import checkpoint_step, latest_checkpoint
    from training.train_config import load_config

    cfg_path, straight = straight
    order = _rows(straight / "samples.jsonl")
    assert [r["step"] for r in order] == list(range(1, STEPS + 1))
    assert all(len(r["tasks"]) == 2 and r["tasks"][0] == r["tasks"][1] for r in order)  # a group

    run_dir = tmp_path / "killed"
    log = tmp_path / "killed.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "studio.cli", "train", "grpo"]
            + ["--config", str(cfg_path), "--out", str(run_dir)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
    try:
        # Kill it mid-step: checkpoint-1 is complete and step 2's rollouts are already logged
        # in samples.jsonl, so the resume has lines past its checkpoint to drop.
        deadline = time.time() + 240
        while not _killable(run_dir):
            assert proc.poll() is None and time.time() < deadline, (
                "the run ended before it could be killed:\n" + log.read_text()[-3000:]
            )
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)  # its sandboxed workers die with it (--die-with-parent)
        proc.wait()
    last_step = checkpoint_step(latest_checkpoint(run_dir))
    assert 1 <= last_step < STEPS

    resumed = run_grpo(load_config(cfg_path), run_dir, resume=True)
    assert resumed.resumed_from == last_step and resumed.steps == STEPS
    # Same steps, same tasks per step, whether or not the run was killed on the way.
    assert _rows(run_dir / "samples.jsonl") == order
    logged = [r["step"] for r in _rows(run_dir / "metrics.jsonl")]
    assert logged[:STEPS] == list(range(1, STEPS + 1))
    state = json.loads((run_dir / f"checkpoint-{STEPS}" / "trainer_state.json").read_text())
    assert state["global_step"] == STEPS
    # The curriculum (success history, tasks assigned to slots) went on as if never stopped.
    assert _curricula(run_dir) == _curricula(straight)


def _tensors(adapter_dir: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(adapter_dir / "adapter_model.safetensors"))


def test_resuming_a_finished_grpo_run_trains_nothing_more(straight):
    """The Trainer resumed at its last step would take one step more (rollouts, an update);
    the run returns its last checkpoint's adapter instead."""
    from training.rl.grpo import run_grpo
    from training.train_config import load_config

    cfg_path, run_dir = straight
    samples, metrics = (
        (run_dir / "samples.jsonl").read_text(),
        (run_dir / "metrics.jsonl").read_text(),
    )
    final = _tensors(run_dir / "adapter")
    (run_dir / "adapter" / "adapter_model.safetensors").unlink()  # as if killed before the save
    again = run_grpo(load_config(cfg_path), run_dir, resume=True)
    assert (again.steps, again.resumed_from) == (STEPS, STEPS)
    assert (run_dir / "samples.jsonl").read_text() == samples  # no step STEPS + 1
    assert (run_dir / "metrics.jsonl").read_text() == metrics
    restored = _tensors(again.adapter_dir)
    assert restored.keys() == final.keys()
    assert all(bool((restored[k] == final[k]).all()) for k in final)
    assert not (again.adapter_dir / "optimizer.pt").exists()
    assert not (again.adapter_dir / "extra_state.json").exists()
