"""Supervised fine-tuning on recorded episodes with TRL's `SFTTrainer` (LoRA through PEFT).

Data: the store's TRL conversational export (see `training/sft/data.py`), filtered (e.g.
successful oracle/human episodes, or one teacher model's episodes for distillation). Loss on
assistant turns only; images included. Writes a run folder (see `training/runs.py`) that
`--resume` continues after a kill.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.runs import (
    allocator_args,
    bound_allocator,
    checkpoint_step,
    make_callbacks,
    prepare_run_dir,
    score_loss_positions_only,
    set_cpu_threads,
    tensorboard_dir,
    trainer_options,
    weights_from_checkpoint,
)
from training.sft.data import ConversationCollator, DataFilter, load_conversations
from training.train_config import LoraSpec, ModelSpec, RunSpec, SFTSpec, TrainConfig


@dataclass
class SFTResult:
    run_dir: Path
    adapter_dir: Path  # the LoRA adapter, or the whole model with sft.full_finetune
    steps: int
    final_loss: float | None
    resumed_from: int | None


def base_model_path(spec: ModelSpec, run_dir: Path, path: str | Path | None = None) -> str:
    """The model training starts from: `path` when given, else `model.path`, else (with
    `model.build_tiny`) the tiny CPU model, built once into `RUN/base-model`. Nothing reaches
    for a model hub unless `model.path` names a hub id."""
    if path:
        return str(path)
    if spec.path and not spec.build_tiny:
        return spec.path
    folder = Path(spec.path).expanduser() if spec.path else Path(run_dir) / "base-model"
    if not (folder / "config.json").is_file():
        from training.sft.tiny_model import build_tiny_model

        build_tiny_model(folder, seed=0, size=spec.tiny_size)
    return str(folder)


def load_model(spec: ModelSpec, run_dir: Path, path: str | Path | None = None):
    """(model, processor) a run in `run_dir` trains, from the model `base_model_path` picks
    (the one decision of where a run's model comes from, for SFT, GRPO and the pipeline)."""
    from agents import resolve_model
    from agents.models.source import loading

    # before torch: a typo fails at once
    source = resolve_model(base_model_path(spec, run_dir, path))
    import torch

    from agents.policies.hf_policy import load_pretrained

    kwargs: dict[str, Any] = {
        "dtype": "auto" if spec.dtype == "auto" else getattr(torch, spec.dtype),
        **source.kwargs(),
    }
    if spec.attn_implementation:
        kwargs["attn_implementation"] = spec.attn_implementation
    with loading(source):
        processor, model = load_pretrained(source.name, **kwargs)
    return model, processor


def peft_config(spec: LoraSpec):
    """PEFT LoRA config on the language model's projections, or None for a full fine-tune."""
    if not spec.enabled:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=spec.r,
        lora_alpha=spec.alpha,
        lora_dropout=spec.dropout,
        target_modules=spec.target_modules,
        modules_to_save=spec.modules_to_save or None,
        task_type="CAUSAL_LM",
    )


def sft_args(spec: SFTSpec, run: RunSpec, out_dir: Path, use_cpu: bool, **override: Any):
    from trl import SFTConfig

    own_mask = override.pop("assistant_only_loss", True)
    return SFTConfig(
        **{**trainer_options(spec, run, out_dir, use_cpu), **override},
        warmup_steps=spec.warmup_steps,
        weight_decay=spec.weight_decay,
        assistant_only_loss=own_mask,
        remove_unused_columns=False,  # the collator needs `images` and `tools`
        dataset_kwargs={"skip_prepare_dataset": True},
        max_length=spec.max_length,
        dataloader_num_workers=0,
    )


def _trainer_class():
    from trl import SFTTrainer

    class ModelwrightSFTTrainer(SFTTrainer):
        """Logs which examples each optimiser step trained on (`samples.jsonl`)."""

        samples_path: Path | None = None
        shared_prefix: Any = None  # a shared_prefix.Counter when `sft.share_prefix` is on

        def compute_loss(self, model, inputs, *args, **kwargs):
            ids = inputs.pop("sample_ids", None)
            if ids is not None and self.samples_path is not None and model.training:
                import json

                with self.samples_path.open("a") as fh:
                    fh.write(json.dumps({"step": self.state.global_step + 1, "ids": ids}) + "\n")
            if self.shared_prefix is not None and model.training:
                from training.sft.shared_prefix import SharedPrefix

                model = SharedPrefix(model, self.shared_prefix)
            return super().compute_loss(model, inputs, *args, **kwargs)

    return ModelwrightSFTTrainer


def _from_last_checkpoint(ckpt: Path, out_dir: Path, spec: SFTSpec) -> SFTResult:
    """A finished run resumed: its last checkpoint is the result (`weights_from_checkpoint`)."""
    adapter_dir = out_dir / ("model" if spec.full_finetune else "adapter")
    step = weights_from_checkpoint(ckpt, adapter_dir)
    return SFTResult(out_dir, adapter_dir, step, None, step)


class _ViewCollator:
    """Shows the collator each row in one prompt view (`training/sft/views.py`)."""

    def __init__(self, inner: Any, view: str) -> None:
        self.inner, self.view = inner, view

    def __call__(self, rows: list[dict]) -> dict:
        from training.sft.views import abridge

        return self.inner([abridge(r, self.view) for r in rows])


def _prompt_curriculum(model, processor, data, collator, spec: SFTSpec, run: RunSpec,
                       out_dir: Path, peft: Any, use_cpu: bool):  # fmt: skip
    """Train `model` through `spec.prompt_curriculum`'s phases in order; returns the model the
    run proper starts from (with the LoRA adapter on it when `peft` is given). Each phase has
    its own optimiser and schedule and saves no checkpoint: a run killed during the phases
    starts them again on `--resume`. Their losses go to RUN/curriculum.json."""
    import json

    done = []
    for i, phase in enumerate(spec.prompt_curriculum):
        args = sft_args(
            spec.model_copy(update={"max_steps": phase.steps}),
            run,
            out_dir / "curriculum" / f"{i}-{phase.view}",
            use_cpu,
            save_strategy="no",
            report_to=[],
        )
        trainer = _trainer_class()(
            model=model,
            args=args,
            train_dataset=data,
            processing_class=processor,
            data_collator=_ViewCollator(collator, phase.view),
            peft_config=peft,
        )
        output = trainer.train()
        model, peft = trainer.model, None  # later phases and the run train the same weights
        done.append({"view": phase.view, "steps": phase.steps, "loss": output.training_loss})
        (out_dir / "curriculum.json").write_text(json.dumps(done, indent=1))
    return model


def _packed_order(data: Any, spec: Any, run: Any) -> Any:
    """`data` in `pack_order`'s order: each step's batch from one family (`sft.pack`)."""
    from training.sft.packing import pack_order

    cols = data.column_names
    tasks = data["task_id"] if "task_id" in cols else [""] * len(data)
    episodes = data["episode_id"] if "episode_id" in cols else [str(i) for i in range(len(data))]
    keys = [(str(t or "").split(":")[0], str(e or i), i)
            for i, (t, e) in enumerate(zip(tasks, episodes, strict=True))]  # fmt: skip
    return data.select(pack_order(keys, spec.per_device_train_batch_size, run.seed))


class _IdCollator:
    """Adds the rows' ids to the batch so the trainer can log the data order."""

    def __init__(self, inner: ConversationCollator, id_column: str | None) -> None:
        self.inner, self.id_column = inner, id_column

    def __call__(self, rows: list[dict]) -> dict:
        batch = self.inner(rows)
        batch["sample_ids"] = (
            [str(r.get(self.id_column, "")) for r in rows] if self.id_column else []
        )
        return batch


def run_sft(
    config: TrainConfig,
    out_dir: Path,
    resume: bool = False,
    model_path: str | Path | None = None,
    config_text: str = "",
) -> SFTResult:
    """Train (or continue) an SFT run into `out_dir`; returns where the adapter is."""
    import torch

    spec, run = config.sft, config.run
    before = torch.get_num_threads()
    bound_allocator(**allocator_args(run))  # before the trainer's threads start
    set_cpu_threads(None if torch.cuda.is_available() else (spec.cpu_threads or run.cpu_threads))
    try:
        return _run_sft(config, out_dir, resume, model_path, config_text)
    finally:
        torch.set_num_threads(before)  # a pipeline's next stages keep their own setting


def _run_sft(config: TrainConfig, out_dir: Path, resume: bool, model_path: str | Path | None,
             config_text: str) -> SFTResult:  # fmt: skip
    import torch

    spec, run = config.sft, config.run
    score_loss_positions_only()  # the loss's positions only, as TRL does on a GPU
    ckpt = prepare_run_dir(out_dir, config_text or config.model_dump_json(indent=2), resume)
    if ckpt is not None and checkpoint_step(ckpt) >= spec.max_steps:
        return _from_last_checkpoint(ckpt, out_dir, spec)
    where = DataFilter(**spec.filter.model_dump())
    data = load_conversations(spec.data, where)
    id_column = next((c for c in ("episode_id", "id") if c in data.column_names), None)
    model, processor = load_model(config.model, out_dir, model_path)
    from agents.policies.chat_format import is_text_only, uses_hermes

    if is_text_only(processor) and "images" in data.column_names:
        # A text-only model trains on the rows' text; the frames stay in the store.
        data = data.remove_columns("images")
    collator = _IdCollator(ConversationCollator(processor, spec.max_length,
                                                      pad_to_multiple_of=spec.pad_to_multiple_of,
                                                      mask_padding=spec.mask_padding), id_column)
    use_cpu = not torch.cuda.is_available()
    # The collator's labels mask the prompt; TRL's own mask needs a template it can patch,
    # which a template without tools (the Hermes format is rendered here) is not.
    own = {"assistant_only_loss": False} if uses_hermes(processor) else {}
    packer = None
    if (spec.pack or spec.share_prefix) and is_text_only(processor):
        data, own = _packed_order(data, spec, run), {**own, "train_sampling_strategy": "sequential"}
    args = sft_args(spec, run, out_dir, use_cpu=use_cpu, **own)
    tensorboard_dir(out_dir)
    peft = None if spec.full_finetune else peft_config(config.lora)
    if spec.prompt_curriculum and ckpt is None:  # a checkpoint of the run proper holds them
        model = _prompt_curriculum(
            model, processor, data, collator, spec, run, out_dir, peft, use_cpu
        )
        peft = None
    trainer = _trainer_class()(
        model=model,
        args=args,
        train_dataset=data,
        processing_class=processor,
        data_collator=collator,
        peft_config=peft,
        callbacks=make_callbacks(
            out_dir,
            serve_url=run.serve_url,
            serve_name=run.serve_adapter_name,
            eval_config=config,
            run=run,
        ),
    )
    trainer.samples_path = out_dir / "samples.jsonl"
    hook = shared = None
    if spec.share_prefix and "train_sampling_strategy" in own:
        from training.sft.shared_prefix import Counter

        shared = trainer.shared_prefix = Counter()
    elif "train_sampling_strategy" in own:
        from training.sft.packing import PrefixPacker

        packer = PrefixPacker()
        hook = packer.attach(trainer.model)
    try:
        output = trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
    finally:
        if hook is not None:
            hook.remove()
    counted = packer or shared
    if counted is not None:  # this run's (or this resumed part's) tokens: rows vs run
        import json

        row_tokens = packer.tokens_in if packer is not None else shared.row_tokens
        (out_dir / ("packing.json" if packer is not None else "shared_prefix.json")).write_text(
            json.dumps({"row_tokens": row_tokens, "tokens_run": counted.tokens_run}))
    adapter_dir = out_dir / ("model" if spec.full_finetune else "adapter")
    trainer.save_model(str(adapter_dir))
    processor.save_pretrained(str(adapter_dir))
    loss = output.training_loss if output is not None else None
    return SFTResult(
        out_dir,
        adapter_dir,
        trainer.state.global_step,
        loss,
        int(ckpt.name.split("-")[1]) if ckpt else None,
    )
