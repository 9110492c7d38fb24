"""Modelwright's tasks as environments for other RL trainers (docs/ENVIRONMENTS.md).

`core.EpisodeEnv`: reset(task id) -> step(calls) -> reward, over the product's own episode
loop and verifier. `trl_env`: a class for TRL's `GRPOTrainer(environment_factory=...)`.
"""
