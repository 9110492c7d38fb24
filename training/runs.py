"""Run folders shared by SFT and GRPO: layout, resumable checkpoints, live metrics.

    RUN/config.yaml            the config as run (validated)
    RUN/metrics.jsonl          one JSON object per logging step: step, time, loss, reward,
                               reward/<component>, learning_rate, ... (the studio plots it live)
    RUN/tensorboard/           TensorBoard event files
    RUN/checkpoint-N/          adapter, optimizer, scheduler, RNG states, trainer_state.json,
                               extra state (e.g. the curriculum), and COMPLETE once fully written
    RUN/samples.jsonl          which examples each batch was built from, in order (audit/resume)
    RUN/eval/step-N.json       held-out eval reports every `run.eval_every` checkpoints (and at
                               the last step), with an `eval/...` row in metrics.jsonl each
                               (see `training/eval/run_eval.py`)
    RUN/adapter/               the final adapter
    RUN/adapter-latest/        the newest adapter saved while the run trains (every
                               `run.adapter_every_s` seconds or `run.adapter_every_steps` steps,
                               whichever comes first; `saved.json` holds its step), so the
                               studio's "Use in agent" works before the end

Transformers' Trainer writes a checkpoint in place, so a kill -9 during a save leaves a partial
folder; `COMPLETE` is written by a callback after the Trainer is done with it, and resume only
ever picks a checkpoint that has it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

COMPLETE = "COMPLETE"
LATEST = "adapter-latest"  # agents/models/registry.py lists it under DATA/runs too
SAVED = "saved.json"


def trainer_options(spec: Any, run: Any, out_dir: Path, use_cpu: bool) -> dict[str, Any]:
    """The TRL config fields SFT and GRPO runs share: the stage's (`spec`) steps, rate and
    batch, and the run folder's logging, checkpoints, seed and device (`run`); a stage's own
    `save_steps` (GRPO's) overrides the run's."""
    return {
        "output_dir": str(out_dir),
        "max_steps": spec.max_steps,
        "learning_rate": spec.learning_rate,
        "per_device_train_batch_size": spec.per_device_train_batch_size,
        "gradient_accumulation_steps": spec.gradient_accumulation_steps,
        "activation_checkpointing": spec.gradient_checkpointing,
        "logging_steps": run.logging_steps,
        "save_steps": getattr(spec, "save_steps", None) or run.save_steps,
        "save_total_limit": run.save_total_limit,
        "save_strategy": "steps",
        "seed": run.seed,
        "data_seed": run.seed,
        "report_to": run.report_to,
        "use_cpu": use_cpu,
        "disable_tqdm": False,  # the progress bar with ETA
        "bf16": False,
    }


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest fully written checkpoint in `run_dir`, or None."""
    run_dir = Path(run_dir)
    best: tuple[int, Path] | None = None
    for ckpt in run_dir.glob("checkpoint-*"):
        try:
            step = int(ckpt.name.split("-", 1)[1])
        except ValueError:
            continue
        if (ckpt / COMPLETE).is_file() and (best is None or step > best[0]):
            best = (step, ckpt)
    return best[1] if best else None


def newest_adapter(run_dir: str | Path) -> tuple[Path, int | None] | None:
    """The newest usable adapter of a run (the final RUN/adapter, RUN/adapter-latest saved while
    it trains, or the last complete checkpoint), by when its weights were written, with its
    step when known; None when there is none yet."""
    run_dir = Path(run_dir)
    found: list[tuple[float, Path, int | None]] = []
    final = run_dir / "adapter"
    if (final / "adapter_config.json").is_file():
        found.append((_written(final), final, None))
    latest = run_dir / LATEST
    if (latest / "adapter_config.json").is_file():
        try:
            step = int(json.loads((latest / SAVED).read_text())["step"])
        except (OSError, ValueError, KeyError, TypeError):
            step = None
        found.append((_written(latest), latest, step))
    ckpt = latest_checkpoint(run_dir)
    if ckpt is not None and (ckpt / "adapter_config.json").is_file():
        found.append((_written(ckpt), ckpt, int(ckpt.name.split("-", 1)[1])))
    if not found:
        return None
    _, path, step = max(found, key=lambda f: f[0])
    return path, step


def _written(folder: Path) -> float:
    weights = [p.stat().st_mtime for p in folder.glob("adapter_model.*")]
    return max(weights, default=(folder / "adapter_config.json").stat().st_mtime)


def save_latest_adapter(model: Any, run_dir: Path, step: int, max_steps: int | None) -> Path:
    """Write the LoRA adapter of `model` (a PEFT model) to RUN/adapter-latest, whole or not at
    all: saved beside it, then swapped in (a reader sees the old or the new folder)."""
    import shutil

    dest = run_dir / LATEST
    tmp, old = run_dir / f".{LATEST}.tmp", run_dir / f".{LATEST}.old"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    model.save_pretrained(str(tmp))
    (tmp / SAVED).write_text(json.dumps({"step": step, "max_steps": max_steps,
                                         "time": round(time.time(), 3)}) + "\n")
    _fsync_tree(tmp)
    if dest.exists():
        os.rename(dest, old)
    os.rename(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)
    return dest


def checkpoint_step(ckpt: Path) -> int:
    return int(json.loads((ckpt / "trainer_state.json").read_text())["global_step"])


# What a checkpoint holds beside the weights and the processor: the Trainer's own state and
# ours (the curriculum's `extra_state.json`).
TRAINER_STATE = {"optimizer.pt", "scheduler.pt", "trainer_state.json", "training_args.bin",
                 "extra_state.json", COMPLETE}  # fmt: skip


def weights_from_checkpoint(ckpt: Path, dest: Path) -> int:
    """Copy a checkpoint's weights and processor (not the trainer state) to `dest`; its step.

    A run resumed at (or past) its last step has nothing left to train, but the Trainer would
    still take one step more (seen on this machine: SFT and GRPO runs of `max_steps: 2`
    resumed logged a step 3). Both trainers return this checkpoint instead, saved where a
    finished run saves its result."""
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    for f in ckpt.iterdir():
        if f.is_file() and f.name not in TRAINER_STATE and not f.name.startswith("rng_state"):
            shutil.copy2(f, dest / f.name)
    return checkpoint_step(ckpt)


def truncate_jsonl(path: Path, last_step: int) -> None:
    """Drop lines logged after `last_step` (they will be logged again by the resumed run)."""
    if not path.is_file():
        return
    keep = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line cut short by the kill
        if row.get("step", 0) <= last_step:
            keep.append(line)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(k + "\n" for k in keep))
    os.replace(tmp, path)


def metrics_row(step: int, logs: dict[str, Any], start: float) -> dict[str, Any]:
    """Trainer logs in the studio's shape: `reward` and `reward/<component>` for GRPO."""
    row: dict[str, Any] = {
        "step": step,
        "time": round(time.time(), 3),
        "elapsed_s": round(time.time() - start, 3),
    }
    for key, value in logs.items():
        if not isinstance(value, int | float):
            continue
        name = key
        if key.startswith("rewards/") and key.endswith("/mean"):
            name = "reward/" + key[len("rewards/") : -len("/mean")]
        elif key.startswith("task/"):
            name = "reward/" + key[len("task/") :]
        row[name] = value
    return row


def make_callbacks(
    run_dir: Path,
    extra_state: Any = None,
    serve_url: str | None = None,
    serve_name: str = "",
    eval_config: Any = None,
    run: Any = None,
):
    """Callbacks: metrics JSONL, COMPLETE markers (+ extra state), optional adapter hot-load,
    with `eval_config` whose `run.eval_every` is set, periodic held-out evals, and with `run`
    (a RunSpec) the adapter saved to RUN/adapter-latest as it trains."""
    from transformers import TrainerCallback

    class RunCallback(TrainerCallback):
        """Writes metrics lines, marks checkpoints complete, evaluates the due ones."""

        def __init__(self) -> None:
            self.start = time.time()
            self.metrics = run_dir / "metrics.jsonl"
            self.evals: Any = None
            self.every_s = float(getattr(run, "adapter_every_s", 0) or 0)
            self.every_steps = int(getattr(run, "adapter_every_steps", 0) or 0)
            self.saved_at, self.saved_step = time.monotonic(), 0

        def on_step_end(self, args, state, control, **kwargs):
            """RUN/adapter-latest every `every_s` seconds or `every_steps` steps, whichever
            comes first (not at the last step: the final adapter is saved then)."""
            if not (self.every_s or self.every_steps) or not state.is_world_process_zero:
                return
            step = state.global_step
            if step >= (state.max_steps or 0) > 0 or step <= self.saved_step:
                return
            due = (self.every_steps and step - self.saved_step >= self.every_steps) or (
                self.every_s and time.monotonic() - self.saved_at >= self.every_s)
            model = kwargs.get("model")
            if not due or model is None or not hasattr(model, "peft_config"):
                return  # a full fine-tune saves whole models at its checkpoints only
            save_latest_adapter(model, run_dir, step, state.max_steps)
            self.saved_at, self.saved_step = time.monotonic(), step
            with self.metrics.open("a") as fh:
                fh.write(json.dumps({"step": step, "time": round(time.time(), 3),
                                     "adapter_saved": LATEST}) + "\n")

        def on_train_begin(self, args, state, control, **kwargs):
            if _GOVERNOR is not None and state.is_world_process_zero:
                (run_dir / "cpu.json").write_text(json.dumps(_GOVERNOR.record()))
            if eval_config is None or eval_config.run.eval_every <= 0:
                return
            if args.world_size > 1:
                # Process zero generating alone would leave the others blocked in the next
                # collective (and sharded weights need every rank); score checkpoints with
                # `modelwright eval` instead.
                import logging

                logging.getLogger(__name__).warning(
                    "run.eval_every is ignored with %d processes", args.world_size
                )
                return
            from training.eval.run_eval import PeriodicEval

            self.evals = PeriodicEval(run_dir, eval_config, args.save_steps)
            # A run killed during the eval of its last checkpoint resumes from that checkpoint
            # (the weights are loaded by now): score it before training goes on.
            step = state.global_step
            if (
                state.is_world_process_zero
                and self.evals.due(step, state.max_steps)
                and not self.evals.report_path(step).is_file()
            ):
                self.evals.run(step, kwargs["model"], kwargs.get("processing_class"))

        def on_train_end(self, args, state, control, **kwargs):
            if self.evals is not None:
                self.evals.close()

        def on_step_begin(self, args, state, control, **kwargs):
            # the last step's activations and gradients are freed: their pages go back to the
            # OS (glibc keeps what differently sized batches freed; an SFT stage's resident
            # memory climbed ~27 MB a step without it, 4.5 -> 7.2 GB over 100 steps), every
            # `run.trim_heap_every` steps (faulting them in again each step cost x1.4 on the
            # curriculum's long rows, benchmarks/bench_sft_pack.py --trim; never trimming, its
            # heap grew ~100 MB a step)
            every = getattr(run, "trim_heap_every", 1)
            if every and state.global_step % every == 0:
                trim_heap()
            if _GOVERNOR is not None:  # the machine may have changed: threads for it now
                _GOVERNOR.maybe_apply()

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or not state.is_world_process_zero:
                return
            row = metrics_row(state.global_step, logs, self.start)
            if _GOVERNOR is not None:
                row["cpu_threads"] = _GOVERNOR.threads
            if "max_steps" in dir(state):
                row["max_steps"] = state.max_steps
            with self.metrics.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
                fh.flush()

        def on_save(self, args, state, control, **kwargs):
            if not state.is_world_process_zero:
                return
            ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if not ckpt.is_dir():
                return
            if extra_state is not None:
                (ckpt / "extra_state.json").write_text(json.dumps(extra_state.state_dict()))
            _fsync_tree(ckpt)
            (ckpt / COMPLETE).write_text(str(state.global_step))
            if serve_url:
                _hot_load(serve_url, serve_name, ckpt)
            if self.evals is not None and self.evals.due(state.global_step, state.max_steps):
                self.evals.run(state.global_step, kwargs["model"], kwargs.get("processing_class"))

    return [RunCallback()]


def _fsync_tree(folder: Path) -> None:
    for f in folder.iterdir():
        if f.is_file():
            with f.open("rb") as fh:
                os.fsync(fh.fileno())


def _hot_load(serve_url: str, name: str, ckpt: Path) -> None:
    """Load the new adapter into a running server; a down server must not stop training."""
    import logging

    from agents.serving.adapters import load_adapter

    try:
        loaded = load_adapter(serve_url, name, ckpt, unload_previous=True)
        logging.getLogger(__name__).info("hot-loaded %s into %s", loaded.served_name, serve_url)
    except Exception as exc:  # noqa: BLE001 - logged; training goes on
        logging.getLogger(__name__).warning(
            "could not hot-load %s into %s: %s", ckpt, serve_url, exc
        )


def restore_extra_state(ckpt: Path | None, extra_state: Any) -> None:
    if ckpt is not None and extra_state is not None and (ckpt / "extra_state.json").is_file():
        extra_state.load_state_dict(json.loads((ckpt / "extra_state.json").read_text()))


def prepare_run_dir(run_dir: Path, config_text: str, resume: bool) -> Path | None:
    """Create the folder; with `resume`, return the checkpoint to continue from (or None)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    ckpt = latest_checkpoint(run_dir) if resume else None
    if not resume and any(run_dir.glob("checkpoint-*")):
        raise FileExistsError(
            f"{run_dir} already holds checkpoints: pass --resume to continue it, or --out NEW_DIR"
        )
    if ckpt is not None:
        step = checkpoint_step(ckpt)
        truncate_jsonl(run_dir / "metrics.jsonl", step)  # eval rows carry their step too
        truncate_jsonl(run_dir / "samples.jsonl", step)
    else:
        step = -1
        for name in ("metrics.jsonl", "samples.jsonl"):
            (run_dir / name).unlink(missing_ok=True)
    # Eval reports past the checkpoint (or all, for a fresh run) will be written again.
    for report in run_dir.glob("eval/step-*.json"):
        try:
            stale = int(report.stem.split("-", 1)[1]) > step
        except ValueError:
            continue
        if stale:
            report.unlink()
    if ckpt is None:  # a fresh run: an earlier run's adapter is not this one's newest
        import shutil

        shutil.rmtree(run_dir / LATEST, ignore_errors=True)
    (run_dir / "config.yaml").write_text(config_text)
    return ckpt


def tensorboard_dir(run_dir: Path) -> Path:
    """Point transformers' TensorBoard callback at RUN/tensorboard (it reads an env variable)."""
    path = run_dir / "tensorboard"
    os.environ["TENSORBOARD_LOGGING_DIR"] = str(path)
    return path


def score_loss_positions_only() -> None:
    """On a CPU, let TRL's fused LM head score only the positions the loss counts.

    TRL (1.16) computes the head and log-softmax over the 49k-token vocabulary at the valid
    label positions only on CUDA/XPU, and at every position elsewhere, to keep compiled tile
    shapes fixed on accelerators that recompile. A CPU recompiles nothing, and an SFT row of
    the real base is a ~600-token prompt with a ~30-token reply: scoring all positions was a
    third of a step (docs/TRAINING.md, "The fifth run"). The loss and its gradient are those of
    the same positions either way. No-op where TRL lacks the switch."""
    import trl.trainer.utils as trl_utils

    current = getattr(trl_utils, "_use_triton", None)
    if current is None or getattr(current, "modelwright_cpu", False):
        return

    def compact(device, _inner=current) -> bool:
        return device.type == "cpu" or _inner(device)

    compact.modelwright_cpu = True  # type: ignore[attr-defined]
    trl_utils._use_triton = compact


_GOVERNOR: Any = None  # the running stage's torch thread choice (agents/models/cpu.py)


# glibc's mallopt parameters (malloc.h): the most malloc arenas, the size from which a block
# is its own mapping.
_M_ARENA_MAX = -8
_M_MMAP_THRESHOLD = -3
# 2 MB, not 1: each freed mapping is a fresh one to fault in next step. On the shipped SFT
# (25 steps, docs/TRAINING.md "Memory"), 1 MB took 9.2 s a step (40 % of its CPU in the
# kernel, zeroing new pages) against 6.1 s with glibc's own threshold; 2 MB (with batches
# padded to 64 tokens) took 6.2 s.
MMAP_THRESHOLD = 2 << 20


def mmap_threshold_setting(environ: dict | None = None) -> int | None:
    """The mmap threshold training sets: `MODELWRIGHT_MMAP_THRESHOLD` (bytes; `default`:
    glibc's own, which rises with the blocks freed), else `MMAP_THRESHOLD`."""
    import os

    raw = (os.environ if environ is None else environ).get("MODELWRIGHT_MMAP_THRESHOLD", "")
    if not raw.strip():
        return MMAP_THRESHOLD
    if raw.strip().lower() == "default":
        return None
    from tools.cli.exits import UserError

    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise UserError(f"MODELWRIGHT_MMAP_THRESHOLD={raw!r}: a number of bytes, or default")
    return value


def allocator_args(run: Any) -> dict:
    """`bound_allocator`'s arguments for a run: its `run.mmap_threshold_mb`, else the env's."""
    mb = getattr(run, "mmap_threshold_mb", None)
    return {"mmap_threshold": mb << 20} if mb else {}


def bound_allocator(arenas: int = 2, mmap_threshold: int | None | str = "env") -> bool:
    """Bound what glibc's malloc keeps that no live object uses, for the running process:

    - at most `arenas` heaps (MALLOC_ARENA_MAX). By default every thread that meets contention
      gets its own arena, up to 8 per core, and each keeps the memory its thread freed;
    - every block of `mmap_threshold` bytes or more its own mapping (MALLOC_MMAP_THRESHOLD_),
      handed back to the OS when freed. By default the threshold rises to the largest block
      freed so far (up to 32 MB), so a training step's activations, a few MB each and of other
      sizes every step, came from the heap, which fragmented: an SFT stage climbed ~16 MB a
      step even with the heap trimmed before every step (docs/TRAINING.md, "Memory").

    `mmap_threshold`: "env" reads `mmap_threshold_setting()`; None leaves glibc's own.
    Arenas a thread already has stay; call it before the threads start. Where memory is
    allocated changes no computed value. False where there is no glibc."""
    if mmap_threshold == "env":
        mmap_threshold = mmap_threshold_setting()
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        ok = bool(libc.mallopt(_M_ARENA_MAX, int(arenas)))
        if mmap_threshold is not None:
            ok = ok and bool(libc.mallopt(_M_MMAP_THRESHOLD, int(mmap_threshold)))
        return ok
    except (OSError, AttributeError):
        return False


def trim_heap() -> None:
    """Hand the allocator's free pages back to the OS (glibc `malloc_trim`); no-op elsewhere."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def set_cpu_threads(n: int | None) -> dict | None:
    """torch threads for this stage on a CPU: at most `n`, as many as cores are free now
    (`MODELWRIGHT_THREADS` fixes it); measured again between steps. Returns what was chosen
    (threads, busy cores elsewhere, OpenMP wait policy), which the run writes to cpu.json."""
    global _GOVERNOR
    if not n:
        _GOVERNOR = None
        return None
    from agents.models.cpu import ThreadGovernor

    _GOVERNOR = ThreadGovernor(cap=n)
    _GOVERNOR.apply()
    record = _GOVERNOR.record()
    print(f"cpu: {record['cpu_threads']} torch thread(s) of {record['cpu_cores']} core(s) "
          f"({record['busy_elsewhere']} busy elsewhere, {record['threads_from']}), OpenMP "
          f"wait policy {record['omp_wait_policy']}", flush=True)  # fmt: skip
    return record
