"""`--policy hf`: the in-process local agent, in the variant asked for.

`standard` (and `fast` on a GPU or where no llama.cpp variant can be made) is the hf policy
(agents/policies/hf_policy.py); `fast` on a CPU is the agent's q8_0 GGUF in llama.cpp where
llama-cpp-python is installed (agents/policies/llamacpp_policy.py), else the hf policy's int8
variant, and one line says why. Kept apart from both so that neither imports the other's
choice."""

from __future__ import annotations

from typing import Any

from agents.policies.hf_policy import HFPolicy, HFPolicyConfig, default_local_config


def make_local(arg: str | None = None, **options: Any) -> Any:
    """`--policy hf --model PATH` or `hf:PATH`; options are HFPolicyConfig fields (as
    `hf_policy.make_hf`), `variant` choosing the engine."""
    fields = set(HFPolicyConfig.__dataclass_fields__)
    config = HFPolicyConfig(**{k: v for k, v in options.items() if k in fields})
    if arg:
        config.model = arg
    config = default_local_config(config)
    if config.variant == "fast" and config.device in ("auto", "cpu"):
        from agents.models.convert import progress
        from agents.policies.llamacpp_policy import load_fast

        fast, why = load_fast(config)
        if fast is not None:
            return fast
        progress(f"fast variant in llama.cpp: {why}; running the in-process int8 variant")
    return HFPolicy(config)
