"""Modelwright agents layer: policies, the episode loop, scheduling and the trajectory store.

Public face (see docs/CONTRACTS.md), for the layers above: `from agents import EpisodeLoop,
...`. The trajectory store has its own face, `agents.store`. The names load on first use
(PEP 562), so `import agents` stays light (no transformers, no torch, no tool runtime).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tools.lazy_face import lazy_face

if TYPE_CHECKING:
    from agents.episode import CallOutcome, EpisodeResult, StepRecord, Verdict
    from agents.loop import EpisodeLoop, run_episode
    from agents.loop_config import DEFAULT_SYSTEM, LoopConfig
    from agents.model_source import ModelNotFound, local_model_folder, resolve_model
    from agents.policies import UnknownPolicyError, make_policy, policy_names, register_policy
    from agents.policy import Policy, PolicyError, PolicyReply, ToolCall
    from agents.scheduler import JobOutcome, Scheduler
    from agents.start_state import InfrastructureError, StartState
    from agents.turns import HumanTurns

_LAZY = {
    "CallOutcome": "agents.episode", "EpisodeResult": "agents.episode",
    "StepRecord": "agents.episode", "Verdict": "agents.episode",
    "DEFAULT_SYSTEM": "agents.loop_config", "EpisodeLoop": "agents.loop",
    "LoopConfig": "agents.loop_config",
    "run_episode": "agents.loop",
    "ModelNotFound": "agents.model_source", "local_model_folder": "agents.model_source",
    "resolve_model": "agents.model_source",
    "UnknownPolicyError": "agents.policies", "make_policy": "agents.policies",
    "policy_names": "agents.policies", "register_policy": "agents.policies",
    "Policy": "agents.policy", "PolicyError": "agents.policy", "PolicyReply": "agents.policy",
    "ToolCall": "agents.policy",
    "JobOutcome": "agents.scheduler", "Scheduler": "agents.scheduler",
    "InfrastructureError": "agents.start_state", "StartState": "agents.start_state",
    "HumanTurns": "agents.turns",
}

__all__ = [
    "CallOutcome", "DEFAULT_SYSTEM", "EpisodeLoop", "EpisodeResult", "HumanTurns",
    "InfrastructureError", "JobOutcome", "LoopConfig", "ModelNotFound", "Policy", "PolicyError",
    "PolicyReply", "Scheduler", "StartState", "StepRecord", "ToolCall", "UnknownPolicyError",
    "Verdict", "local_model_folder", "make_policy", "policy_names", "register_policy",
    "resolve_model", "run_episode"
]


__getattr__, __dir__ = lazy_face(globals(), _LAZY)
