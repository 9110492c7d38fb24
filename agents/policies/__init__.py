"""Policy factory: turn a spec such as `none`, `script:run.jsonl`, `openai` into a Policy.

Other layers (CLI, studio, training) build policies only through `make_policy`, so a new
policy is one `register_policy` call away. agents/ knows no task, so the task-aware
policies (`oracle`, `reference`) are registered by `training.eval.oracle` when the layer above
imports it (`training.eval.harness` and the CLI do). Built-in policies are imported lazily:
`openai` pulls in the openai client, `hf` torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from agents.policies.protocol import Policy

PolicyFactory = Callable[..., Policy]

_FACTORIES: dict[str, PolicyFactory] = {}
# name -> "module:attribute" of a factory `f(arg: str | None, **options) -> Policy`
_BUILTIN: dict[str, str] = {
    "none": "agents.policies.simple:make_none",
    "script": "agents.policies.simple:make_script",
    "openai": "agents.policies.openai_policy:make_openai",
    "hf": "agents.policies.hf_policy:make_hf",
}
# registered from above (agents/ never imports training/): where to find them
_REGISTERED_ELSEWHERE = {"oracle": "training.eval.oracle", "reference": "training.eval.oracle"}


class UnknownPolicyError(ValueError):
    pass


def register_policy(name: str, factory: PolicyFactory) -> None:
    """Make `make_policy(name[:ARG], **options)` call `factory(ARG or None, **options)`."""
    _FACTORIES[name] = factory


def policy_names() -> list[str]:
    return sorted(set(_FACTORIES) | set(_BUILTIN))


def make_policy(spec: str, **options) -> Policy:
    """Build the policy named by `spec` (`NAME` or `NAME:ARG`); options are keyword settings.

    Options a policy does not use are ignored with `None` values dropped first, so a CLI can
    pass all its flags through unchanged.
    """
    name, _, arg = spec.partition(":")
    factory = _factory(name)
    options = {k: v for k, v in options.items() if v is not None}
    return factory(arg or None, **options)


def _factory(name: str) -> PolicyFactory:
    if name in _FACTORIES:
        return _FACTORIES[name]
    if name in _BUILTIN:
        module, _, attr = _BUILTIN[name].partition(":")
        factory = getattr(importlib.import_module(module), attr)
        _FACTORIES[name] = factory
        return factory
    if name in _REGISTERED_ELSEWHERE:
        raise UnknownPolicyError(
            f"policy {name!r} is registered by {_REGISTERED_ELSEWHERE[name]}: import it first"
        )
    raise UnknownPolicyError(f"unknown policy {name!r}; choose one of: {', '.join(policy_names())}")
