"""Modelwright training layer.

`training.verify(task, session, calls) -> RewardBreakdown`: the one way a task is scored, in
a clean worker that never ran the policy's code (training/tasks/verifier.py).
"""


def __getattr__(name: str):
    if name == "verify":  # lazily: importing `training` stays light
        from training.tasks.verifier import verify

        return verify
    raise AttributeError(f"module 'training' has no attribute {name!r}")
