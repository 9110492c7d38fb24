"""The Local agent's variants on the same episodes, in one run: standard against fast.

    .venv/bin/python benchmarks/bench_variants.py [--per-family 5] [--families a,b,...]
        [--workers 1] [--variants standard,fast] [--observe auto]

The shipped adapter on the packaged base (the studio's Local agent, `modelwright eval --policy
hf` with no model named), once per variant: `standard` (the weights as trained, the adapter
unmerged, float32, turns from their KV cache), `fast` (`--variant fast`: the agent's merged
q8_0 GGUF in llama.cpp where llama-cpp-python is installed, agents/policies/llamacpp_policy.py,
its greedy turns guessing ahead from its earlier replies; else the in-process int8 variant),
`fast-plain` (that llama.cpp variant a token at a time, `MODELWRIGHT_LOOKUP_DECODING=off`),
`fast-lookup` (guessing from the prompt, `=prompt`), `fast-int8` (that int8 variant: the adapter merged, int8
linear layers, agents/policies/hf_policy.py `fast_variant`) and `fast-QUANT` (the llama.cpp
variant in another number format: `fast-bf16`, `fast-f16`, `fast-f32`). The same level-1
test-split episodes of the adapter's families run on each, through the product's eval harness
as `modelwright eval` runs them. Printed per variant: episodes per minute, new tokens per
second of generation (tokens out / the turns' generation time), prompt tokens the model ran,
success and mean reward, and the ratios to the first variant; then the episodes whose reward
differs between variants. Load average at the start and end (the machine is shared: compare
ratios, measured in the same run).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

FAMILIES = "primitive_placement,materials,scene_editing,requests"
# the fast variant's other ways of guessing ahead (`fast` itself: from its earlier replies)
GUESSING = {"fast-plain": "off", "fast-lookup": "prompt"}


def run_variant(variant: str, specs: list, workers: int, max_tokens: int, observe: str = "auto") -> dict:
    from agents import LoopConfig
    from agents.models.cpu import prepare_openmp
    from agents.policies.local import make_local
    from training.cli.eval import shared_model_policies
    from training.eval.harness import evaluate
    from training.eval.spec import start_templates_soon

    prepare_openmp()
    start_templates_soon()  # as `modelwright eval` does: they boot while the model loads
    if variant == "fast-int8":  # the in-process int8 variant even where llama.cpp is installed
        from agents.policies.hf_policy import HFPolicy, HFPolicyConfig, default_local_config

        built = HFPolicy(default_local_config(HFPolicyConfig(max_tokens=max_tokens,
                                                             variant="fast")))  # fmt: skip
    elif variant in GUESSING:  # llama.cpp, greedy turns guessing ahead another way
        os.environ["MODELWRIGHT_LOOKUP_DECODING"] = GUESSING[variant]
        try:
            built = make_local(None, max_tokens=max_tokens, variant="fast")
        finally:
            del os.environ["MODELWRIGHT_LOOKUP_DECODING"]
    elif variant.startswith("fast-"):  # llama.cpp in another number format: fast-f16, fast-bf16
        built = make_local(None, max_tokens=max_tokens, variant="fast", quant=variant[5:])
    else:
        built = make_local(None, max_tokens=max_tokens, variant=variant)
    engine = "llama.cpp" if getattr(built, "llama", None) is not None else "transformers"
    llama = getattr(built, "llama", None)
    factory, shared = shared_model_policies(built, specs, workers, None)
    progress = None
    if shared["batcher"] is not None:
        def progress(record, _done, _total, b=shared["batcher"]):
            b.finish(record.get("task", ""))
    first: list[float] = []

    def timed(record, done, total):
        if not first:
            first.append(time.perf_counter() - start)
        if progress is not None:
            progress(record, done, total)

    start = time.perf_counter()
    report = evaluate(specs, factory, workers=workers, config=LoopConfig(observe=observe),
                      progress=timed)
    wall = time.perf_counter() - start
    counts = dict(llama.counts) if llama is not None else None
    if llama is not None:
        llama.close()  # the next row opens its own (its own way of guessing, an empty memory)
    eps = report["episodes"]
    gen_s = sum(e["latency_ms"] for e in eps) / 1e3
    out_tokens = sum(e["tokens_out"] for e in eps)
    cpu = shared.get("cpu") or {}
    return {
        "variant": variant,
        "engine": engine,
        "episodes": len(eps),
        "wall_s": round(wall, 1),
        "episodes_per_min": round(len(eps) / wall * 60, 2),
        # the first episode's end: the pools' start, and the model's first full prompt
        "first_episode_s": round(first[0], 2) if first else None,
        "new_tokens_per_s": round(out_tokens / gen_s, 1) if gen_s else None,
        # the model's turns against the rest (worker start, tools, scoring) per episode
        "model_s_per_episode": round(gen_s / len(eps), 2),
        "other_s_per_episode": round(max(wall - gen_s, 0.0) / len(eps), 2),
        "success": round(sum(bool(e["success"]) for e in eps) / len(eps), 3),
        "mean_reward": round(sum(e["reward"] for e in eps) / len(eps), 4),
        "threads": cpu.get("cpu_threads", cpu.get("threads")),
        "rewards": {e["task"]: e["reward"] for e in eps},
        # llama.cpp's counts: prompt tokens run, model runs, guessed and kept tokens
        "llama": {k: counts[k] for k in ("turns", "prompt_tokens", "prompt_encoded",
                                               "new_tokens", "prefill_s", "decode_s", "steps",
                                               "drafted", "accepted")} if counts else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-family", type=int, default=5)
    ap.add_argument("--families", default=FAMILIES)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--variants", default="standard,fast")
    ap.add_argument("--max-tokens", type=int, default=96, help="new tokens per turn")
    ap.add_argument("--observe", default="auto", help="when the loop renders, as `modelwright eval "
                    "--observe` (auto: not for a text model); `changed` renders after each change")
    args = ap.parse_args()
    from training.eval.harness import task_spec
    from training.eval.run_eval import task_ids

    ids = task_ids(args.families.split(","), [1], "test", args.per_family)
    specs = [task_spec(i) for i in ids]
    load0 = os.getloadavg()[0]
    rows = [run_variant(v, specs, args.workers, args.max_tokens, args.observe)
            for v in args.variants.split(",")]
    base = rows[0]
    print(f"\n{len(specs)} level-1 test episodes ({args.families}), {args.workers} worker(s), observe {args.observe}; "
          f"load {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    print("| variant | engine | episodes/min | new tokens/s | model s/ep | other s/ep | success "
          "| mean reward | threads | first episode | wall |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        speed = r["episodes_per_min"] / base["episodes_per_min"]
        print(f"| {r['variant']} | {r['engine']} | {r['episodes_per_min']} (x{speed:.2f}) | {r['new_tokens_per_s']} "
              f"| {r['model_s_per_episode']} | {r['other_s_per_episode']} "
              f"| {r['success']:.1%} | {r['mean_reward']} | {r['threads']} | {r['first_episode_s']} s "
              f"| {r['wall_s']} s |")
    for r in rows[1:]:
        differ = [t for t in base["rewards"] if base["rewards"][t] != r["rewards"].get(t)]
        print(f"{r['variant']}: {len(differ)} of {len(specs)} episodes' rewards differ from "
              f"{base['variant']}'s: {differ}")
    print(json.dumps({"args": vars(args), "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
