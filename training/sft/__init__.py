"""Supervised fine-tuning: demonstrations in, a LoRA adapter out.

- `demos`    episodes captured from the loop (the oracle, a teacher) as SFT rows
- `data`     the store's exported conversations and the collator that batches them
- `trainer`  `run_sft` with TRL's `SFTTrainer`; `load_model`/`peft_config` (GRPO reuses them)
"""
