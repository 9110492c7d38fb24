"""Evaluation: a policy run over tasks or benchmark cases, and what its report says.

- `harness`   `evaluate`/`run_spec`/`task_spec` (also on the `training` face), `compare`
- `run_eval`  held-out evaluation of a model in memory (pipeline stages, `run.eval_every`)
- `stats`     Wilson and t intervals, paired differences between stages
- `oracle`    the `oracle` and `reference` policies, registered into the agents factory
"""
