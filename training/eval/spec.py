"""One episode: what to run (`EpisodeSpec`, from a task id or a benchmark case) and the one
function that runs it on a tool session (`run_spec`), on every backend; `episode_scheduler`,
the local pool that runs many. Re-exported by `training.eval.harness`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents import LoopConfig, run_episode
from tools import Session


@dataclass
class EpisodeSpec:
    """One thing to evaluate: the goal, how to build the start state and how to check."""

    key: str  # task id or benchmark case id
    family: str
    goal: str
    setup: Callable[[Any], Any] | None
    checker: Callable[[Any, list[dict]], Any] | None
    task_info: dict = field(default_factory=dict)
    budget: int = 20
    task_id: str | None = None
    task_params: dict | None = None


def task_spec(task_id: str) -> EpisodeSpec:
    from training.tasks import get_task
    from training.tasks.base import family_tools

    task = get_task(task_id)
    return EpisodeSpec(
        key=task.id,
        family=task.family,
        goal=task.prompt,
        setup=task.setup,
        checker=task.evaluate,
        task_info={"task_id": task.id, "family": task.family, "level": task.level,
                   "tools": list(family_tools(task.family))},  # fmt: skip
        budget=task.budget,
        task_id=task.id,
        task_params=task.parameters,
    )


def benchmark_specs(folder: str | Path) -> tuple[list[EpisodeSpec], list[dict]]:
    """One episode per case and prompt of an external benchmark folder, and the skipped
    (malformed) cases with their reasons."""
    from training.tasks.benchmark import PART_NAME, load_benchmark

    bench = load_benchmark(folder)
    specs = []
    for case in bench.cases.values():
        for i in range(len(case.prompts)):
            task = case.task(i)
            key = task.id if len(case.prompts) == 1 else f"{task.id}#{i}"
            info = {"task_id": key, "family": task.family, "plan": task.oracle}
            if case.reference:
                info["reference"] = {"code": case.reference, "name": PART_NAME}
            specs.append(
                EpisodeSpec(
                    key=key,
                    family=task.family,
                    goal=task.prompt,
                    setup=task.setup,
                    checker=task.evaluate,
                    task_info=info,
                    budget=task.budget,
                    task_id=None,
                    task_params=task.parameters,
                )  # fmt: skip
            )
    return specs, bench.skipped


def run_spec(
    spec: EpisodeSpec,
    policy: Any,
    session: Session,
    *,
    config: LoopConfig | None = None,
    store: Any = None,
    source: str = "agent",
    subscribers: tuple = (),
    cancel: Any = None,
    meta: dict | None = None,
) -> dict:
    """Run one episode of `spec` and return its record (the `run --json` summary). `meta`:
    more episode fields for the store (model, adapter, tags), e.g. an RL rollout's run/step."""
    config = config or LoopConfig()
    config = LoopConfig(**{**config.__dict__, "max_steps": min(config.max_steps, spec.budget)})
    recorder_factory = None
    if store is not None:

        extra = meta

        def recorder_factory(**meta: Any) -> Any:
            return store.begin_episode(
                task_id=spec.task_id, task_params=spec.task_params, source=source,
                **{**meta, **(extra or {})},
            )

    result = run_episode(
        policy,
        session,
        spec.goal,
        setup=spec.setup,
        checker=spec.checker,
        config=config,
        task_info=spec.task_info,
        subscribers=subscribers,
        cancel=cancel,
        recorder_factory=recorder_factory,
    )
    record = {"task": spec.key, "family": spec.family, **result.summary()}
    record["success"] = bool(result.success)
    record["reward"] = float(result.reward) if result.reward is not None else 0.0
    record["_result"] = result  # dropped from the JSON report; kept for --out
    return record


def start_templates_soon() -> None:
    """Boot the tool workers' and the geometry checkers' templates in the background: an
    eval that loads a model first (`modelwright eval --policy hf`) overlaps the two, and its
    first episode starts seconds sooner."""
    from tools.runtime.supervisor import start_template_soon
    from training.tasks.checker_process import start_template_soon as start_checker_template

    start_template_soon()
    start_checker_template()


def episode_scheduler(workers: int, session_factory: Callable[[], Any] | None = None, *,
                      scored: bool = True, **options: Any) -> Any:  # fmt: skip
    """The scheduler that runs `workers` episodes at once (eval's, and GRPO's rollouts).
    With `scored`, the verifier keeps as many clean workers warm: each episode's checker
    scores in one when it ends, and episodes that end together must not queue on cold
    starts. `options` go to `agents.Scheduler` (seed, deadline_s). Every episode gets a fresh worker
    (one worker, one episode: agents/loop/scheduler.py)."""
    from agents import Scheduler

    if scored:
        from training.tasks.verifier import default_verifier

        default_verifier().reserve(workers)
    return Scheduler(workers, session_factory, **options)
