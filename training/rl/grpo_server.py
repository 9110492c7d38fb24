"""GRPO's server mode (`grpo.generation: server`): rollouts against `modelwright serve` (vLLM).

The rollout policy is the `openai` policy with `token_ids=True`: the server returns each
turn's prompt and completion token ids and the sampled tokens' log-probs (vLLM's
`return_token_ids` + `logprobs`), so training rows are built from the ids the server
generated, as in the in-process mode; the pixels of each turn's renders are rebuilt on the
trainer's side from the same messages (`ServerVision`). After every optimiser step the
trainer saves the adapter and hot-loads it into the server (`serve load-adapter`'s call:
NAME-v1, NAME-v2, ..., the previous version unloaded); the next step's rollouts ask for that
version. Staleness (the steps between the adapter trained and the one that generated) is
logged; a sync that keeps failing past `grpo.max_staleness` stops the run with the reason
rather than letting it train on ever older rollouts.

`plan(config)` is what `train grpo --dry-run` prints: the rows and groups a step holds, the
generation backend, and the server it would talk to, without loading a model.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class StaleRollouts(RuntimeError):
    """The server's adapter is older than `grpo.max_staleness` steps allows."""


class ServerVision:
    """The pixels of a server-generated turn, for the trainer's forward pass.

    The server returns token ids, not the image tensors it computed, so the trainer renders the
    turn's messages (the same PNGs the server was sent) through the trained model's own
    processor. The tensors are kept only when they fill exactly the image tokens in the
    server's prompt ids; otherwise the turn gets none (`VisionRows` then counts a miss and
    leaves that batch's forward without pixels) and `mismatches` counts it."""

    def __init__(self, processor: Any, image_token_id: int | None) -> None:
        import threading

        self.processor = processor
        self.image_token_id = image_token_id
        self.mismatches = 0
        self.matched = 0
        self._lock = threading.Lock()  # a step's rollouts call it from several threads

    def __call__(self, messages: list[dict], tools: list[dict], prompt_ids: list[int]):
        from agents.policies.hf_policy import VISION_KEYS, encode_prompt

        token = self.image_token_id
        if token is None or token not in prompt_ids:
            return None
        inputs = encode_prompt(self.processor, messages, tools)
        fits = inputs["input_ids"][0].tolist().count(token) == prompt_ids.count(token)
        with self._lock:
            if fits:
                self.matched += 1
            else:
                self.mismatches += 1
        if not fits:
            return None
        return {k: inputs[k].detach().cpu() for k in VISION_KEYS if k in inputs} or None


def rebuild_vision(groups: list[list[Any]], vision: ServerVision | None) -> int:
    """The pixels of turns that came back with their prompt instead (`TurnTokens.prompt`: a
    Ray node's server turns; the node has no processor of the trained model), built here by
    `vision` as on one machine. The prompts are dropped after. Returns the turns built."""
    built = 0
    for group in groups:
        for rollout in group:
            for tok in rollout.turns:
                if tok.prompt is not None and tok.vision is None and vision is not None:
                    tok.vision = vision(*tok.prompt, tok.prompt_ids)
                    built += tok.vision is not None
                tok.prompt = None
    return built


class ServerSync:
    """The served adapter version, its sync after each step, and the rollout policies."""

    def __init__(self, spec: Any, out_dir: Path, vision: ServerVision | None = None) -> None:
        self.spec = spec
        self.out_dir = out_dir
        self.vision = vision
        self.served: str | None = None  # None: the base model, before the first sync
        self.served_step = 0
        self.failures: list[str] = []

    def staleness(self, step: int) -> int:
        return step - self.served_step

    def check(self, step: int) -> int:
        gap = self.staleness(step)
        if gap > self.spec.max_staleness:
            why = self.failures[-1] if self.failures else "no sync yet"
            raise StaleRollouts(
                f"the server at {self.spec.server_url} still serves the adapter of step "
                f"{self.served_step} at step {step} (grpo.max_staleness {self.spec.max_staleness}):"
                f" {why}"
            )
        return gap

    def policy(self, seed: int, max_tokens: int, temperature: float, tools: Any) -> Any:
        from agents.policies.openai_policy import OpenAIPolicy, OpenAIPolicyConfig

        return OpenAIPolicy(OpenAIPolicyConfig(
            base_url=self.spec.server_url, model=self.served, temperature=temperature,
            max_tokens=max_tokens, seed=seed, token_ids=True, tools=tools,
        ), vision_for=self.vision)  # fmt: skip

    def sync(self, model: Any, step: int) -> None:
        """Save the adapter of `step` and hot-load it; a failure is logged and counted."""
        from agents.serving.adapters import load_adapter

        folder = self.out_dir / "sync" / f"step-{step}"
        try:
            model.save_pretrained(str(folder))
            loaded = load_adapter(self.spec.server_url, self.spec.server_adapter_name, folder,
                                  unload_previous=True)  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - the run decides by staleness, not here
            self.failures.append(f"{type(exc).__name__}: {exc}")
            log.warning("adapter sync of step %d to %s failed: %s", step, self.spec.server_url,
                        exc)  # fmt: skip
            return
        self.served, self.served_step = loaded.served_name, step

    def callback(self):
        from transformers import TrainerCallback

        sync = self

        class AdapterSync(TrainerCallback):
            def on_step_end(self, args, state, control, model=None, **kwargs):
                if model is not None:
                    sync.sync(model, state.global_step)

        return AdapterSync()


def plan(config: Any) -> dict:
    """What a GRPO step of `config` holds and where its rollouts come from (no model loaded)."""
    spec = config.grpo
    rows = spec.per_device_train_batch_size * spec.gradient_accumulation_steps
    groups = rows // (spec.num_generations * spec.max_turns)
    out = {
        "generation": spec.generation,
        "rows_per_step": rows,
        "groups_per_step": groups,
        "groups_run_per_step": groups * spec.oversample,
        "rollouts_per_step": groups * spec.oversample * spec.num_generations,
        "turns_per_rollout": spec.max_turns,
        "rollout_workers": spec.rollout_workers,
        "rollout_store": spec.rollout_store,
        "tools": config.tools,
    }
    if spec.generation == "server":
        out.update({"server_url": spec.server_url, "adapter": f"{spec.server_adapter_name}-vN",
                    "sync": "after every optimiser step", "max_staleness": spec.max_staleness})
    return out
