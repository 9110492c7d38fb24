"""Typed training configurations, loaded from YAML (`configs/*.yaml`).

One file describes one run: `kind: sft | grpo | pipeline`, the model, LoRA, the run folder and
the stage settings. Unknown keys are errors (a typo must not silently fall back to a default),
and every error names the field, e.g. `grpo.num_generations: Input should be greater than 1`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agents.models.source import EXAMPLE_HUB_ID, is_hub_id


class ConfigError(ValueError):
    """A training config that cannot be used; the message names the file and the field."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())


def _is_model_name(text: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", text)) and not Path(text).exists()


class ModelSpec(Strict):
    build_tiny: bool = False  # build the tiny random CPU model (training/sft/tiny_model.py) into the run dir first
    path: str | None = None  # local folder (or hub id on a machine that may download)
    tiny_size: Literal["tiny", "small"] = "tiny"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "float32"
    attn_implementation: str | None = None  # e.g. "flash_attention_2" on GPUs

    @model_validator(mode="after")
    def _one_source(self) -> ModelSpec:
        if not self.path and not self.build_tiny:
            raise ValueError("set model.path or model.build_tiny: true")
        return self

    @field_validator("path")
    @classmethod
    def _path_exists(cls, path: str | None, info: ValidationInfo) -> str | None:
        # A plain name (no path separator) is a registered model (`modelwright models
        # list`), resolved when the run starts: the packaged base is built on first use.
        if (path and not info.data.get("build_tiny") and not is_hub_id(path)
                and not Path(path).expanduser().is_dir() and not _is_model_name(path)):
            raise ValueError(
                f"no model folder at {path!r} (a folder holding config.json; or set "
                "model.build_tiny: true for the tiny CPU model, `modelwright models list` for "
                f"the local models, or name a hub id such as {EXAMPLE_HUB_ID})"
            )
        return path


class LoraSpec(Strict):
    enabled: bool = True  # false: full fine-tune
    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    # Language-model attention and MLP projections; the vision tower stays frozen.
    target_modules: list[str] | str = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"]
    )
    # Modules trained in full next to the adapter (saved with it), e.g. ["lm_head"] for a
    # random tiny model whose output layer is too small to ever give a peaked distribution.
    modules_to_save: list[str] = Field(default_factory=list)


class RunSpec(Strict):
    out_dir: str | None = None  # default: runs/<config name>; `--out` overrides
    seed: int = 0
    # malloc's mmap threshold for training, in MB (training/runs.py `bound_allocator`); None:
    # MODELWRIGHT_MMAP_THRESHOLD, else 2 MB, which bounds the heap but makes every freed block
    # of 2 MB or more a fresh mapping to fault in: cheap for the level-1 rows, x1.6-1.8 a step
    # on the curriculum's ~1,700-token rows, whose activations are larger (bench_sft_pack.py).
    mmap_threshold_mb: int | None = Field(None, ge=1, le=1024)
    # Hand the heap's free pages back to the OS before every N-th training step (bounds resident
    # memory, training/runs.py; 0: never). Between trims a step reuses the pages the last one
    # freed instead of faulting them in again: x1.4 a step on the curriculum's long rows
    # (bench_sft_pack.py --trim), whose heap grows ~100 MB a step untrimmed.
    trim_heap_every: int = Field(1, ge=0)
    save_steps: int = Field(20, ge=1)  # checkpoint every N optimiser steps
    save_total_limit: int = Field(3, ge=1)
    # Score the model on the `eval:` section's held-out tasks every N checkpoints (and at the
    # last step) into RUN/eval/step-N.json and metrics.jsonl; 0: never.
    eval_every: int = Field(0, ge=0)
    logging_steps: int = Field(1, ge=1)
    cpu_threads: int | None = Field(1, ge=1)  # torch threads on CPU; 1 is fastest on a busy box
    report_to: list[str] = Field(default_factory=lambda: ["tensorboard"])
    # Save the LoRA adapter to RUN/adapter-latest while training, every this many seconds
    # or steps, whichever comes first (0: not by that measure; both 0: never), so the studio's
    # "Use in agent" has an adapter before the end. A save is the adapter's weights only.
    adapter_every_s: float = Field(180.0, ge=0)
    adapter_every_steps: int = Field(0, ge=0)
    # After each checkpoint, hot-load the adapter into a running `modelwright serve`.
    serve_url: str | None = None
    serve_adapter_name: str = "modelwright"


class DataFilterSpec(Strict):
    success_only: bool = True
    sources: list[str] | None = None
    models: list[str] | None = None  # distillation: only this teacher's episodes
    min_reward: float | None = None


class SelectSpec(Strict):
    """Pick the SFT checkpoint GRPO starts from by greedy episodes on validation seeds (never
    the held-out test seeds the report scores); the pipeline only."""

    split: Literal["validation"] = "validation"
    per_family: int = Field(10, ge=1)
    # The families scored (cycling eval.levels); empty: the eval's own.
    families: list[str] = Field(default_factory=list)


# The prompt views `training/sft/views.py` renders (its VIEWS is read from this one list).
PromptView = Literal["goal_only", "no_scene", "no_tools"]


class PromptPhase(Strict):
    """One phase of SFT's prompt curriculum: `steps` optimiser steps on the rows in `view`
    (`training/sft/views.py`: no_tools, no_scene, goal_only) before the run proper."""

    view: PromptView
    steps: int = Field(ge=1)


class SFTSpec(Strict):
    data: list[str] = Field(default_factory=list)  # Parquet files or folders (store export)
    # Train every weight instead of a LoRA adapter; the run then saves a full model in
    # RUN/model (GRPO puts its LoRA on top of it). A random tiny model learns the tool-call
    # format far faster this way than through low-rank updates.
    full_finetune: bool = False
    filter: DataFilterSpec = Field(default_factory=DataFilterSpec)
    max_steps: int = Field(100, ge=1)
    learning_rate: float = Field(2e-4, gt=0)
    per_device_train_batch_size: int = Field(1, ge=1)
    gradient_accumulation_steps: int = Field(1, ge=1)
    max_length: int | None = Field(None, ge=16)
    # Pad each batch to a multiple of this many tokens (masked out of the loss): fewer tensor
    # sizes, so the allocator reuses what the last steps freed (docs/TRAINING.md, "Memory").
    pad_to_multiple_of: int | None = Field(None, ge=1)
    # false: the right padding is scored out (labels) but left in the attention mask, which is
    # then all ones: causal attention never shows a real token the padding after it, so the
    # loss is the same, and torch's CPU attention takes its causal kernel instead of building
    # every score matrix (training/sft/data.py ConversationCollator).
    mask_padding: bool = True
    warmup_steps: int = Field(0, ge=0)
    weight_decay: float = Field(0.0, ge=0)
    gradient_checkpointing: bool = False
    # Run each step's rows as one sequence holding their shared prefixes once (text-only
    # models; training/sft/packing.py): the rows are ordered so that a step's batch comes from
    # one task family (seeded), and the loss and gradients are those of the rows apart.
    pack: bool = False
    # Run the common prefix of each step's rows once and each row's own tokens after it, alone
    # (text-only models; training/sft/shared_prefix.py): rows ordered as `pack` orders them, a
    # step's rows in one batch (`per_device_train_batch_size`); no mask is built and nothing is
    # padded. The loss and gradients are those of the rows apart.
    share_prefix: bool = False
    # torch threads on CPU for this stage (default: run.cpu_threads). SFT runs no tool
    # workers beside it, so it can use every core where rollouts and evals leave one to them.
    cpu_threads: int | None = Field(None, ge=1)
    # Pipeline: choose among the kept checkpoints (run.save_total_limit) on validation seeds.
    select_checkpoint: SelectSpec | None = None
    # Shorter views of the same rows, trained in order before `max_steps` on the full rows, for
    # a model from random weights that must first learn to copy names from the goal (README,
    # "SFT"). Phase steps do not count in `max_steps`.
    prompt_curriculum: list[PromptPhase] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_way_to_share(self) -> SFTSpec:
        if self.share_prefix and self.pack:
            raise ValueError("sft.share_prefix and sft.pack are two ways to run shared prefixes "
                             "once: choose one")
        if self.share_prefix and self.gradient_checkpointing:
            raise ValueError("sft.share_prefix keeps the prefix's key/value cache, which "
                             "gradient checkpointing turns off: drop one of them")
        return self


class CurriculumSpec(Strict):
    enabled: bool = True
    # Weight of a (family, level) bucket: floor + p(1-p) from its recent success rate p, so
    # buckets solved sometimes but not always are drawn most (cadrille-style hard-example mining).
    floor: float = Field(0.05, ge=0)
    window: int = Field(32, ge=1)  # recent episodes per bucket that p is computed from
    prior_success: float = Field(0.5, ge=0, le=1)  # p of a bucket not yet seen
    # Static weights multiplying the adaptive one: {family: w} and {level: w}; a name or level
    # left out weighs 1, 0 never draws it. Checked against the task registry when a run
    # starts (training/tasks/sampling.py `check_task_choices`).
    family_weights: dict[str, float] = Field(default_factory=dict)
    level_weights: dict[int, float] = Field(default_factory=dict)
    # Harder levels as success rises: {level: s} draws level L's buckets only once the level
    # below has reached success s over its buckets' windows (pooled); the lowest level is
    # always open, a level left out opens with the one below it. Once open, a level stays open.
    unlock: dict[int, float] = Field(default_factory=dict)

    @field_validator("unlock")
    @classmethod
    def _unlock_rates(cls, unlock: dict[int, float]) -> dict[int, float]:
        for level, rate in unlock.items():
            if not 0 <= rate <= 1:
                raise ValueError(f"level {level}: {rate} is not a success rate in [0, 1]")
        return unlock


class TaskSampling(Strict):
    families: list[str] = Field(default_factory=list)  # empty: all training families
    levels: list[int] = Field(default_factory=lambda: [1])
    split: Literal["train", "validation", "test"] = "train"


class RolloutsSpec(Strict):
    # Where rollout episodes run: "local" (this machine's jailed worker pool) or "ray" (the
    # nodes of a Ray cluster, docs/CLUSTER.md; the `cluster` extra). Ray's nodes build the
    # policy from a spec, so "ray" needs `generation: server` (they call the endpoint).
    backend: Literal["local", "ray"] = "local"
    cluster: str = "auto"  # with ray: "auto" (the cluster on this machine) or a head's ADDRESS


class GRPOSpec(Strict):
    tasks: TaskSampling = Field(default_factory=TaskSampling)
    curriculum: CurriculumSpec = Field(default_factory=CurriculumSpec)
    max_steps: int = Field(20, ge=1)
    learning_rate: float = Field(1e-5, gt=0)
    # Checkpoint every N GRPO steps (unset: `run.save_steps`, which a pipeline sets for SFT's
    # hundreds of steps); a GRPO step on a CPU takes minutes, so a stop should lose at most one.
    save_steps: int | None = Field(None, ge=1)
    per_device_train_batch_size: int = Field(16, ge=1)  # rows: groups x generations x turns
    gradient_accumulation_steps: int = Field(1, ge=1)
    num_generations: int = Field(4, ge=2)  # group size
    max_completion_length: int = Field(512, ge=8)  # new tokens per model turn
    max_turns: int = Field(4, ge=1)  # model turns per rollout (the loop's max_steps)
    # Dynamic sampling: run this many times the groups a step trains on and keep those whose
    # rewards differ (topped up with equal-reward groups when too few differ).
    oversample: int = Field(1, ge=1)
    # In-process generation: a group's rollouts start from one prompt, so their first turns
    # are sampled as one batch (one generate, num_generations rows) instead of one by one.
    batch_first_turn: bool = True
    # Self-critical member (SCST, Rennie et al. 2017): one rollout of each group decodes
    # greedily, as `eval` and the studio do, the others sample. Sampled groups alone seldom
    # hold the greedy reply, so GRPO sharpens the sampling distribution around it without
    # ever ranking it; with this member a reply that beats the greedy one is pushed up and a
    # greedy reply that loses is pushed down (its log-probs are scored at `temperature`).
    greedy_member: bool = False
    # Where rollout episodes are recorded: "run" (RUN/store), "default" (the user's store,
    # seen in the studio's Episodes dock), a folder, or "off".
    rollout_store: str = "run"
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    beta: float = Field(0.0, ge=0)  # KL coefficient (0: no reference model)
    epsilon: float = Field(0.2, gt=0)  # clipping
    epsilon_high: float | None = None  # DAPO's clip-higher
    loss_type: Literal["grpo", "dr_grpo", "dapo", "bnpo"] = "dapo"
    scale_rewards: Literal["group", "batch", "none"] = "group"
    num_iterations: int = Field(1, ge=1)
    mask_truncated_completions: bool = False
    render_size: int = Field(256, ge=32)
    # When a rollout renders the scene: "auto" renders after each change for a model that takes
    # images and never for a text-only one, which still gets the scene listing ("text"; SmolLM2:
    # a render it is never shown is CPU taken from the rollouts); or as the loop's `observe`:
    # "changed", "always", "text", "never" (no render and no scene listing).
    observe: Literal["auto", "changed", "always", "text", "never"] = "auto"
    rollout_workers: int = Field(1, ge=1)  # tool worker processes shared by the rollouts
    tool_deadline_s: float = Field(30.0, gt=0)
    # Generation: "transformers" (the model being trained, in this process: CPU, small models)
    # or "server": an OpenAI-compatible server that returns token ids and log-probs (vLLM
    # behind `modelwright serve`), which gets the adapter after every optimiser step.
    generation: Literal["transformers", "server"] = "transformers"
    server_url: str = "http://127.0.0.1:8000/v1"
    server_adapter_name: str = "rl"  # served as rl-v1, rl-v2, ... (one per step)
    # Rollouts may come from an adapter at most this many steps older than the one trained;
    # a sync that keeps failing stops the run with the reason instead of training off-policy.
    max_staleness: int = Field(1, ge=0)
    gradient_checkpointing: bool = False
    rollouts: RolloutsSpec = Field(default_factory=RolloutsSpec)

    @model_validator(mode="after")
    def _batch_holds_groups(self) -> GRPOSpec:
        if self.rollouts.backend == "ray" and self.generation != "server":
            raise ValueError(
                "rollouts.backend: ray needs generation: server (the nodes call the endpoint; "
                "the in-process model runs on the trainer's node, with rollouts.backend: local)"
            )
        batch = self.per_device_train_batch_size * self.gradient_accumulation_steps
        if batch % self.num_generations:
            raise ValueError(
                f"per_device_train_batch_size x gradient_accumulation_steps ({batch}) must be a "
                f"multiple of num_generations ({self.num_generations})"
            )
        if self.greedy_member and self.generation == "server":
            raise ValueError(
                "greedy_member: in-process generation only (a server's log-probs of a greedy "
                "reply are not those of the sampling temperature the trainer scores)"
            )
        per_task = self.num_generations * self.max_turns
        if batch % per_task:
            raise ValueError(
                f"per_device_train_batch_size x gradient_accumulation_steps ({batch}) must be a "
                f"multiple of num_generations x max_turns ({per_task}): one row per model turn"
            )
        return self


class LongEvalSpec(Strict):
    families: list[str] = Field(default_factory=list)  # empty: the eval's families
    levels: list[int] = Field(default_factory=lambda: [4, 5])
    per_family: int = Field(2, ge=1)  # tasks per family, cycling the levels
    max_steps: int = Field(26, ge=1)  # a level-5 task is up to 24 calls


class EvalSpec(Strict):
    families: list[str] = Field(default_factory=list)
    levels: list[int] = Field(default_factory=lambda: [1])
    split: Literal["validation", "test"] = "test"
    per_family: int = Field(8, ge=1)
    max_steps: int = Field(3, ge=1)  # policy turns per episode
    max_tokens: int = Field(160, ge=8)
    workers: int = Field(1, ge=1)
    # In-process model: run the episodes in waves of this many at once (one tool worker each)
    # and generate each turn of a wave's episodes as one batch (`LockstepBatcher`). Which turns
    # share a batch depends only on the episodes, so a rerun reports the same; 1: one by one.
    batch: int = Field(1, ge=1)
    # ... split into generates of at most this many padded prompt tokens (rows x the longest),
    # so a long prompt (a held-out family's tool result) is not padded onto every row.
    batch_tokens: int = Field(8192, ge=1)
    # Pipeline: the dtype the eval stages load the model in (None: `model.dtype`). float32
    # lets greedy turns start from their episode's cached prefix (`reuse_kv`), so a turn runs
    # its new tokens only, and with `workers` > 1 and `batch` 1 the episodes' turns run side by
    # side, the cores shared among them (the CLI eval's way, benchmarks/bench_contention.py).
    dtype: Literal["float32", "bfloat16", "float16"] | None = None
    # Pipeline: `fast` runs each eval stage's greedy turns in llama.cpp, on the stage's adapter
    # merged into a GGUF in `quant` (kept in RUN/variants/; needs llama-cpp-python: `make
    # fast`). f32 reproduces the standard variant's float32 turns (12 of 12 episodes alike,
    # docs/TRAINING.md) in a fraction of its time; q8_0 is faster but another model's turns.
    variant: Literal["standard", "fast"] = "standard"
    quant: Literal["q8_0", "f16", "bf16", "f32"] = "f32"
    # Pipeline: also score SFT and GRPO on this many test seeds of each held-out family (the
    # families no split trains on), each task shown its family's declared toolbox; 0: not scored.
    held_out_per_family: int = Field(0, ge=0)
    # Which held-out families that eval scores; empty: every one the registry marks held out.
    held_out_families: list[str] = Field(default_factory=list)
    # The goals' wordings (training/tasks/wording.py): `seen` (those training shows),
    # `unseen` (held-out phrasings) or `both`, whose report sets the two apart (`phrasings`).
    # Checkpoint selection always scores seen phrasings only.
    phrasing: Literal["seen", "unseen", "both"] = "seen"
    # Pipeline: score the base model before training (`untrained`); false skips that stage.
    untrained: bool = True
    # The levels the held-out families are scored at.
    held_out_levels: list[int] = Field(default_factory=lambda: [1])
    # Pipeline: a small eval of the GRPO adapter on long tasks (levels 4-5), no target: success,
    # calls and prompt tokens per turn by level, and overflows (report.json `long`).
    long: LongEvalSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_hand_written_tools(cls, data: Any) -> Any:
        if isinstance(data, dict) and "held_out_tools" in data:
            raise ValueError(
                "held_out_tools is gone (#49): a held-out family's tasks show its declared "
                "toolbox (Family.toolbox, training/tasks/toolbox.py); drop the line")
        return data


class DemoSpec(Strict):
    families: list[str] = Field(default_factory=list)  # empty: all training families
    levels: list[int] = Field(default_factory=lambda: [1])
    per_family: int = Field(16, ge=1)  # x the families drawn from, shared out by the weights
    # As grpo.curriculum's: {family: w}, {level: w}; left out weighs 1, 0 draws none.
    family_weights: dict[str, float] = Field(default_factory=dict)
    level_weights: dict[int, float] = Field(default_factory=dict)
    split: Literal["train"] = "train"
    # Recovery demonstrations: for this many of each family's tasks, one more oracle episode
    # whose first call names an object the scene lacks; the tool's error (which lists the
    # scene's objects) comes back and the oracle then plays its plan. Only the turns after
    # the error become rows, so SFT is shown a retry, never the wrong call.
    recovery_per_family: int = Field(0, ge=0)
    # Oracle episodes at once, one tool worker each (no model runs: the workers are the work).
    workers: int = Field(1, ge=1)
    # Calls the oracle writes in one reply: 1, one call a turn, each turn seeing the scene the
    # last call left; 0, the whole plan at once (as many as one reply may hold, 8; a reply
    # also ends at a call that only reads, such as get_scene, whose answer the next calls
    # need), then a closing turn once it has seen the result. A model trained on those rows
    # writes the calls a request lists in one reply instead of deciding after each call.
    calls_per_turn: int = Field(1, ge=0)
    # Each reply that calls starts with "Step k of n." (n: the plan's replies; a retry after an
    # error repeats its step), the close stays "Done.": the model writes its own count of what
    # is left, and is shown to close when it has said "Step n of n".
    count_steps: bool = False


class AccelerateSpec(Strict):
    config_file: str | None = None  # configs/accelerate/*.yaml
    num_machines: int = Field(1, ge=1)
    num_processes: int = Field(1, ge=1)
    main_process_ip: str | None = None
    main_process_port: int = 29500


class TrainConfig(Strict):
    kind: Literal["sft", "grpo", "pipeline"]
    name: str | None = None
    model: ModelSpec
    # Tools shown to the model in every prompt (demos, SFT rows, GRPO, eval); None: the whole
    # catalogue. A tiny CPU model cannot afford ~6k tokens of schemas per prompt.
    tools: list[str] | None = None
    lora: LoraSpec = Field(default_factory=LoraSpec)
    run: RunSpec = Field(default_factory=RunSpec)
    sft: SFTSpec | None = None
    grpo: GRPOSpec | None = None
    demos: DemoSpec | None = None
    eval: EvalSpec | None = None
    accelerate: AccelerateSpec | None = None

    @model_validator(mode="after")
    def _stages_present(self) -> TrainConfig:
        need = {"sft": ["sft"], "grpo": ["grpo"], "pipeline": ["demos", "sft", "grpo", "eval"]}
        missing = [s for s in need[self.kind] if getattr(self, s) is None]
        if missing:
            raise ValueError(f"kind {self.kind!r} needs section(s): {', '.join(missing)}")
        if self.kind == "sft" and not self.sft.data:
            raise ValueError("sft.data is empty: list the exported Parquet files or folders")
        if self.run.eval_every and self.eval is None:
            raise ValueError(
                f"run.eval_every is {self.run.eval_every} but the config has no eval section: "
                "add `eval:` (families, levels, per_family, ...) or set run.eval_every: 0"
            )
        if self.run.eval_every and not self.eval.families:
            raise ValueError("run.eval_every is set but eval.families is empty: list the families")
        return self


def _merged(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def load_config(path: str | Path, quick: bool = False) -> TrainConfig:
    """Read and validate a YAML config; raise `ConfigError` naming the offending field.

    A config's `quick:` mapping holds overrides (merged key by key) for a short run of the
    same pipeline: `quick=True` applies them, as `--quick` does; otherwise it is ignored."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no config file at {path}")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: not valid YAML ({what}); fix that line") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    raw.setdefault("name", path.stem)
    over = raw.pop("quick", None)
    if quick:
        if not isinstance(over, dict):
            raise ConfigError(f"{path}: --quick needs a `quick:` mapping of overrides")
        raw = _merged(raw, over)
        raw["name"] = f"{raw['name']}-quick"
    try:
        return TrainConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{path}: " + "; ".join(_describe(e) for e in exc.errors())) from None


def _describe(error: dict) -> str:
    where = ".".join(str(p) for p in error["loc"]) or "(top level)"
    return f"{where}: {error['msg'].removeprefix('Value error, ')}"
