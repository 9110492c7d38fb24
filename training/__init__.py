"""Modelwright training layer: tasks and their rewards, evaluation, SFT and RL runs.

Public face (see docs/CONTRACTS.md), for the layers above: `from training import get_task,
...`. `training.verify(task, session, calls) -> RewardBreakdown` is the one way a task is
scored, in a clean worker that never ran the policy's code (training/tasks/verifier.py).
The names load on first use (PEP 562), so `import training` stays light (no torch, no
transformers, no geometry kernels).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tools.lazy_face import lazy_face

if TYPE_CHECKING:
    from training.eval.harness import EpisodeSpec, evaluate, run_spec, task_spec
    from training.eval.policies import make_policy, policy_names
    from training.rewards import RewardBreakdown
    from training.runs import latest_checkpoint, newest_adapter
    from training.tasks import Task, TaskError, get_task, list_families, split_ids
    from training.tasks.benchmark import load_benchmark
    from training.tasks.verifier import verify
    from training.train_config import ConfigError, load_config

_LAZY = {
    "EpisodeSpec": "training.eval.harness", "evaluate": "training.eval.harness",
    "run_spec": "training.eval.harness", "task_spec": "training.eval.harness",
    "RewardBreakdown": "training.rewards",
    "latest_checkpoint": "training.runs", "newest_adapter": "training.runs",
    "Task": "training.tasks", "TaskError": "training.tasks", "get_task": "training.tasks",
    "list_families": "training.tasks", "split_ids": "training.tasks",
    "load_benchmark": "training.tasks.benchmark",
    "verify": "training.tasks.verifier",
    "make_policy": "training.eval.policies", "policy_names": "training.eval.policies",
    "ConfigError": "training.train_config", "load_config": "training.train_config",
}

__all__ = [
    "ConfigError", "EpisodeSpec", "RewardBreakdown", "Task", "TaskError", "evaluate", "get_task",
    "latest_checkpoint", "list_families", "load_benchmark", "load_config", "make_policy",
    "newest_adapter",
    "policy_names", "run_spec",
    "split_ids", "task_spec", "verify"
]


__getattr__, __dir__ = lazy_face(globals(), _LAZY)
