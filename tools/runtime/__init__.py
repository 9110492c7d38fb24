"""The trusted side's running of tools: jailed worker processes, sessions over them, and the
clean session that rebuilds an episode to measure it.

- `supervisor`: worker processes (started through `tools/sandbox/`), the warm pool, deadlines
  enforced from outside, every reply checked (`tools/trust/replies.py`) before use
- `session`: `ToolSession`, one scene with one worker at a time, every call validated and
  recorded in its ledger (`tools/trust/ledger.py`)
- `verifier`: `CleanRoom`, a fresh session that replays what the ledger saw; where rewards
  are measured (it builds on `ToolSession`, hence here and not in `tools/trust/`)

Callers above `tools` take `ToolSession`, `WorkerPool` and `default_pool` from `tools`.
"""
