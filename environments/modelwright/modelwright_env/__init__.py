"""Modelwright's tasks as a verifiers environment (taskset id `modelwright-env`)."""

from modelwright_env.taskset import (
    ModelwrightConfig,
    ModelwrightData,
    ModelwrightEnv,
    ModelwrightTask,
    ModelwrightTaskConfig,
    ModelwrightTaskset,
    load_environment,
)

__all__ = [
    "ModelwrightConfig",
    "ModelwrightData",
    "ModelwrightEnv",
    "ModelwrightTask",
    "ModelwrightTaskConfig",
    "ModelwrightTaskset",
    "load_environment",
]
