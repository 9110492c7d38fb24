"""Multi-turn GRPO in the sandboxed tool environment, with TRL's `GRPOTrainer` and LoRA (PEFT).

The policy-gradient math is TRL's (GRPO / Dr. GRPO / DAPO / BNPO by `grpo.loss_type`); this
module wires our parts in: the environment (`training/grpo_env.py`) whose methods are the
tools, the curriculum sampler, the task reward with every component logged, the run folder
(checkpoints, metrics JSONL, TensorBoard, resume), and a time split per step (generation /
tools / reward / update) for the benchmark. Tool-result tokens are masked from the loss by
TRL's tool loop (`tool_mask`). Generation: transformers `generate` on CPU, vLLM (server or
colocate) when configured on a GPU machine.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.runs import (
    make_callbacks,
    prepare_run_dir,
    restore_extra_state,
    set_cpu_threads,
    tensorboard_dir,
)
from training.train_config import GRPOSpec, RunSpec, TrainConfig


@dataclass
class GRPOResult:
    run_dir: Path
    adapter_dir: Path
    steps: int
    resumed_from: int | None
    crash_retries: int
    last_rollout: dict | None = None  # completion_ids and loss_mask of the last batch


def grpo_args(spec: GRPOSpec, run: RunSpec, out_dir: Path, use_cpu: bool):
    from trl import GRPOConfig

    vllm: dict[str, Any] = {}
    if spec.generation != "transformers":
        vllm = {
            "use_vllm": True,
            "vllm_mode": "server" if spec.generation == "vllm_server" else "colocate",
            "vllm_server_host": spec.vllm_server_host,
            "vllm_server_port": spec.vllm_server_port,
            "vllm_gpu_memory_utilization": spec.vllm_gpu_memory_utilization,
        }
    return GRPOConfig(
        output_dir=str(out_dir),
        max_steps=spec.max_steps,
        learning_rate=spec.learning_rate,
        per_device_train_batch_size=spec.per_device_train_batch_size,
        gradient_accumulation_steps=spec.gradient_accumulation_steps,
        num_generations=spec.num_generations,
        max_completion_length=spec.max_completion_length,
        max_tool_calling_iterations=spec.max_turns,
        temperature=spec.temperature,
        top_p=spec.top_p,
        beta=spec.beta,
        epsilon=spec.epsilon,
        epsilon_high=spec.epsilon_high,
        loss_type=spec.loss_type,
        scale_rewards=spec.scale_rewards,
        num_iterations=spec.num_iterations,
        mask_truncated_completions=spec.mask_truncated_completions,
        activation_checkpointing=spec.gradient_checkpointing,
        logging_steps=run.logging_steps,
        save_steps=run.save_steps,
        save_total_limit=run.save_total_limit,
        save_strategy="steps",
        seed=run.seed,
        data_seed=run.seed,
        report_to=run.report_to,
        use_cpu=use_cpu,
        disable_tqdm=False,
        bf16=False,
        **vllm,
    )


def slot_dataset(n: int):
    """One row per GRPO prompt slot; the environment's `reset` turns a slot into a task."""
    from datasets import Dataset

    from training.grpo_env import initial_prompt

    return Dataset.from_dict(
        {"prompt": [initial_prompt() for _ in range(n)], "slot": list(range(n))}
    )


def make_reward(runtime: Any, samples_path: Path, state_of: Any):
    """The task reward: RewardBreakdown.total, with components, success and validity logged."""

    def task_reward(environments=None, log_metric=None, **_: Any) -> list[float]:
        start = time.perf_counter()
        verdicts = runtime.verdicts(environments)  # in parallel over the worker slots
        for env, v in zip(environments, verdicts, strict=True):
            runtime.curriculum.record(env.task.id, bool(v.success))
        if log_metric is not None:
            names = sorted({k for v in verdicts for k in v.components})
            for k in names:
                log_metric(
                    f"task/{k}", statistics.fmean(v.components.get(k, 0.0) for v in verdicts)
                )
            log_metric(
                "task/success", statistics.fmean(1.0 if v.success else 0.0 for v in verdicts)
            )
            calls = [o for env in environments for o in env.outcomes if not o.local]
            log_metric(
                "task/valid_call_rate", sum(o.ok for o in calls) / len(calls) if calls else 0.0
            )
            log_metric("task/calls_per_rollout", len(calls) / len(environments))
            log_metric("rollout/crash_retries", float(runtime.crash_retries))
            log_metric("rollout/replays", float(runtime.replays))
            log_metric("rollout/switches", float(runtime.switches))
        with samples_path.open("a") as fh:
            fh.write(
                json.dumps(
                    {
                        "step": state_of().global_step + 1,
                        "tasks": [env.task.id for env in environments],
                    }
                )
                + "\n"
            )
        runtime.reward_seconds = (
            getattr(runtime, "reward_seconds", 0.0) + time.perf_counter() - start
        )
        return [float(v.total) for v in verdicts]

    return task_reward


def _trainer_class():
    from trl import GRPOTrainer

    class ModelwrightGRPOTrainer(GRPOTrainer):
        """Renders our exact tool schemas and records the per-step time split."""

        runtime: Any = None

        def use_catalogue_schemas(self) -> None:
            # TRL would render the tools from the methods' signatures; the loop shows the
            # catalogue's JSON schemas. Render those, so a prompt in training is byte-identical
            # to the one the agent sees when acting. Calls still go to the methods.
            self._env_tools = {name: list(self.runtime.tools) for name in self._env_tools}

        def _generate(self, prompts):
            start, tools0 = time.perf_counter(), self.runtime.tool_seconds
            out = super()._generate(prompts)
            tools = self.runtime.tool_seconds - tools0
            self._split["generation"] += time.perf_counter() - start - tools
            return out

        def _generate_and_score_completions(self, inputs):
            start, reward0 = time.perf_counter(), getattr(self.runtime, "reward_seconds", 0.0)
            tools0 = self.runtime.tool_seconds  # environment resets count as tool time too
            # Start states for the whole batch, built on the worker slots in parallel before
            # TRL resets the environments one after another.
            self.runtime.prepare([x.get("slot", 0) for x in inputs])
            out = super()._generate_and_score_completions(inputs)
            self._split["tools"] += self.runtime.tool_seconds - tools0
            # Kept for inspection (tests, debugging): which completion tokens carry loss.
            self.last_rollout = {
                "completion_ids": out["completion_ids"].tolist(),
                "loss_mask": (out["completion_mask"] * out.get("tool_mask", 1)).tolist(),
            }
            self._split["reward"] += getattr(self.runtime, "reward_seconds", 0.0) - reward0
            self._split["rollout_total"] += time.perf_counter() - start
            return out

        def training_step(self, *args, **kwargs):
            start = time.perf_counter()
            before = self._split["rollout_total"]
            loss = super().training_step(*args, **kwargs)
            self._split["update"] += (
                time.perf_counter() - start - (self._split["rollout_total"] - before)
            )
            # What the rollout spent outside generation, tools and reward: tokenising prompts,
            # processing images, the log-prob forward passes.
            self._split["scoring"] = max(
                0.0,
                self._split["rollout_total"]
                - self._split["generation"]
                - self._split["tools"]
                - self._split["reward"],
            )
            for key in ("generation", "tools", "reward", "scoring", "update"):
                self._metrics["train"][f"time/{key}_s"].append(self._split[key])
                self._split[key] = 0.0
            self._split["rollout_total"] = 0.0
            return loss

    return ModelwrightGRPOTrainer


def build_runtime(spec: GRPOSpec, seed: int, shown: list[str] | None = None):
    """Rollout workers are the eval scheduler's: a pool of `rollout_workers` sandboxed
    sessions kept for the whole run, one pinned slot each."""
    from agents.scheduler import Scheduler
    from tools import catalogue
    from training.curriculum import Curriculum
    from training.rollout_runtime import RolloutRuntime

    tools = catalogue()
    if shown:
        unknown = sorted(set(shown) - {t["name"] for t in tools} - {"recall_step"})
        if unknown:
            raise ValueError(f"tools: unknown tool(s) {unknown}")
    curriculum = Curriculum(
        spec.tasks.families, spec.tasks.levels, spec.tasks.split, seed, spec.curriculum
    )
    scheduler = Scheduler(
        spec.rollout_workers, seed=seed, keep_sessions=True, deadline_s=spec.tool_deadline_s
    )
    return RolloutRuntime(
        scheduler=scheduler,
        curriculum=curriculum,
        catalogue=tools,
        render_size=spec.render_size,
        shown=shown,
    )


def load_policy_model(
    config: TrainConfig, model_path: str | Path | None, adapter: str | Path | None
):
    """(model, processor, peft_config): a trainable adapter to continue, or a fresh LoRA config."""
    from training.sft import load_model, peft_config

    model, processor = load_model(config.model, model_path)
    if adapter:
        from peft import PeftModel

        return PeftModel.from_pretrained(model, str(adapter), is_trainable=True), processor, None
    return model, processor, peft_config(config.lora)


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
    import torch

    from training.grpo_env import make_environment_class

    spec, run = config.grpo, config.run
    set_cpu_threads(run.cpu_threads if not torch.cuda.is_available() else None)
    ckpt = prepare_run_dir(out_dir, config_text or config.model_dump_json(indent=2), resume)
    own_runtime = runtime is None
    runtime = runtime or build_runtime(spec, run.seed, config.tools)
    restore_extra_state(ckpt, runtime.curriculum)
    try:
        model, processor, lora = load_policy_model(config, model_path, adapter)
        args = grpo_args(spec, run, out_dir, use_cpu=not torch.cuda.is_available())
        tensorboard_dir(out_dir)
        groups = (
            spec.max_steps * spec.per_device_train_batch_size * spec.gradient_accumulation_steps
        )
        trainer_cls = _trainer_class()
        trainer_cls.runtime = runtime
        holder: dict[str, Any] = {}
        trainer = trainer_cls(
            model=model,
            reward_funcs=[
                make_reward(runtime, out_dir / "samples.jsonl", lambda: holder["t"].state)
            ],
            args=args,
            train_dataset=slot_dataset(groups // spec.num_generations + 1),
            processing_class=processor,
            peft_config=lora,
            environment_factory=make_environment_class(runtime),
            callbacks=make_callbacks(
                out_dir,
                extra_state=runtime.curriculum,
                serve_url=run.serve_url,
                serve_name=run.serve_adapter_name,
                eval_config=config,
            ),
        )
        holder["t"] = trainer
        trainer._split = dict.fromkeys(
            ("generation", "tools", "reward", "scoring", "update", "rollout_total"), 0.0
        )
        trainer.use_catalogue_schemas()
        trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
        adapter_dir = out_dir / "adapter"
        trainer.save_model(str(adapter_dir))
        processor.save_pretrained(str(adapter_dir))
        return GRPOResult(
            out_dir,
            adapter_dir,
            trainer.state.global_step,
            int(ckpt.name.split("-")[1]) if ckpt else None,
            runtime.crash_retries,
            getattr(trainer, "last_rollout", None),
        )
    finally:
        if own_runtime:
            runtime.close()
