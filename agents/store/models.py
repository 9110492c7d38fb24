"""What the store holds: episodes and their steps, as plain typed records."""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

# What `new_episode_id` makes (UTC time + 8 hex digits): the only names an episode folder has.
EPISODE_ID = re.compile(r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{8}$")
# A tool catalogue's version (`store.tools_version`: 16 hex digits of its hash) names a file
# under tool_specs/: an imported one is held to a plain name, so `../..` names nothing.
TOOLS_VERSION = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-]{0,63}$")

Source = Literal["human", "agent", "oracle", "rollout"]
SOURCES: tuple[str, ...] = ("human", "agent", "oracle", "rollout")
Status = Literal["running", "finished", "interrupted"]


@dataclass(frozen=True)
class Step:
    """One tool call of an episode, with what came back and what the model said before it."""

    episode_id: str
    index: int
    turn: int  # steps of one assistant reply share a turn (one message with several tool_calls)
    at: float  # unix time the step was recorded
    tool: str
    args: dict[str, Any]
    result: Any  # the tool's JSON output, or None
    result_text: str | None  # what the model was shown
    error_kind: str | None
    error_message: str | None
    duration_ms: float
    frame: str | None  # path of the PNG relative to the episode folder
    frame_sha256: str | None
    scene_hash: str | None
    model_message: str | None
    tokens_in: int
    tokens_out: int
    latency_ms: float
    token_ids: list[int] | None
    logprobs: list[float] | None
    actor: str = "agent"  # who made the call: "human" (the studio's person) or "agent"

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Step:
        return cls(
            episode_id=row["episode_id"],
            index=row["idx"],
            turn=row["turn"],
            at=row["at"],
            tool=row["tool"],
            args=json.loads(row["args"]),
            result=_load(row["result"]),
            result_text=row["result_text"],
            error_kind=row["error_kind"],
            error_message=row["error_message"],
            duration_ms=row["duration_ms"],
            frame=row["frame"],
            frame_sha256=row["frame_sha256"],
            scene_hash=row["scene_hash"],
            model_message=row["model_message"],
            tokens_in=row["tokens_in"],
            tokens_out=row["tokens_out"],
            latency_ms=row["latency_ms"],
            token_ids=_load(row["token_ids"]),
            logprobs=_load(row["logprobs"]),
            actor=row["actor"] if "actor" in row.keys() else "agent",
        )


@dataclass(frozen=True)
class Episode:
    """One run of the loop (a person, the agent, the oracle or an RL rollout) and its outcome."""

    id: str
    created_at: float
    finished_at: float | None
    status: Status
    task_id: str | None
    task_family: str | None
    task_level: int | None
    task_seed: int | None
    task_params: dict[str, Any] | None
    source: str
    policy: str | None
    model: str | None
    adapter: str | None
    tools_version: str | None  # content hash of the tool specs the episode ran with
    system: str | None
    prompt: str | None
    initial_frame: str | None
    initial_frame_sha256: str | None
    setup: list[dict[str, Any]]  # calls that built the start state: [{"tool", "args"}]
    initial_scene_hash: str | None
    final_message: str | None
    reward: float | None
    components: dict[str, float] | None
    success: bool | None
    n_steps: int
    n_errors: int
    tool_ms: float
    latency_ms: float
    tokens_in: int
    tokens_out: int
    versions: dict[str, str]
    tags: list[str]
    notes: str
    artifacts: list[str]
    writer: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_s(self) -> float | None:
        return None if self.finished_at is None else self.finished_at - self.created_at

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Episode:
        success = row["success"]
        return cls(
            id=row["id"],
            created_at=row["created_at"],
            finished_at=row["finished_at"],
            status=row["status"],
            task_id=row["task_id"],
            task_family=row["task_family"],
            task_level=row["task_level"],
            task_seed=row["task_seed"],
            task_params=_load(row["task_params"]),
            source=row["source"],
            policy=row["policy"],
            model=row["model"],
            adapter=row["adapter"],
            tools_version=row["tools_version"],
            system=row["system"],
            prompt=row["prompt"],
            initial_frame=row["initial_frame"],
            initial_frame_sha256=row["initial_frame_sha256"],
            setup=json.loads(row["setup"]),
            initial_scene_hash=row["initial_scene_hash"],
            final_message=row["final_message"],
            reward=row["reward"],
            components=_load(row["components"]),
            success=None if success is None else bool(success),
            n_steps=row["n_steps"],
            n_errors=row["n_errors"],
            tool_ms=row["tool_ms"],
            latency_ms=row["latency_ms"],
            tokens_in=row["tokens_in"],
            tokens_out=row["tokens_out"],
            versions=json.loads(row["versions"]),
            tags=json.loads(row["tags"]),
            notes=row["notes"],
            artifacts=json.loads(row["artifacts"]),
            writer=json.loads(row["writer"]),
        )


@dataclass(frozen=True)
class EpisodeFilter:
    """Which episodes a list/export/delete applies to; None means "any"."""

    source: str | None = None
    task_family: str | None = None
    success: bool | None = None
    status: str | None = None
    model: str | None = None
    policy: str | None = None
    tag: str | None = None
    ids: tuple[str, ...] | None = None
    limit: int | None = None
    # True: only episodes with a task or a goal (a prompt); False: only those with neither
    aimed: bool | None = None

    def where(self) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("source", self.source),
            ("task_family", self.task_family),
            ("status", self.status),
            ("model", self.model),
            ("policy", self.policy),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if self.success is not None:
            clauses.append("success = ?")
            params.append(int(self.success))
        if self.tag is not None:
            clauses.append("EXISTS (SELECT 1 FROM json_each(episodes.tags) WHERE value = ?)")
            params.append(self.tag)
        if self.ids is not None:
            clauses.append(f"id IN ({','.join('?' * len(self.ids))})" if self.ids else "0")
            params.extend(self.ids)
        if self.aimed is not None:
            aimed = "(task_id IS NOT NULL OR TRIM(COALESCE(prompt, '')) != '')"
            clauses.append(aimed if self.aimed else f"NOT {aimed}")
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)
