"""Policy factory: turn a spec such as `none`, `script:run.jsonl`, `openai` into a Policy.

`BUILTIN_POLICIES` is the agents layer's own table, a literal: nothing registers itself on
import. agents/ knows no task, so the task-aware policies (`oracle`, `reference`) are not in
it: the layer that owns every policy assembles the whole table from this one and its own
(`training.eval.policies.POLICIES`) and builds through `build_policy`. The factories load
lazily: `openai` pulls in the openai client, `hf` torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

from agents.policies.protocol import Policy

PolicyFactory = Callable[..., Policy]

# name -> "module:attribute" of a factory `f(arg: str | None, **options) -> Policy`
BUILTIN_POLICIES: Mapping[str, str] = {
    "none": "agents.policies.simple:make_none",
    "script": "agents.policies.simple:make_script",
    "openai": "agents.policies.openai_policy:make_openai",
    "hf": "agents.policies.local:make_local",
}


class UnknownPolicyError(ValueError):
    pass


def policy_names(table: Mapping[str, str] = BUILTIN_POLICIES) -> list[str]:
    return sorted(table)


def make_policy(spec: str, **options) -> Policy:
    """Build one of the agents layer's own policies (`BUILTIN_POLICIES`); see `build_policy`."""
    return build_policy(BUILTIN_POLICIES, spec, options)


def build_policy(table: Mapping[str, str], spec: str, options: Mapping) -> Policy:
    """Build the policy named by `spec` (`NAME` or `NAME:ARG`) from `table`; options are
    keyword settings.

    Options a policy does not use are ignored with `None` values dropped first, so a CLI can
    pass all its flags through unchanged.
    """
    name, _, arg = spec.partition(":")
    if name not in table:
        raise UnknownPolicyError(
            f"unknown policy {name!r}; choose one of: {', '.join(policy_names(table))}"
        )
    module, _, attr = table[name].partition(":")
    factory: PolicyFactory = getattr(importlib.import_module(module), attr)
    return factory(arg or None, **{k: v for k, v in options.items() if v is not None})
