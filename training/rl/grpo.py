"""Multi-turn GRPO on the product's own episode loop, with TRL's `GRPOTrainer` and LoRA (PEFT).

The policy-gradient math is TRL's (GRPO / Dr. GRPO / DAPO / BNPO by `grpo.loss_type`); the
rollouts are ours, through TRL's public `rollout_func`: each rollout is an `EpisodeLoop`
episode (`training/rl/rollouts.py`) with an `HFPolicy` over the model being trained, run on the
eval scheduler's worker pool and recorded in the store; each training row is one model turn's
prompt and completion token ids exactly as generated, with the sampling log-probs. Groups
whose rewards are all equal give no gradient: with `grpo.oversample` > 1, more groups are run
than a step needs and the ones with reward spread are kept (dynamic sampling). Logged per
step: the task reward and its components, the share of zero-spread groups, the mismatch
between training-time and sampling-time log-probs, and the time split (rollout wall,
generation, tools, update). No private TRL member is read or written (a test greps for them).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.runs import (
    allocator_args,
    bound_allocator,
    checkpoint_step,
    make_callbacks,
    prepare_run_dir,
    restore_extra_state,
    score_loss_positions_only,
    set_cpu_threads,
    tensorboard_dir,
    trainer_options,
    trim_heap,
    weights_from_checkpoint,
)
from training.train_config import GRPOSpec, RunSpec, TrainConfig

# The TRL releases whose public `rollout_func` contract this module is written and tested
# against (pyproject pins the same range).
TRL_SUPPORTED = (">=1.16", "<1.17")


@dataclass
class GRPOResult:
    run_dir: Path
    adapter_dir: Path
    steps: int
    resumed_from: int | None
    crash_retries: int
    last_rollout: dict | None = None  # the rows of the last batch and the episodes they came from


@dataclass
class RLRuntime:
    """What a run's rollouts share: the scheduler (its pool of spare workers), the curriculum,
    tools."""

    scheduler: Any
    curriculum: Any
    shown: list[str] | None = None
    store: Any = None
    stats: Any = None  # the last batch's training.rl.rollouts.StepStats
    last: dict | None = None
    loop: Any = None  # a LoopConfig for the rollouts (default: from the grpo spec)
    backend: Any = None  # the ray episode backend (rollouts.backend: ray); None: the scheduler

    @property
    def crash_retries(self) -> int:
        if self.backend is not None:
            return self.backend.status().retried
        return self.scheduler.retries

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()
        if self.scheduler is not None:
            self.scheduler.close()
        if self.store is not None:
            self.store.close()


def grpo_args(spec: GRPOSpec, run: RunSpec, out_dir: Path, use_cpu: bool):
    from trl import GRPOConfig

    return GRPOConfig(
        **trainer_options(spec, run, out_dir, use_cpu),
        num_generations=spec.num_generations,
        max_completion_length=spec.max_completion_length,
        temperature=spec.temperature,
        top_p=spec.top_p,
        beta=spec.beta,
        epsilon=spec.epsilon,
        epsilon_high=spec.epsilon_high,
        loss_type=spec.loss_type,
        scale_rewards=spec.scale_rewards,
        num_iterations=spec.num_iterations,
        mask_truncated_completions=spec.mask_truncated_completions,
    )


def slot_dataset(n: int):
    """Placeholder prompts: TRL needs a dataset, but the rollouts draw their tasks from the
    curriculum by step (so a resumed run draws the same ones)."""
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [[{"role": "user", "content": ""}]] * n})


def episode_reward(prompts=None, completions=None, episode_reward=None, **_: Any) -> list[float]:
    """Each row's reward: its episode's task verdict (the checker `eval` uses)."""
    return [float(r) for r in episode_reward]


def build_runtime(spec: GRPOSpec, seed: int, shown: list[str] | None = None,
                  store: Any = None) -> RLRuntime:  # fmt: skip
    """Rollout workers are the eval scheduler's: `rollout_workers` episodes of a batch run at
    once, each on a fresh sandboxed worker (spares boot in the background while the others
    run; one worker, one episode, so no rollout's code reaches another's reward), and are
    scored in as many warm clean workers, as eval's are."""
    from tools import TOOLS, catalogue
    from training.eval.harness import episode_scheduler
    from training.rl.curriculum import Curriculum

    if shown:
        unknown = sorted(set(shown) - {t["name"] for t in catalogue()} - {"recall_step"})
        if unknown:
            raise ValueError(f"tools: unknown tool(s) {unknown}")
    curriculum = Curriculum(
        spec.tasks.families, spec.tasks.levels, spec.tasks.split, seed, spec.curriculum
    )
    if spec.rollouts.backend == "ray":  # the nodes' pools run them; Ray is imported only here
        from training.eval.backend import make_backend

        backend = make_backend("ray", cluster=spec.rollouts.cluster, store=store)
        return RLRuntime(scheduler=None, curriculum=curriculum, shown=shown, store=store,
                         backend=backend)  # fmt: skip
    # Spares import CadQuery (two thirds of a start) only when the policy is shown a CAD tool.
    cad = shown is None or any(TOOLS[t].kernel == "cadquery" for t in shown if t in TOOLS)
    scheduler = episode_scheduler(spec.rollout_workers, seed=seed, deadline_s=spec.tool_deadline_s,
                                  preload_cad=cad)  # fmt: skip
    return RLRuntime(scheduler=scheduler, curriculum=curriculum, shown=shown, store=store)


def rollout_store(spec: GRPOSpec, out_dir: Path) -> Any:
    """Where rollouts are recorded: the run's own store, the user's, a folder, or nowhere."""
    if spec.rollout_store == "off":
        return None
    from agents.store import Store

    if spec.rollout_store == "default":
        return Store()
    return Store(out_dir / "store" if spec.rollout_store == "run" else spec.rollout_store)


def loop_config(spec: GRPOSpec, runtime: RLRuntime | None = None, sees_images: bool = True) -> Any:
    """The rollouts' loop settings: the runtime's own, or the spec's turns, render size and
    when to render (`observe`; "auto": "text" for a model that takes no images: the scene
    listing it reads, no render)."""
    from agents.loop.episode_loop import LoopConfig

    if runtime is not None and runtime.loop is not None:
        return runtime.loop
    observe = spec.observe
    if observe == "auto":
        observe = "changed" if sees_images else "text"
    return LoopConfig(max_steps=spec.max_turns, render_size=spec.render_size,
                      record_artifacts=False, observe=observe)  # fmt: skip


def make_rollout_func(config: TrainConfig, runtime: RLRuntime, processor: Any, out_dir: Path,
                      vision: Any, label: str, server: Any = None):  # fmt: skip
    """TRL's `rollout_func(prompts, trainer)`: run the step's groups as loop episodes and
    return one row per model turn (ids as generated), the episode rewards as an extra field."""
    from agents.policies.hf_policy import HFPolicy
    from training.rl.grpo_server import rebuild_vision
    from training.rl.rollouts import (
        StepStats,
        keep_groups,
        logprob_mismatch,
        run_groups,
        training_rows,
    )

    spec, run = config.grpo, config.run
    tokenizer = getattr(processor, "tokenizer", processor)
    rows_per_group = spec.num_generations * spec.max_turns
    # a text-only model is shown no render (its prompts hold no image), so its rollouts make none
    sees_images = vision.image_token_id is not None

    def rollout_func(prompts: list, trainer: Any) -> dict:
        start = time.perf_counter()
        needed = len(prompts) // rows_per_group
        step = trainer.state.global_step
        base = step * needed * spec.oversample
        slots = [(base + i, runtime.curriculum.task_for(base + i))
                 for i in range(needed * spec.oversample)]  # fmt: skip
        version = f"{label}@step-{step}"
        staleness = server.check(step) if server is not None else 0
        if server is not None:
            version = server.served or label

        def policy_for(seed: int, greedy: bool = False) -> Any:
            if server is not None:
                return server.policy(seed, spec.max_completion_length, spec.temperature,
                                     config.tools)  # fmt: skip
            return HFPolicy.from_loaded(
                trainer.model, processor, model=label, max_tokens=spec.max_completion_length,
                temperature=None if greedy else spec.temperature,
                top_p=None if greedy else spec.top_p, seed=seed, tools=config.tools,
                version=version, score_temperature=spec.temperature,
            )  # fmt: skip

        def policy_spec_for(seed: int, greedy: bool = False) -> Any:
            """The server policy as data, built on a Ray node (rollouts.backend: ray)."""
            from training.eval.requests import PolicySpec

            return PolicySpec("openai", {
                "base_url": spec.server_url, "model": server.served, "seed": seed,
                "temperature": spec.temperature, "max_tokens": spec.max_completion_length,
                "token_ids": True, "tools": config.tools, "keep_prompt": True,
            })  # fmt: skip

        meta = {"model": label, "adapter": version,
                "tags": [f"run:{out_dir.name}", f"step:{step + 1}", "rl"]}  # fmt: skip
        remote = runtime.backend is not None and server is not None
        groups = run_groups(runtime.scheduler, slots, spec.num_generations, policy_for,
                            loop_config(spec, runtime, sees_images), run_seed=run.seed,
                            store=runtime.store,
                            meta=meta, batch_first_turn=spec.batch_first_turn,
                            greedy_member=spec.greedy_member, backend=runtime.backend,
                            policy_spec_for=policy_spec_for if remote else None)  # fmt: skip
        for group in groups:
            for r in group:
                runtime.curriculum.record(r.task_id, r.success)
        if remote:  # the nodes sent the prompts of image turns: their pixels are built here
            rebuild_vision(groups, server.vision)
        kept, zero_share = keep_groups(groups, needed)
        rows = training_rows(kept, spec.max_turns, tokenizer.pad_token_id, tokenizer.eos_token_id)
        vision.clear()
        for group in kept:
            for r in group:
                for tok in r.turns:
                    vision.add(tok.prompt_ids, tok.completion_ids, tok.vision)
        stats = StepStats.of(groups, kept, start)
        stats.zero_spread_share = zero_share
        stats.logprob_mismatch = logprob_mismatch(trainer.model, rows, spec.temperature)
        stats.staleness = staleness
        runtime.stats = stats
        runtime.last = {**rows, "groups": kept}
        with (out_dir / "samples.jsonl").open("a") as fh:
            tasks = [r.task_id for g in kept for r in g]
            fh.write(json.dumps({"step": step + 1, "tasks": tasks}) + "\n")
        rows.pop("turn_ref")
        return rows

    return rollout_func


def stats_callback(runtime: RLRuntime):
    """Adds the rollout figures and the step's update time to each log line (first in line,
    so the metrics file and TensorBoard see them)."""
    from transformers import TrainerCallback

    class RolloutStats(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            stats = runtime.stats
            if stats is not None:
                stats.update_s = time.perf_counter() - self.start - stats.rollout_s
            trim_heap()  # the step's rollouts and update are freed: their pages go back

        def on_log(self, args, state, control, logs=None, **kwargs):
            stats = runtime.stats
            if logs is None or stats is None or "loss" not in logs:
                return
            logs.update(stats.log_items())
            logs["time/update_s"] = max(0.0, getattr(stats, "update_s", 0.0))

    return RolloutStats()


def load_policy_model(
    config: TrainConfig, run_dir: Path, model_path: str | Path | None, adapter: str | Path | None
):
    """(model, processor, peft_config): a trainable adapter to continue, or a fresh LoRA config,
    on the model SFT would start from (`model_path`, `model.path` or `model.build_tiny`)."""
    from training.sft.trainer import load_model, peft_config

    model, processor = load_model(config.model, run_dir, model_path)
    if adapter:
        from peft import PeftModel

        return PeftModel.from_pretrained(model, str(adapter), is_trainable=True), processor, None
    return model, processor, peft_config(config.lora)


def image_token_id(processor: Any) -> int | None:
    tokenizer = getattr(processor, "tokenizer", processor)
    found = getattr(processor, "image_token_id", None)
    if found is None:
        # a text-only vocabulary has no such token: converting it gives the unknown token's id
        # (SmolLM2: 0, its <|endoftext|>), which is no image token
        if "<|image_pad|>" not in tokenizer.get_vocab():
            return None
        found = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    return found if isinstance(found, int) and found >= 0 else None


def run_grpo(
    config: TrainConfig,
    out_dir: Path,
    resume: bool = False,
    adapter: str | Path | None = None,
    model_path: str | Path | None = None,
    config_text: str = "",
    runtime: Any = None,
) -> GRPOResult:
    """Train (or continue) a GRPO run into `out_dir`."""
    import os

    import torch
    from trl import GRPOTrainer

    from training.rl.grpo_server import ServerSync, ServerVision
    from training.rl.rollouts import LeftPaddingTrim, VisionRows

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func's notice, once known
    spec, run = config.grpo, config.run
    score_loss_positions_only()  # the update scores the completions' positions only, as on a GPU
    bound_allocator(**allocator_args(run))  # before the trainer's and the rollouts' threads start
    set_cpu_threads(run.cpu_threads if not torch.cuda.is_available() else None)
    ckpt = prepare_run_dir(out_dir, config_text or config.model_dump_json(indent=2), resume)
    if ckpt is not None and checkpoint_step(ckpt) >= spec.max_steps:  # a finished run resumed
        step = weights_from_checkpoint(ckpt, out_dir / "adapter")
        return GRPOResult(out_dir, out_dir / "adapter", step, step, 0)
    own_runtime = runtime is None
    runtime = runtime or build_runtime(spec, run.seed, config.tools,
                                       rollout_store(spec, out_dir))  # fmt: skip
    restore_extra_state(ckpt, runtime.curriculum)
    try:
        model, processor, lora = load_policy_model(config, out_dir, model_path, adapter)
        args = grpo_args(spec, run, out_dir, use_cpu=not torch.cuda.is_available())
        tensorboard_dir(out_dir)
        rows = spec.max_steps * spec.per_device_train_batch_size * spec.gradient_accumulation_steps
        vision = VisionRows(image_token_id(processor))
        label = Path(str(model.name_or_path or "model")).name  # the folder or hub id loaded
        server = None
        if spec.generation == "server":
            server = ServerSync(spec, out_dir, ServerVision(processor, vision.image_token_id))
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[episode_reward],
            args=args,
            train_dataset=slot_dataset(rows + 1),
            processing_class=processor,
            peft_config=lora,
            rollout_func=make_rollout_func(config, runtime, processor, out_dir, vision, label,
                                           server),  # fmt: skip
            callbacks=make_callbacks(
                out_dir,
                extra_state=runtime.curriculum,
                serve_url=run.serve_url,
                serve_name=run.serve_adapter_name,
                eval_config=config,
                run=run,
            ),
        )
        # Before the metrics writer and TensorBoard, so they see the rollout figures.
        trainer.callback_handler.callbacks.insert(0, stats_callback(runtime))
        if server is not None:
            trainer.add_callback(server.callback())
        hook = vision.attach(trainer.model)
        trim = LeftPaddingTrim()
        trim_hook = trim.attach(trainer.model)  # after vision's: it sees the rows as padded
        try:
            trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
        finally:
            hook.remove()
            trim_hook.remove()
        adapter_dir = out_dir / "adapter"
        trainer.save_model(str(adapter_dir))
        processor.save_pretrained(str(adapter_dir))
        last = dict(runtime.last or {}, vision_attached=vision.attached,
                    vision_misses=vision.misses, trained_rows=vision.trained,
                    update_columns={"in": trim.columns_in, "kept": trim.columns_kept})  # fmt: skip
        if server is not None and server.vision is not None:
            last["server_vision"] = {"matched": server.vision.matched,
                                     "mismatched": server.vision.mismatches}  # fmt: skip
        return GRPOResult(
            out_dir,
            adapter_dir,
            trainer.state.global_step,
            int(ckpt.name.split("-")[1]) if ckpt else None,
            runtime.crash_retries,
            last,
        )
    finally:
        if own_runtime:
            runtime.close()
