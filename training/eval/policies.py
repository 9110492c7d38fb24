"""Every policy a run can name, in one table: the agents layer's own and the task-aware ones.

training/ owns every policy (agents/ knows no task), so the table is assembled here from a
literal list, not by modules registering themselves on import. The CLI, the studio and the
evaluation build policies through `make_policy`; `--policy` choices come from `policy_names`.
"""

from __future__ import annotations

from collections.abc import Mapping

from agents import Policy
from agents.policies import BUILTIN_POLICIES, build_policy

# name -> "module:attribute" of a factory `f(arg: str | None, **options) -> Policy`,
# imported when a policy of that name is built
POLICIES: Mapping[str, str] = {
    **BUILTIN_POLICIES,
    "oracle": "training.eval.oracle:make_oracle",  # a task's own plan
    "reference": "training.eval.oracle:make_reference",  # a benchmark case's reference script
}


def policy_names() -> list[str]:
    return sorted(POLICIES)


def make_policy(spec: str, **options) -> Policy:
    """Build the policy named by `spec` (`NAME` or `NAME:ARG`, a name of `POLICIES`)."""
    return build_policy(POLICIES, spec, options)
