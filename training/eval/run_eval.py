"""Held-out evaluation of a model in memory, for the pipeline's stages and for training runs.

The pipeline scores each stage (`untrained`, `sft`, `grpo`) with `evaluate_loaded`; a training
run with `run.eval_every: N` scores the model it is training on every N-th checkpoint (and the
last), through `PeriodicEval`, called by the run callback (`training/runs.py`) once the
checkpoint is complete:

    RUN/eval/step-N.json   the eval report (episodes, overall, families), `schema_valid_calls`
                           and `step`
    RUN/metrics.jsonl      one row {"step": N, "eval/valid_call_rate", "eval/success_rate",
                           "eval/mean_reward", "eval/episodes", ...} next to the training rows
    RUN/tensorboard/eval/  the same scalars, for TensorBoard (when it is in `run.report_to`)

Held-out tasks and budgets come from the config's `eval:` section; decoding is greedy, so the
reports at different steps differ only by the weights. A failing evaluation never stops the
run: it is logged and recorded as `{"step": N, "eval/error": ...}`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from training.eval.stats import stage_summary
from training.train_config import TrainConfig

log = logging.getLogger(__name__)


def task_ids(families: list[str], levels: list[int], split: str, per_family: int,
             phrasing: str = "seen") -> list[str]:  # fmt: skip
    """`per_family` ids per family, cycling `levels`, seeds from the start of the split's range.
    `phrasing`: `unseen` gives the same tasks in held-out phrasings (`...:unseen`), `both` the
    seen ids then the unseen ones (training/tasks/wording.py)."""
    from training.tasks import SPLITS

    seeds = SPLITS[split]
    tails = {"seen": ("",), "unseen": (":unseen",), "both": ("", ":unseen")}[phrasing]
    return [
        f"{f}:{levels[k % len(levels)]}:{seeds[k]}{tail}"
        for tail in tails for f in families for k in range(per_family)
    ]


def eval_ids(config: TrainConfig) -> list[str]:
    """The task ids of the config's `eval:` stage, in the order they run."""
    spec = config.eval
    return task_ids(spec.families, spec.levels, spec.split, spec.per_family, spec.phrasing)


def run_episodes(
    ids: list[str],
    policy_factory: Callable[[], Any],
    max_steps: int,
    workers: int = 1,
    progress: Callable[[dict, int, int], None] | None = None,
) -> dict:
    """One episode per task id through the eval harness; returns its report."""
    from agents import LoopConfig
    from training.eval.harness import evaluate, task_spec

    return evaluate(
        [task_spec(t) for t in ids],
        policy_factory,
        workers=workers,
        config=LoopConfig(max_steps=max_steps, observe="auto"),
        progress=progress,
    )


class CallCounter:
    """Wraps a policy and counts its calls that parse and pass the tool's schema.

    An episode whose first reply has no call counts as one invalid attempt, so a model that
    never writes a parseable call scores 0 rather than 0/0.
    """

    def __init__(self, inner: Any, tally: dict, lock: threading.Lock) -> None:
        self.inner, self.tally, self.lock = inner, tally, lock
        self.name = inner.name
        self._turn = 0
        self._task: str | None = None

    def reset(self, task_info: dict | None = None) -> None:
        self._turn = 0
        self._task = (task_info or {}).get("task_id")
        self.inner.reset(task_info)

    def prompt_budget(self) -> Any:
        ask = getattr(self.inner, "prompt_budget", None)
        return ask() if callable(ask) else None

    def act(self, messages: list[dict], tools: list[dict]):
        from tools import ToolError, validate_call

        reply = self.inner.act(messages, tools)
        valid = 0
        for call in reply.tool_calls:
            try:
                validate_call(call.name, call.arguments if call.parsed else None)
                valid += call.parsed
            except ToolError:
                pass
        attempts = len(reply.tool_calls) or (1 if self._turn == 0 else 0)
        with self.lock:
            self.tally["valid"] += valid
            self.tally["attempts"] += attempts
            if self._task is not None:  # each episode's own, for a resumed eval's journal
                own = self.tally.setdefault("by_task", {}).setdefault(self._task, [0, 0])
                own[0] += valid
                own[1] += attempts
        self._turn += 1
        return reply


def evaluate_loaded(
    config: TrainConfig,
    model: Any,
    processor: Any,
    label: str,
    progress: Callable[[dict, int, int], None] | None = None,
    ids: list[str] | None = None,
    tally: dict | None = None,
) -> dict:
    """Greedy episodes of `model` (already in eval mode) on the config's held-out tasks (or
    on `ids`, some of them: a resumed stage's rest).

    Returns the eval report with `schema_valid_calls` added; `label` names the policy in it.
    `tally`: where the calls are counted (its `by_task` then has each episode's own).
    """
    from agents.policies.hf_policy import HFPolicy, KVStore, LockstepBatcher

    spec = config.eval
    if ids is None:
        ids = eval_ids(config)
    tally, lock = tally if tally is not None else {"valid": 0, "attempts": 0}, threading.Lock()
    batcher = None
    workers = spec.workers
    if spec.batch > 1:
        batcher = LockstepBatcher([ids[i : i + spec.batch] for i in range(0, len(ids), spec.batch)],
                                  max_turns=spec.max_steps, max_tokens=spec.batch_tokens)  # fmt: skip
        workers = spec.batch
    kv = KVStore(capacity=workers + 1)  # this eval's turn caches: the weights do not change

    def build() -> Any:
        return HFPolicy.from_loaded(
            model, processor, model=label, tools=config.tools, max_tokens=spec.max_tokens
        )

    # Turns whose tokens are their own (greedy, from their cached prefix: a float32 model,
    # `eval.dtype`) run side by side on `workers` threads, the free cores shared among them,
    # as the CLI eval runs them (training/cli/eval.py `shared_model_policies`).
    alongside = batcher is None and workers > 1 and build().turns_stand_alone()
    governor = threads = None
    if alongside and str(getattr(model, "device", "cpu")) == "cpu":
        import torch

        from agents.models.cpu import ThreadGovernor, usable_cores

        threads = torch.get_num_threads()
        governor = ThreadGovernor(cap=max(1, usable_cores() // workers))
        governor.apply()

    def policy() -> CallCounter:
        inner = build()
        inner.share_kv(kv)
        if batcher is not None:
            inner.join_lockstep(batcher)
        if alongside:
            inner.run_alongside()
        return CallCounter(inner, tally, lock)

    def on_done(record: dict, finished: int, total: int) -> None:
        if batcher is not None:  # however the episode ended, its wave stops waiting for it
            batcher.finish(record.get("task", ""))
        if progress is not None:
            progress(record, finished, total)

    try:
        report = run_episodes(ids, policy, max_steps=spec.max_steps, workers=workers,
                              progress=on_done)  # fmt: skip
    finally:
        if threads is not None:
            import torch

            torch.set_num_threads(threads)
    if governor is not None:
        report["cpu"] = {**governor.record(), "turns_alongside": True}
    if batcher is not None:
        report["lockstep_batches"] = [len(b) for b in batcher.batches]
    report["schema_valid_calls"] = {"valid": tally["valid"], "attempts": tally["attempts"]}
    return report


def evaluate_fast(config: TrainConfig, model_dir: Path, adapter: Path | None, root: Path,
                  progress: Callable[[dict, int, int], None] | None = None,
                  ids: list[str] | None = None, tally: dict | None = None) -> dict:  # fmt: skip
    """`evaluate_loaded`'s episodes in llama.cpp (`eval.variant: fast`): the adapter merged into
    the base as a GGUF in `eval.quant`, made once under `root`. `eval.workers` episodes at
    once share the machine's threads (llama-cpp-python installed: the pipeline checks first).
    ModelError (one line) when the GGUF cannot be made."""
    from agents.models.variants import fast_gguf
    from agents.policies.hf_policy import HFPolicyConfig
    from agents.policies.llamacpp_policy import open_fast

    spec = config.eval
    built = fast_gguf(str(model_dir), str(adapter) if adapter is not None else None,
                      quant=spec.quant, root=root)  # fmt: skip
    policy = open_fast(HFPolicyConfig(model=str(model_dir), tools=config.tools,
                                      max_tokens=spec.max_tokens, variant="fast",
                                      quant=spec.quant), built)  # fmt: skip
    workers = spec.workers
    policy.llama.set_threads(max(1, policy.llama.threads // workers))
    if ids is None:
        ids = eval_ids(config)
    tally, lock = tally if tally is not None else {"valid": 0, "attempts": 0}, threading.Lock()
    try:
        report = run_episodes(ids, lambda: CallCounter(policy.sibling(), tally, lock),
                              max_steps=spec.max_steps, workers=workers, progress=progress)  # fmt: skip
    finally:  # the stage's GGUF is done with: its contexts go back now, not at exit
        policy.llama.close()
    report["schema_valid_calls"] = {"valid": tally["valid"], "attempts": tally["attempts"]}
    report["engine"] = {"engine": "llama.cpp", "quant": spec.quant, "gguf": built.gguf.name,
                        "threads": policy.llama.threads, "workers": workers}  # fmt: skip
    return report


class PeriodicEval:
    """Scores the model being trained on every `eval_every`-th checkpoint and on the last one.

    Checkpoint k is the one at step k x save_steps, so which steps are scored depends only on
    the config, and a resumed run scores the same steps an uninterrupted one does.
    """

    def __init__(self, run_dir: Path, config: TrainConfig, save_steps: int) -> None:
        self.run_dir, self.config = Path(run_dir), config
        self.every = config.run.eval_every
        self.save_steps = save_steps
        self.start = time.time()
        self._writer: Any = None

    def due(self, step: int, max_steps: int | None) -> bool:
        if self.every <= 0 or step <= 0:
            return False
        regular = step % self.save_steps == 0 and (step // self.save_steps) % self.every == 0
        return regular or (max_steps is not None and step >= max_steps)

    def report_path(self, step: int) -> Path:
        return self.run_dir / "eval" / f"step-{step}.json"

    def run(self, step: int, model: Any, processor: Any) -> dict:
        """Evaluate now; write eval/step-N.json and a metrics row; returns the row."""
        started = time.time()
        total = len(eval_ids(self.config))
        _say(f"eval at step {step}: {total} held-out episode(s)...")
        try:
            report = self._evaluate(step, model, processor)
            summary = stage_summary(report)
        except Exception as exc:  # noqa: BLE001 - an eval must never end the training run
            log.warning("eval at step %d failed: %s", step, exc, exc_info=True)
            row = {"step": step, "time": round(time.time(), 3), "eval/error": str(exc)[:500]}
            _say(f"eval at step {step} failed: {exc}")
            return self._append(row)
        report["step"] = step
        path = self.report_path(step)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(report, indent=1, default=str))
        tmp.replace(path)
        row = {
            "step": step,
            "time": round(time.time(), 3),
            "elapsed_s": round(time.time() - self.start, 3),
            "eval/valid_call_rate": summary["valid_call_rate"],
            "eval/success_rate": summary["success_rate"],
            "eval/mean_reward": summary["mean_reward"],
            "eval/ran_ok_rate": summary["ran_ok_rate"],
            "eval/episodes": summary["episodes"],
            "eval/episodes_not_run": summary["episodes_not_run"],
            "eval/seconds": round(time.time() - started, 2),
        }
        _say(
            f"eval at step {step}: valid calls {row['eval/valid_call_rate']:.0%}, "
            f"success {row['eval/success_rate']:.0%}, mean reward "
            f"{row['eval/mean_reward']:.3f} ({row['eval/seconds']:.0f} s)"
        )
        self._tensorboard(row)
        return self._append(row)

    def _evaluate(self, step: int, model: Any, processor: Any) -> dict:
        def progress(record: dict, finished: int, total: int) -> None:
            _say(f"  eval step {step}: {finished}/{total} {record.get('task')}")

        was_training = model.training
        rng = _rng_state()
        model.eval()
        try:
            return evaluate_loaded(
                self.config,
                model,
                processor,
                label=str(self.run_dir / f"checkpoint-{step}"),
                progress=progress,
            )
        finally:
            # The checkpoint holds the RNG state from before this eval; restoring it keeps an
            # uninterrupted run and one resumed from this checkpoint on the same random stream.
            _set_rng_state(rng)
            if was_training:
                model.train()

    def _append(self, row: dict) -> dict:
        with (self.run_dir / "metrics.jsonl").open("a") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
        return row

    def _tensorboard(self, row: dict) -> None:
        if "tensorboard" not in self.config.run.report_to:
            return
        try:
            if self._writer is None:
                from torch.utils.tensorboard import SummaryWriter

                self._writer = SummaryWriter(str(self.run_dir / "tensorboard" / "eval"))
            for key, value in row.items():
                if key.startswith("eval/"):
                    self._writer.add_scalar(key, value, row["step"])
            self._writer.flush()
        except Exception as exc:  # noqa: BLE001 - TensorBoard is a convenience
            log.warning("could not write eval scalars to TensorBoard: %s", exc)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _say(text: str) -> None:
    """A line above the progress bar (tqdm keeps the bar intact below it)."""
    try:
        from tqdm.auto import tqdm

        tqdm.write(text)
    except ImportError:
        print(text, flush=True)


def _rng_state() -> dict:
    import random

    import numpy as np
    import torch

    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "cpu": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    import random

    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])
