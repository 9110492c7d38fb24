"""GRPO rollouts are episodes of THE loop (`agents/loop/episode_loop.py`), run on the eval scheduler's pool.

`run_groups` runs `group_size` episodes per task, each one an `EpisodeLoop` episode with a
policy that generates from the model being trained, exactly as `run`/`eval` run them
(`training.eval.harness.run_spec`: the same start state, observations, repeat/stuck handling,
`max_calls_per_step` refusals and context compaction), concurrently on the scheduler's
workers: a fresh tool worker per episode, whose start state is built there from the task's
own setup, so no rollout starts from, or is scored on, a state another rollout's code
touched (the tool calls of different rollouts overlap). Each one is recorded in the store
as an episode (source `rollout`, tags `run:`, `step:`, `version:`).
Rewards are the task checker's verdict, the same call `eval` makes.

Each model turn carries the `TurnTokens` the policy generated (prompt ids, completion ids,
sampling log-probs, image tensors). `training_rows` turns them into the rows TRL's
`rollout_func` returns, one row per turn: prompt = the turn's prompt ids as generated,
completion = its completion ids as generated, nothing re-tokenised. Environment tokens (tool
results, observations, renders, warnings, folded context) are in the prompt of the next turn,
so they never carry loss; `env_mask` is 1 on every generated token and 0 on padding rows.
"""

from __future__ import annotations

import hashlib
import logging
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class Rollout:
    """One rollout episode: its task, seed, the loop's result and every turn's tokens."""

    task_id: str
    seed: int
    result: Any  # agents.loop.episode.EpisodeResult
    record: dict = field(default_factory=dict)  # run_spec's summary
    version: str | None = None  # the weights or adapter that generated it (meta "adapter")
    node: str = "local"  # where it ran (a Ray node's id on the ray backend)
    retried: bool = False  # sent again from its start state after its node died

    @property
    def turns(self) -> list[Any]:
        return [s.tokens for s in self.result.steps if s.tokens is not None]

    @property
    def reward(self) -> float:
        return float(self.record.get("reward", 0.0))

    @property
    def success(self) -> bool:
        return bool(self.record.get("success", False))


def rollout_seed(run_seed: int, slot: int, index: int) -> int:
    """The sampling seed of rollout `index` of the group at curriculum `slot` (reproducible)."""
    digest = hashlib.sha256(f"{run_seed}:{slot}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def run_groups(
    scheduler: Any,
    slots: list[tuple[int, str]],
    group_size: int,
    policy_for: Any,
    loop_config: Any,
    *,
    run_seed: int = 0,
    store: Any = None,
    meta: dict | None = None,
    batch_first_turn: bool = False,
    greedy_member: bool = False,
    backend: Any = None,
    policy_spec_for: Any = None,
) -> list[list[Rollout]]:
    """Run `group_size` episodes for each (slot, task id); returns the groups in order.

    `policy_for(seed)` makes a fresh policy for one episode. Episodes run as scheduler jobs,
    each on its own fresh worker; an infrastructure failure is retried on a fresh worker by the
    scheduler; an episode that still cannot run raises (a step must not train on holes).
    With `batch_first_turn`, a policy that can (`share_first_turn`: the in-process `hf`
    policy) takes its first turn from one batched generation per group
    (`agents.policies.hf_policy.GroupSampler`): a group's rollouts start from one prompt.
    With `greedy_member`, rollout 0 of each group decodes greedily (`policy_for(seed,
    greedy=True)`), as eval does, and the others sample (their batch one row smaller).

    `backend`: an episode backend that builds policies where the episodes run (the `ray`
    one, `training.eval.backend.make_backend`); `policy_spec_for(seed, greedy=False)` then
    names each rollout's policy as data (a `PolicySpec`: an endpoint, the oracle), the
    in-process model never leaves this machine, and the backend's own store records them."""
    from training.eval.backend import LocalBackend
    from training.eval.requests import EpisodeRequest, PolicySpec

    greedy = int(greedy_member)
    # The greedy member's episode says so in the store (the Episodes dock filters by tag).
    greedy_meta = {**(meta or {}), "tags": [*(meta or {}).get("tags", []), "greedy"]}

    remote = backend is not None
    if remote and policy_spec_for is None:
        raise ValueError(f"the {backend.name} backend runs a policy spec on its nodes (an "
                         "endpoint, the oracle), not the in-process model")
    batch_first_turn = batch_first_turn and not remote  # the group sampler is in-process
    if batch_first_turn:
        from agents.policies.hf_policy import GroupSampler
    requests, members = [], {}
    for slot, task_id in slots:
        group = (GroupSampler(group_size - greedy, rollout_seed(run_seed, slot, group_size))
                 if batch_first_turn and group_size - greedy > 1 else None)  # fmt: skip
        for i in range(group_size):
            key = f"{slot}/{i}"
            members[key] = (group, i)
            seed = rollout_seed(run_seed, slot, i)
            policy = (policy_spec_for(seed, greedy=True) if i < greedy else policy_spec_for(seed)
                      ) if remote else PolicySpec("in-process")  # fmt: skip
            requests.append(EpisodeRequest(
                task_id, seed, policy,
                loop=loop_config, meta=greedy_meta if i < greedy else (meta or {}),
                source="rollout", key=key,
            ))  # fmt: skip

    def policy_of(request: EpisodeRequest, _job_seed: int) -> Any:
        group, index = members[request.key]
        policy = policy_for(request.seed, greedy=True) if index < greedy else policy_for(request.seed)
        if group is not None and index >= greedy and hasattr(policy, "share_first_turn"):
            policy.share_first_turn(group, index - greedy)
        return policy

    if remote:
        outcomes = list(backend.submit(requests))
    else:  # the trainer's in-process policy runs here: the local backend over the runtime's pool
        # Ctrl-C stops the rollouts under way at their next check: a multi-turn rollout of the
        # in-process model can take minutes, and the step's rollouts are of no use once stopped
        local = LocalBackend(scheduler=scheduler, store=store, policy_for=policy_of,
                             stop_episodes=True)  # fmt: skip
        outcomes = list(local.submit(requests))
    failed = [o for o in outcomes if not o.ok]
    if failed:
        raise RuntimeError(f"rollout {failed[0].request.key} could not run: {failed[0].error}")
    flat = [Rollout(o.request.task_id, o.request.seed, o.result, o.record,
                    o.request.meta.get("adapter"), o.node, o.retried) for o in outcomes]
    return [flat[g * group_size : (g + 1) * group_size] for g in range(len(slots))]


def spread(group: list[Rollout]) -> bool:
    """Whether a group's rewards differ (a group of equal rewards gives no gradient)."""
    return len({round(r.reward, 9) for r in group}) > 1


def keep_groups(groups: list[list[Rollout]], needed: int) -> tuple[list[list[Rollout]], float]:
    """Dynamic sampling: the first `needed` groups with reward spread, topped up in order with
    zero-spread ones when too few have spread; and the share of zero-spread groups run."""
    varied = [g for g in groups if spread(g)]
    flat = [g for g in groups if not spread(g)]
    zero_share = len(flat) / len(groups) if groups else 0.0
    kept = (varied + flat)[:needed]
    return sorted(kept, key=groups.index), zero_share


def training_rows(groups: list[list[Rollout]], turns: int, pad_id: int, eos_id: int) -> dict:
    """TRL `rollout_func` output: one row per (group, turn slot, rollout), in TRL's group order.

    TRL normalises rewards over each block of `group_size` consecutive rows, so block
    (group g, turn t) holds turn t of each of g's rollouts; a rollout that ended before turn t
    gives a padding row (no loss: env_mask 0) that still carries its episode reward, so every
    block's baseline is the group's mean episode reward, as in GRPO."""
    out: dict[str, list] = {k: [] for k in ("prompt_ids", "completion_ids", "logprobs",
                                            "env_mask", "episode_reward", "turn_ref")}  # fmt: skip
    longest = max((len(r.turns) for g in groups for r in g), default=0)
    if longest > turns:  # a loop allowed more turns than the rows hold: never drop turns
        raise ValueError(f"a rollout took {longest} model turns; the rows hold {turns}")
    for g, group in enumerate(groups):
        for t in range(turns):
            for j, rollout in enumerate(group):
                own = rollout.turns
                out["episode_reward"].append(rollout.reward)
                if t < len(own):
                    tok = own[t]
                    out["prompt_ids"].append(list(tok.prompt_ids))
                    out["completion_ids"].append(list(tok.completion_ids))
                    logps = tok.logprobs or [0.0] * len(tok.completion_ids)
                    out["logprobs"].append(list(logps))
                    out["env_mask"].append([1] * len(tok.completion_ids))
                    out["turn_ref"].append((g, j, t))
                else:
                    out["prompt_ids"].append([pad_id])
                    out["completion_ids"].append([eos_id])
                    out["logprobs"].append([0.0])
                    out["env_mask"].append([0])
                    out["turn_ref"].append(None)
    return out


class LeftPaddingTrim:
    """Drops, before each training forward, the columns every row of the micro-batch leaves
    out (`attention_mask` 0 in all rows at the left: the padding of prompts shorter than the
    generation batch's longest).

    TRL pads a whole generation batch to its longest prompt before splitting it into micro-
    batches, so each micro-batch paid for the longest prompt of all 32 rows; a micro-batch of
    `training_rows`' padding rows (2 tokens each: the turn slots of rollouts that had ended;
    with one-turn rollouts 28 of a step's 32 rows) cost as much as one of the longest real
    turns. After the trim it costs its own rows' tokens. The scored positions are the last
    ones, so the loss sees the same tokens; rotary position embeddings depend on relative
    positions only, so the log-probs are the same up to float rounding (a test). A forward
    pre-hook on the model (no trainer member touched), registered after `VisionRows`'."""

    def __init__(self) -> None:
        self.columns_in = 0
        self.columns_kept = 0

    def attach(self, module: Any) -> Any:
        return module.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, _module: Any, args: tuple, kwargs: dict):
        import torch

        ids, mask = kwargs.get("input_ids"), kwargs.get("attention_mask")
        if args or ids is None or mask is None or ids.dim() != 2 or not torch.is_grad_enabled():
            return None
        if kwargs.get("pixel_values") is not None or kwargs.get("past_key_values") is not None:
            return None
        used = mask.sum(dim=0) > 0
        labels = kwargs.get("labels")
        if labels is not None:  # never past the first scored position
            used = used | (labels != -100).any(dim=0)
        if not bool(used.any()):
            return None
        first = int(used.nonzero()[0])
        self.columns_in += int(ids.shape[1]) * int(ids.shape[0])
        self.columns_kept += (int(ids.shape[1]) - first) * int(ids.shape[0])
        if first == 0:
            return None
        for key, value in list(kwargs.items()):
            if isinstance(value, torch.Tensor) and value.dim() == 2 and value.shape == ids.shape:
                kwargs[key] = value[:, first:]
        return args, kwargs


class VisionRows:
    """Gives a trainer's forward pass the image tensors each row's prompt was generated with.

    TRL's `rollout_func` path feeds the model token ids only (its images come from dataset
    columns), so the placeholder tokens of the renders would be scored without pixels. This
    forward pre-hook (a torch hook, no TRL internals) looks each row up by its exact ids and
    adds the pixel values and grids of the turns in the batch, in row order, when every row
    with image tokens is known; otherwise it leaves the call alone and counts a miss."""

    def __init__(self, image_token_id: int | None) -> None:
        self.image_token_id = image_token_id
        self.rows: dict[tuple[int, ...], dict] = {}
        self.misses = 0
        self.attached = 0
        self.trained: list[tuple[int, ...]] = []  # rows of gradient-carrying forwards (audit)

    def add(self, prompt_ids: list[int], completion_ids: list[int], vision: dict | None) -> None:
        if vision:
            self.rows[tuple(prompt_ids) + tuple(completion_ids)] = vision

    def clear(self) -> None:
        self.rows = {}

    def attach(self, module: Any) -> Any:
        return module.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, _module: Any, args: tuple, kwargs: dict):
        import torch

        ids, mask = kwargs.get("input_ids"), kwargs.get("attention_mask")
        if args or ids is None:
            return None
        if torch.is_grad_enabled():
            for b in range(ids.shape[0]):
                row = ids[b] if mask is None else ids[b][mask[b].bool()]
                self.trained.append(tuple(row.tolist()))
        if self.image_token_id is None or kwargs.get("pixel_values") is not None:
            return None
        has_images = (ids == self.image_token_id).any(dim=1)
        if not bool(has_images.any()):
            return None
        found = []
        for b in range(ids.shape[0]):
            if not bool(has_images[b]):
                continue
            row = ids[b] if mask is None else ids[b][mask[b].bool()]
            vision = self.rows.get(tuple(row.tolist()))
            if vision is None:
                self.misses += 1
                return None
            found.append(vision)
        device = ids.device
        kwargs["pixel_values"] = torch.cat([v["pixel_values"] for v in found]).to(device)
        kwargs["image_grid_thw"] = torch.cat([v["image_grid_thw"] for v in found]).to(device)
        kwargs["mm_token_type_ids"] = (ids == self.image_token_id).long()
        self.attached += 1
        return args, kwargs


def logprob_mismatch(model: Any, rows: dict, temperature: float | None, limit: int = 8) -> float:
    """Mean |training-time - sampling-time| log-prob over the generated tokens of up to `limit`
    rows: the model's forward as the trainer runs it (a `VisionRows` hook on `model` adds the
    turns' image tensors), its logits divided by the sampling temperature as TRL's loss does."""
    import torch

    diffs: list[float] = []
    real = [i for i, m in enumerate(rows["env_mask"]) if any(m)][:limit]
    device = next(model.parameters()).device
    for i in real:
        prompt, completion = rows["prompt_ids"][i], rows["completion_ids"][i]
        ids = torch.tensor([prompt + completion], device=device)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[0].float()
        step = torch.log_softmax(logits[len(prompt) - 1 : -1] / (temperature or 1.0), dim=-1)
        picked = step.gather(1, torch.tensor(completion, device=device).unsqueeze(1)).squeeze(1)
        diffs += [abs(a - b) for a, b in zip(picked.tolist(), rows["logprobs"][i], strict=True)]
    return statistics.fmean(diffs) if diffs else 0.0


@dataclass
class StepStats:
    """What one rollout batch cost and taught, for the step's log line."""

    rollout_s: float = 0.0
    generate_s: float = 0.0  # summed over rollouts (turns of concurrent rollouts overlap)
    tools_s: float = 0.0  # calls + observations, summed over rollouts
    start_s: float = 0.0  # start states, first observations, opening records; summed
    reward_s: float = 0.0  # the checker's verdicts (the verifier), summed over rollouts
    zero_spread_share: float = 0.0
    kept_zero_spread_share: float = 0.0
    logprob_mismatch: float = 0.0
    staleness: int = 0  # steps between the adapter trained and the one that generated
    episodes: int = 0
    nodes: int = 1  # where the episodes ran: 1 locally, the live Ray nodes used on a cluster
    retried: int = 0  # episodes sent again after their node died
    components: dict = field(default_factory=dict)
    success: float = 0.0
    valid_call_rate: float = 0.0

    @classmethod
    def of(cls, groups: list[list[Rollout]], kept: list[list[Rollout]], start: float) -> StepStats:
        every = [r for g in groups for r in g]
        kept_flat = [r for g in kept for r in g]
        steps = [s for r in every for s in r.result.steps]
        calls = [o for s in steps for o in s.calls if not getattr(o, "local", False)]
        names = sorted({k for r in kept_flat for k in (r.result.components or {})})
        return cls(
            rollout_s=time.perf_counter() - start,
            generate_s=sum(s.latency_ms for s in steps) / 1e3,
            tools_s=sum(sum(o.wall_ms for o in s.calls) + s.observe_ms for s in steps) / 1e3,
            start_s=sum(r.result.start_ms for r in every) / 1e3,
            reward_s=sum(r.result.check_ms for r in every) / 1e3,
            kept_zero_spread_share=(sum(not spread(g) for g in kept) / len(kept)) if kept else 0.0,
            episodes=len(every),
            nodes=len({r.node for r in every}) or 1,
            retried=sum(r.retried for r in every),
            components={k: statistics.fmean((r.result.components or {}).get(k, 0.0)
                                            for r in kept_flat) for k in names},  # fmt: skip
            success=statistics.fmean(1.0 if r.success else 0.0 for r in kept_flat),
            valid_call_rate=sum(o.ok for o in calls) / len(calls) if calls else 0.0,
        )

    def log_items(self) -> dict[str, float]:
        out = {f"task/{k}": v for k, v in self.components.items()}
        out.update({
            "task/success": self.success,
            "task/valid_call_rate": self.valid_call_rate,
            "rollout/episodes": float(self.episodes),
            "rollout/nodes": float(self.nodes),
            "rollout/retried": float(self.retried),
            "rollout/zero_spread_share": self.zero_spread_share,
            "rollout/kept_zero_spread_share": self.kept_zero_spread_share,
            "rollout/logprob_mismatch": self.logprob_mismatch,
            "rollout/staleness": float(self.staleness),
            "time/rollout_s": self.rollout_s,
            "time/generate_s": self.generate_s,
            "time/tools_s": self.tools_s,
            "time/start_s": self.start_s,
            "time/reward_s": self.reward_s,
        })  # fmt: skip
        return out
