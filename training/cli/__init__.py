"""Training-layer commands (tasks, score, run, eval, train, cluster, envs), assembled from their modules.

- `tasks`  `tasks list|show|try` and `score A B`
- `eval`   `run` (one episode) and `eval` (a policy over a split or a benchmark)
- `train`  `train sft|grpo|pipeline|launch`
- `cluster` `cluster up|status|down` (a Ray cluster for eval and rollouts)
- `envs`   `envs serve` (the task families as an OpenEnv environment server)
- `views`  how `tasks show` and `score` read to a person
"""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    # a literal list: a module missing here is an ImportError, not a silently absent group
    from training.cli import cluster, envs, eval, tasks, train

    for group in (tasks, eval, train, cluster, envs):
        group.register(app)
