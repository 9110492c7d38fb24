"""Modelwright agents layer: policies, the episode loop, scheduling and the trajectory store.

Public face (see docs/CONTRACTS.md), for the layers above: `from agents import EpisodeLoop,
...`. The trajectory store has its own face, `agents.store`. The names load on first use
(PEP 562), so `import agents` stays light (no transformers, no torch, no tool runtime).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tools.lazy_face import lazy_face

if TYPE_CHECKING:
    from agents.loop.config import DEFAULT_SYSTEM, LoopConfig
    from agents.loop.episode import CallOutcome, EpisodeResult, StepRecord, Verdict
    from agents.loop.episode_loop import EpisodeLoop, run_episode
    from agents.loop.scheduler import JobOutcome, Scheduler
    from agents.loop.start_state import InfrastructureError, StartState
    from agents.loop.turns import HumanTurns
    from agents.models.source import ModelNotFound, local_model_folder, resolve_model
    from agents.policies import UnknownPolicyError, make_policy, policy_names
    from agents.policies.protocol import Policy, PolicyError, PolicyReply, ToolCall

_LAZY = {
    "CallOutcome": "agents.loop.episode", "EpisodeResult": "agents.loop.episode",
    "StepRecord": "agents.loop.episode", "Verdict": "agents.loop.episode",
    "DEFAULT_SYSTEM": "agents.loop.config", "EpisodeLoop": "agents.loop.episode_loop",
    "LoopConfig": "agents.loop.config",
    "run_episode": "agents.loop.episode_loop",
    "ModelNotFound": "agents.models.source", "local_model_folder": "agents.models.source",
    "resolve_model": "agents.models.source",
    "UnknownPolicyError": "agents.policies", "make_policy": "agents.policies",
    "policy_names": "agents.policies",
    "Policy": "agents.policies.protocol", "PolicyError": "agents.policies.protocol", "PolicyReply": "agents.policies.protocol",
    "ToolCall": "agents.policies.protocol",
    "JobOutcome": "agents.loop.scheduler", "Scheduler": "agents.loop.scheduler",
    "InfrastructureError": "agents.loop.start_state", "StartState": "agents.loop.start_state",
    "HumanTurns": "agents.loop.turns",
}

__all__ = [
    "CallOutcome", "DEFAULT_SYSTEM", "EpisodeLoop", "EpisodeResult", "HumanTurns",
    "InfrastructureError", "JobOutcome", "LoopConfig", "ModelNotFound", "Policy", "PolicyError",
    "PolicyReply", "Scheduler", "StartState", "StepRecord", "ToolCall", "UnknownPolicyError",
    "Verdict", "local_model_folder", "make_policy", "policy_names",
    "resolve_model", "run_episode"
]


__getattr__, __dir__ = lazy_face(globals(), _LAZY)
