"""The exported agent (GGUF) against the standard variant: same calls? how fast? (issue #48)

The first turns of 20 level-1 test-split tasks (5 each of primitive_placement, materials,
scene_editing, requests), as the eval harness shows them, go to:

- standard, float32: the hf policy (the shipped adapter unmerged on the packaged base), as
  `modelwright eval --policy hf` runs it; its calls are the reference;
- standard, bf16: the same in bfloat16;
- gguf q8_0 in transformers: `models export` loaded back with `gguf_file=` (dequantised, float32);
- gguf q8_0 and q4_k_m in llama.cpp (llama-cpp-python), when it is importable: the prompt is
  the hf policy's own token ids, greedy to the end of turn.

For each: tool calls identical to the reference (and same tool), prompt tokens/s (one forward
over the prompt) and new tokens/s (the greedy turn's time less that forward), all on the same
thread count. llama-cpp-python is not in the product's venv: run this with a Python that has it
and sees the product's packages, e.g.

    PYTHONPATH=.venv/lib/python3.13/site-packages:. nice -n 19 /tmp/llenv/bin/python \\
        benchmarks/bench_gguf.py [--threads 1] [--turns /tmp/first_turns.json] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

FAMILIES = ["primitive_placement", "materials", "scene_editing", "requests"]
MAX_TOKENS = 96


class FirstTurn:
    name = "first-turn"

    def __init__(self, sink: dict, lock: threading.Lock) -> None:
        self.sink, self.lock, self.task_id = sink, lock, None

    def reset(self, task_info: dict | None = None) -> None:
        self.task_id = (task_info or {}).get("task_id")

    def act(self, messages, tools):
        from agents import PolicyReply

        with self.lock:
            self.sink.setdefault(self.task_id, (list(messages), list(tools)))
        return PolicyReply(text="done")


def first_turns(cache: Path | None) -> dict:
    if cache is not None and cache.is_file():
        return json.loads(cache.read_text())
    from training.eval.run_eval import run_episodes, task_ids

    ids = task_ids(FAMILIES, [1], "test", 5)
    sink: dict = {}
    run_episodes(ids, lambda: FirstTurn(sink, threading.Lock()), max_steps=1, workers=1)
    turns = {k: sink[k] for k in ids}
    if cache is not None:
        cache.write_text(json.dumps(turns))
    return turns


def calls_of(text: str, names: list[str]) -> list[dict]:
    from agents.policies.toolcall_parser import parse_tool_calls

    parsed = parse_tool_calls(text.strip(), known_tools=names, id_prefix="t0")
    return [{"name": c.name, "arguments": c.arguments} for c in parsed.calls]


def run_hf(label: str, policy, turns: dict, names: list[str]) -> dict:
    """Each first turn through `policy.act` (timed), and one forward over its prompt (timed)."""
    import torch

    from agents.policies.hf_policy import encode_prompt, shown_tools

    rows = {}
    for task_id, (messages, tools) in turns.items():
        policy.reset({"task_id": task_id})
        inputs = encode_prompt(policy.processor, messages, shown_tools(tools, names),
                               device=policy.model.device)
        with torch.no_grad():
            start = time.perf_counter()
            policy.model(**inputs)
            prefill = time.perf_counter() - start
        policy.reset({"task_id": task_id})
        start = time.perf_counter()
        reply = policy.act(messages, tools)
        total = time.perf_counter() - start
        rows[task_id] = {"prompt_ids": reply.tokens.prompt_ids,
                         "new": len(reply.tokens.completion_ids), "prefill_s": prefill,
                         "total_s": total, "text": reply.raw["completion"],
                         "calls": [{"name": c.name, "arguments": c.arguments}
                                   for c in reply.tool_calls]}
        print(f"  {label} {task_id}: {len(reply.tokens.prompt_ids)} + {rows[task_id]['new']} "
              f"tokens, {total:.1f} s", file=sys.stderr, flush=True)
    return rows


def run_llama(label: str, gguf: str, reference: dict, names: list[str], threads: int) -> dict:
    from agents.policies.llamacpp_policy import open_gguf

    llm = open_gguf(gguf, n_ctx=2048, n_threads=threads, n_threads_batch=threads, n_batch=1024)
    rows = {}
    for task_id, ref in reference.items():
        ids = ref["prompt_ids"]
        llm.reset()
        start = time.perf_counter()
        llm.eval(ids)
        prefill = time.perf_counter() - start
        out = []
        start = time.perf_counter()
        while len(out) < MAX_TOKENS:
            token = llm.sample(temp=0.0, top_k=1, top_p=1.0, repeat_penalty=1.0)
            if token == llm.token_eos():
                break
            out.append(token)
            llm.eval([token])
        decode = time.perf_counter() - start
        text = llm.detokenize(out).decode("utf-8", errors="replace")
        rows[task_id] = {"prompt_ids": ids, "new": len(out), "prefill_s": prefill,
                         "total_s": prefill + decode, "text": text,
                         "calls": calls_of(text, names)}
        print(f"  {label} {task_id}: {len(ids)} + {len(out)} tokens, {prefill + decode:.2f} s",
              file=sys.stderr, flush=True)
    return rows


def summary(rows: dict, reference: dict) -> dict:
    same = sum(json.dumps(r["calls"]) == json.dumps(reference[k]["calls"]) for k, r in rows.items())
    tools = sum([c["name"] for c in r["calls"]] == [c["name"] for c in reference[k]["calls"]]
                for k, r in rows.items())
    prompt = sum(len(r["prompt_ids"]) for r in rows.values())
    new = sum(r["new"] for r in rows.values())
    prefill = sum(r["prefill_s"] for r in rows.values())
    decode = sum(max(r["total_s"] - r["prefill_s"], 1e-9) for r in rows.values())
    return {"tasks": len(rows), "same_calls": same, "same_tools": tools,
            "prompt_tok_s": prompt / prefill, "new_tok_s": new / decode,
            "turn_s": sum(r["total_s"] for r in rows.values()) / len(rows)}


def interleave(turns: dict, names: list[str], gguf: str, threads: int) -> None:
    from agents.policies.hf_policy import make_hf

    load = os.getloadavg()
    policy = make_hf(max_tokens=MAX_TOKENS, tools=names)
    keys = list(turns)[::2]
    std, fast = {}, {}
    for k in keys:  # one task in each engine, then the next
        std.update(run_hf("standard-f32", policy, {k: turns[k]}, names))
        fast.update(run_llama("llama", gguf, {k: std[k]}, names, threads))
    print(json.dumps({"threads": threads, "load_start": load, "load_end": os.getloadavg(),
                      "standard float32 (transformers)": summary(std, std),
                      "gguf (llama.cpp)": summary(fast, std)}, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--turns", type=Path, default=None, help="cache of the first turns")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--skip-bf16", action="store_true")
    parser.add_argument("--interleave", type=Path, default=None, metavar="GGUF",
                        help="only standard float32 against llama.cpp on this GGUF, turn by turn "
                             "on every other task (both see the same load)")
    args = parser.parse_args()

    from agents.models.cpu import THREADS_ENV, prepare_openmp

    os.environ[THREADS_ENV] = str(args.threads)  # the hf policy's governor keeps this count
    prepare_openmp()  # waiting OpenMP threads sleep, as under the `modelwright` command
    import torch

    torch.set_num_threads(args.threads)
    from agents.models.export import export
    from agents.models.shipped import default_shipped
    from agents.policies.hf_policy import HFPolicy, make_hf

    load = os.getloadavg()
    names = default_shipped().tools
    turns = first_turns(args.turns)
    if args.interleave is not None:
        interleave(turns, names, str(args.interleave), args.threads)
        return
    results: dict = {"threads": args.threads, "load_start": load, "tasks": list(turns)}
    reference = run_hf("standard-f32", make_hf(max_tokens=MAX_TOKENS, tools=names), turns, names)
    results["standard float32 (transformers)"] = summary(reference, reference)
    if not args.skip_bf16:
        rows = run_hf("standard-bf16", make_hf(max_tokens=MAX_TOKENS, tools=names,
                                               dtype="bfloat16"), turns, names)
        results["standard bf16 (transformers)"] = summary(rows, reference)
    out = Path(tempfile.mkdtemp(prefix="bench-gguf-"))
    q8 = export(quant="q8_0", out=out / "q8_0")
    results["q8_0_bytes"] = q8.size_bytes
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where = {"pretrained_model_name_or_path": str(Path(q8.gguf).parent),
             "gguf_file": Path(q8.gguf).name, "local_files_only": True}
    model = AutoModelForCausalLM.from_pretrained(**where, dtype=torch.float32).eval()
    fast = HFPolicy.from_loaded(model, AutoTokenizer.from_pretrained(**where), model="q8_0",
                                max_tokens=MAX_TOKENS, tools=names)
    rows = run_hf("gguf-q8_0-transformers", fast, turns, names)
    results["gguf q8_0 (transformers, dequantised)"] = summary(rows, reference)
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        results["llama.cpp"] = "llama-cpp-python is not importable here"
    else:
        rows = run_llama("llama-q8_0", q8.gguf, reference, names, args.threads)
        results["gguf q8_0 (llama.cpp)"] = summary(rows, reference)
        q4 = export(quant="q4_k_m", out=out / "q4_k_m")
        results["q4_k_m_bytes"] = q4.size_bytes
        rows = run_llama("llama-q4_k_m", q4.gguf, reference, names, args.threads)
        results["gguf q4_k_m (llama.cpp)"] = summary(rows, reference)
        results["q4_k_m_differ"] = {k: (reference[k]["text"], r["text"]) for k, r in rows.items()
                                    if json.dumps(r["calls"]) != json.dumps(reference[k]["calls"])}
    results["load_end"] = os.getloadavg()
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
