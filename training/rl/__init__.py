"""Reinforcement learning: multi-turn GRPO on the product's own episode loop.

- `grpo`         `run_grpo` with TRL's `GRPOTrainer` and LoRA; our rollouts through `rollout_func`
- `rollouts`     rollouts as `EpisodeLoop` episodes on the eval scheduler; the rows TRL trains on
- `grpo_server`  `grpo.generation: server`: rollouts against a vLLM `modelwright serve`
- `curriculum`   which task each slot draws, reproducible from the seed and the history
"""
