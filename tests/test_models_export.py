"""`modelwright models export` (agents/models/export.py, issue #48): the Local agent merged into
its base and written as a GGUF that other runners load.

Real parts, no mocks: the packaged base and the shipped adapter, the product's own first turns
of 20 test-split tasks (each task's start state built by a tool worker through the eval
harness), the `hf` policy for the standard variant. Greedy decoding, no timing.

- the GGUF's chat template renders exactly the prompt the `hf` policy renders (tools and
  `<tool_call>` in the Hermes format), on the real catalogue and multi-turn conversations;
- the unmerged base written in f32 and loaded back by transformers holds the same tensors
  (llama.cpp's q/k row order, reversed by transformers' GGUF loader);
- the q8_0 export, loaded back with transformers `gguf_file=`, gives the standard variant's
  greedy tool calls on the 20 tasks (the standard's own turns recorded in
  tests/data/standard_first_turns.json and checked against its model at every token) (its greedy choice checked at every token of the standard's
  turn in one forward a task; a task where it differs is decoded and its calls compared); with
  llama-cpp-python installed, llama.cpp does too;
- a wrong name, quant or format is one line and its exit code.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading

import pytest
from support.models_cli import models, one_error_line

from tools.cli.exits import ExitCode

pytestmark = pytest.mark.usefixtures("one_torch_thread")
FAMILIES = ["primitive_placement", "materials", "scene_editing", "requests"]
MAX_TOKENS = 96  # a level-1 call is 30-70 tokens of SmolLM2's tokenizer
# q8_0 rounds every weight to 8 bits per block of 32: measured 20 of 20 tools and 19 of 20
# whole calls the same as the float32 standard variant, in transformers and in llama.cpp (one
# colour's hex digits differ); q4_k_m 18 of 20. One call of margin for another CPU's kernels.
Q8_SAME_CALLS = 18
Q4_SAME_CALLS = 17


# --- the chat template ---------------------------------------------------------------------------


def _conversations() -> list[list[dict]]:
    system = {"role": "system", "content": "You build 3D models by calling tools."}
    goal = {"role": "user", "content": [
        {"type": "text", "text": "Goal: make 'Orb' twice as wide."},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "Scene: Orb uv_sphere 1x1x1 at [0, 0, 0.5]"}]}  # fmt: skip
    calls = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "t0_0", "type": "function",
         "function": {"name": "transform", "arguments": '{"name": "Orb", "scale": [2, 1, 1]}'}},
        {"id": "t0_1", "type": "function",
         "function": {"name": "set_material", "arguments": {"name": "Orb", "color": "#D03030"}}}]}
    results = [{"role": "tool", "tool_call_id": "t0_0", "content": "ok: scaled Orb"},
               {"role": "tool", "tool_call_id": "t0_1", "content": "error: no material slot"}]
    again = {"role": "assistant", "content": "Fixing it.", "tool_calls": [
        {"id": "t1_0", "type": "function",
         "function": {"name": "delete", "arguments": {"name": "Orb"}}}]}  # fmt: skip
    return [[system, goal], [goal], [system, goal, calls, *results, again,
                                     {"role": "tool", "content": "ok"}],
            [goal, calls, results[0], {"role": "user", "content": "Done?"},
             {"role": "assistant", "content": "Done."}]]  # fmt: skip


@pytest.mark.slow  # the GGUF's tokenizer: ~10-30 s to read
def test_the_gguf_chat_template_renders_the_prompt_the_hf_policy_renders():
    from transformers import AutoTokenizer

    from agents.models.chat_templates import CHATML_TOOLS_JINJA, TOOL_HEADER
    from agents.models.convert import one_read_per_gguf, packaged_gguf
    from agents.models.shipped import default_shipped
    from agents.policies import chat_format
    from tools import openai_tools

    assert TOOL_HEADER == chat_format.TOOL_INSTRUCTIONS
    gguf = packaged_gguf()
    where = {"pretrained_model_name_or_path": str(gguf.parent), "gguf_file": gguf.name,
             "local_files_only": True}
    with one_read_per_gguf():
        tokenizer = AutoTokenizer.from_pretrained(**where)  # SmolLM2's ChatML: the Hermes format
    assert chat_format.uses_hermes(tokenizer)
    catalogue = openai_tools()
    shipped = [t for t in catalogue if t["function"]["name"] in default_shipped().tools]
    cases = [(m, t) for m in _conversations() for t in (catalogue, shipped, None)]
    want = [chat_format.render(tokenizer, m, t) for m, t in cases]
    tokenizer.chat_template = CHATML_TOOLS_JINJA  # the exported GGUF's
    assert not chat_format.uses_hermes(tokenizer)
    got = [tokenizer.apply_chat_template(m, tools=t, tokenize=False, add_generation_prompt=True)
           for m, t in cases]  # fmt: skip
    for k, (a, b) in enumerate(zip(want, got, strict=True)):
        assert b == a, k


# --- errors ---------------------------------------------------------------------------------------


def test_a_wrong_name_quant_or_format_is_one_line(tmp_path):
    data = ["--data-dir", str(tmp_path / "data"), "--out", str(tmp_path / "out")]
    line = one_error_line(models("export", "no-such-model", *data), ExitCode.USAGE)
    assert "no-such-model" in line and "models list" in line
    line = one_error_line(models("export", "--quant", "q3_x", *data), ExitCode.USAGE)
    assert "q3_x" in line and "q8_0" in line
    line = one_error_line(models("export", "--format", "onnx", *data), ExitCode.USAGE)
    assert "onnx" in line and "gguf" in line
    line = one_error_line(models("export", "--adapter", str(tmp_path / "nowhere"), *data),
                          ExitCode.USAGE)  # fmt: skip
    assert "nowhere" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("quant", ["q4_k_m", "q4_0"])
def test_a_4_bit_export_without_llama_cpp_says_how_to_get_it(tmp_path, quant):
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("llama-cpp-python is installed here: 4-bit files are written, not refused")
    line = one_error_line(models("export", "--quant", quant, "--data-dir",
                                 str(tmp_path / "data")), ExitCode.UNAVAILABLE)  # fmt: skip
    assert f"--quant {quant} needs" in line and "`make fast`" in line
    assert f"llama-quantize FILE.gguf OUT.gguf {quant.upper()}" in line


# --- the packaged base and the shipped adapter ------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("quant", ["f32", "bf16"])
def test_the_unmerged_base_comes_back_as_the_same_tensors(base_data_env, tmp_path, quant):
    """f32 gives back every tensor bit for bit; bf16 every matrix rounded to bfloat16 as torch
    rounds it (the norms stay float32)."""
    import torch
    from transformers import AutoModelForCausalLM

    from agents.models.convert import BASE_NAME, one_read_per_gguf, packaged_gguf
    from agents.models.export import merged_tensors, write_gguf

    weights = merged_tensors(base_data_env / "models" / BASE_NAME, None)
    write_gguf(packaged_gguf(), weights, tmp_path / f"base.{quant}.gguf", quant, "base")
    with one_read_per_gguf():  # as the product loads a GGUF: its metadata parsed once
        back = AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file=f"base.{quant}.gguf",
                                                    local_files_only=True, dtype=torch.float32)
    loaded = back.state_dict()
    assert set(weights.tensors) <= set(loaded)
    for name, array in weights.tensors.items():
        want = torch.from_numpy(array)
        if quant == "bf16" and want.ndim == 2:
            want = want.to(torch.bfloat16).float()
            assert not torch.equal(want, torch.from_numpy(array)), name  # it was rounded
        assert torch.equal(loaded[name], want), name


class FirstTurn:
    """Keeps the first prompt the loop shows it, then ends the episode (no call)."""

    name = "first-turn"

    def __init__(self, sink: dict, lock: threading.Lock) -> None:
        self.sink, self.lock, self.task_id = sink, lock, None

    def reset(self, task_info: dict | None = None) -> None:
        self.task_id = (task_info or {}).get("task_id")

    def act(self, messages: list[dict], tools: list[dict]):
        from agents import PolicyReply

        with self.lock:
            self.sink.setdefault(self.task_id, (list(messages), list(tools)))
        return PolicyReply(text="done")


@pytest.fixture(scope="module")
def first_turns() -> dict:
    """task id -> (messages, tools) of the first turn of 20 level-1 test-split tasks, as the
    eval harness shows them to a policy."""
    from training.eval.run_eval import run_episodes, task_ids

    ids = task_ids(FAMILIES, [1], "test", 5)
    sink: dict = {}
    lock = threading.Lock()
    run_episodes(ids, lambda: FirstTurn(sink, lock), max_steps=1, workers=1)
    assert sorted(sink) == sorted(ids)
    return {k: sink[k] for k in ids}


def _calls(reply) -> str:
    return json.dumps([{"name": c.name, "arguments": c.arguments} for c in reply.tool_calls])


# The standard variant's greedy completions of the 20 first turns, as its own model makes them.
# Decoding them took ~80 CPU-s a run; the record is checked against the model in one forward a
# task instead (`_greedy_agrees`), and a task it does not hold (another prompt, another adapter,
# a completion the model no longer writes) is decoded afresh. `MODELWRIGHT_UPDATE_RECORDS=1`
# writes the record again from the run.
STANDARD_RECORD = os.path.join(os.path.dirname(__file__), "data", "standard_first_turns.json")


def _digest(ids: list[int]) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(ids).encode()).hexdigest()


def _calls_of(tokenizer, completion: list[int], tools: list[dict]) -> str:
    """The tool calls the `hf` policy reads from a first turn's completion (as `act` does)."""
    from agents.policies.toolcall_parser import parse_tool_calls

    text = tokenizer.decode(completion, skip_special_tokens=True).strip()
    names = [t["function"]["name"] for t in tools if "function" in t]
    parsed = parse_tool_calls(text, known_tools=names, id_prefix="t0")
    return json.dumps([{"name": c.name, "arguments": c.arguments} for c in parsed.calls])


@pytest.fixture(scope="module")
def standard(base_data_env, first_turns) -> dict:
    """The standard variant (the `hf` policy: the shipped adapter unmerged on the float32
    base) on each first turn: task id -> (prompt ids, its calls, its completion ids). Each
    completion is the model's greedy turn: recorded and checked at every token against the
    model (one forward a task), or decoded by the policy where the record does not hold."""
    from agents.models.shipped import default_shipped
    from agents.policies.chat_format import tokenizer_of
    from agents.policies.hf_policy import encode_prompt, make_hf, shown_tools

    policy = make_hf(max_tokens=MAX_TOKENS, tools=default_shipped().tools)
    tokenizer = tokenizer_of(policy.processor)
    record = {}
    if os.path.isfile(STANDARD_RECORD):
        with open(STANDARD_RECORD) as f:
            record = json.load(f)
    prompts, shown = {}, {}
    for task_id, (messages, tools) in first_turns.items():
        policy.reset({"task_id": task_id})
        shown[task_id] = shown_tools(tools, policy.shown())
        prompts[task_id] = encode_prompt(policy.processor, messages, shown[task_id])["input_ids"][0].tolist()
    held = {t: (prompts[t], record[t]["completion_ids"]) for t in prompts
            if t in record and record[t]["prompt_sha256"] == _digest(prompts[t])}  # fmt: skip
    agree = _greedy_agrees(policy.model, held) if held else set()
    out = {}
    for task_id, (messages, tools) in first_turns.items():
        if task_id in agree:
            completion = list(record[task_id]["completion_ids"])
            out[task_id] = (prompts[task_id], _calls_of(tokenizer, completion, shown[task_id]),
                            completion)  # fmt: skip
            continue
        policy.reset({"task_id": task_id})  # each starts from the last one's cached prefix
        reply = policy.act(messages, tools)
        assert reply.tokens.prompt_ids == prompts[task_id]
        calls = _calls(reply)
        assert _calls_of(tokenizer, reply.tokens.completion_ids, shown[task_id]) == calls
        out[task_id] = (prompts[task_id], calls, reply.tokens.completion_ids)
    if os.environ.get("MODELWRIGHT_UPDATE_RECORDS") == "1":
        rows = [f"{json.dumps(t)}: {json.dumps({'prompt_sha256': _digest(p), 'completion_ids': c})}"
                for t, (p, _, c) in out.items()]  # fmt: skip
        with open(STANDARD_RECORD, "w") as f:
            f.write("{\n" + ",\n".join(rows) + "\n}\n")
    return out


def _greedy_agrees(model, rows: dict) -> set:
    """The task ids of `rows` (task id -> (prompt ids, completion ids)) whose completion is
    `model`'s greedy continuation of its prompt: at every position of prompt + completion the
    model's most likely next token is the completion's next one (with its end-of-turn token),
    so greedy decoding would write exactly it. One forward a task (the prompts' common system +
    tools prefix cached once) instead of one a token."""
    import copy

    import torch

    from agents.policies.hf_policy import cache_kwarg, common_prefix, returned_cache

    prompts = [p for p, _ in rows.values()]
    shared = min(len(p) - 1 for p in prompts)  # every prompt keeps a token of its own to run
    shared = min(shared, *(common_prefix(prompts[0], p) for p in prompts))
    agree = set()
    with torch.no_grad():
        prefix = returned_cache(model(input_ids=torch.tensor([prompts[0][:shared]]), use_cache=True))
        for task_id, (prompt, completion) in rows.items():
            rest = torch.tensor([(prompt + completion)[shared:-1]])
            cached = {cache_kwarg(): copy.deepcopy(prefix)}
            logits = model(input_ids=rest, **cached, use_cache=True).logits
            greedy = logits[0, len(prompt) - 1 - shared:].argmax(-1).tolist()
            if greedy == list(completion):
                agree.add(task_id)
    return agree


@pytest.fixture(scope="module")
def exported(base_data_env, tmp_path_factory):
    out = tmp_path_factory.mktemp("export")
    result = models("export", "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_q8_0_export_makes_the_standard_variants_tool_calls(exported, standard,
                                                                first_turns):  # fmt: skip
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agents.models.convert import one_read_per_gguf
    from agents.models.shipped import default_shipped
    from agents.policies.hf_policy import HFPolicy, encode_prompt, shown_tools

    assert exported["quant"] == "q8_0" and exported["adapter"]
    folder, name = os.path.split(exported["gguf"])
    assert sorted(os.listdir(folder)) == sorted(["Modelfile", "README.txt", name])
    modelfile = open(os.path.join(folder, "Modelfile")).read()
    assert f"FROM ./{name}\n" in modelfile and 'PARAMETER stop "<|im_end|>"' in modelfile
    assert "<tool_call>" in modelfile and "PARAMETER temperature 0" in modelfile
    where = {"pretrained_model_name_or_path": folder, "gguf_file": name, "local_files_only": True}
    with one_read_per_gguf():
        tokenizer = AutoTokenizer.from_pretrained(**where)
        model = AutoModelForCausalLM.from_pretrained(**where, dtype=torch.float32).eval()
    fast = HFPolicy.from_loaded(model, tokenizer, model=name, max_tokens=MAX_TOKENS,
                                tools=default_shipped().tools)  # fmt: skip
    prompts = {}
    for task_id, (messages, tools) in first_turns.items():  # its own template, same tokens
        inputs = encode_prompt(tokenizer, messages, shown_tools(tools, fast.shown()))
        prompts[task_id] = inputs["input_ids"][0].tolist()
    assert prompts == {t: p for t, (p, _, _) in standard.items()}
    # The tasks where the export's greedy turn is the standard's token for token; the others
    # are decoded, so that their calls (not only their tokens) are compared.
    agree = _greedy_agrees(model, {t: (p, c) for t, (p, _, c) in standard.items()})
    same_tools, same_calls, differ = 0, 0, []
    for task_id, (messages, tools) in first_turns.items():
        _, want, _ = standard[task_id]
        if task_id in agree:
            got = want
        else:
            fast.reset({"task_id": task_id})
            got = _calls(fast.act(messages, tools))
        same_tools += [c["name"] for c in json.loads(got)] == [c["name"] for c in json.loads(want)]
        if got == want:
            same_calls += 1
        else:
            differ.append((task_id, want, got))
    assert sum(bool(json.loads(w)) for _, w, _ in standard.values()) >= 15  # it does call tools
    assert same_tools == len(first_turns), differ
    assert same_calls >= Q8_SAME_CALLS, differ


NO_LLAMA_CPP = "llama-cpp-python (the `fast` extra) is not installed: `make fast` builds it"
# Decided before the fixtures run (they take minutes): no model is loaded for a skipped test.
needs_llama_cpp = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                                     reason=NO_LLAMA_CPP)


def _llama_agreement(llama_cpp, gguf: str, standard: dict) -> tuple[int, int, list]:
    """(same tools, same calls, the differing ones) of llama.cpp's greedy first turns."""
    from agents.models.shipped import default_shipped
    from agents.policies.llamacpp_policy import open_gguf
    from agents.policies.toolcall_parser import parse_tool_calls

    llm = open_gguf(gguf, n_ctx=2048, n_threads=1, n_batch=512)
    names = default_shipped().tools
    same_tools, same_calls, differ = 0, 0, []
    for task_id, (prompt_ids, want, _) in standard.items():
        text = _llama_greedy(llm, prompt_ids, MAX_TOKENS)
        parsed = parse_tool_calls(text.strip(), known_tools=names, id_prefix="t0")
        got = json.dumps([{"name": c.name, "arguments": c.arguments} for c in parsed.calls])
        same_tools += [c["name"] for c in json.loads(got)] == [c["name"] for c in json.loads(want)]
        if got == want:
            same_calls += 1
        else:
            differ.append((task_id, want, got))
    return same_tools, same_calls, differ


@pytest.mark.slow
@needs_llama_cpp
def test_llama_cpp_runs_the_export_with_the_standard_variants_tool_calls(exported, standard):
    import llama_cpp

    same_tools, same_calls, differ = _llama_agreement(llama_cpp, exported["gguf"], standard)
    assert same_tools == len(standard), differ
    assert same_calls >= Q8_SAME_CALLS, differ


@pytest.mark.slow
@needs_llama_cpp
def test_q4_k_m_is_written_by_llama_cpp_and_calls_the_same_tools(base_data_env, standard,
                                                                   tmp_path):  # fmt: skip
    import llama_cpp

    result = models("export", "--quant", "q4_k_m", "--out", str(tmp_path), "--json")
    assert result.exit_code == 0, result.output
    done = json.loads(result.stdout.strip().splitlines()[-1])
    assert done["quant"] == "q4_k_m" and done["gguf"].endswith(".q4_k_m.gguf")
    same_tools, same_calls, differ = _llama_agreement(llama_cpp, done["gguf"], standard)
    assert same_tools == len(standard), differ
    assert same_calls >= Q4_SAME_CALLS, differ


def _llama_greedy(llm, prompt_ids: list[int], budget: int) -> str:
    """Greedy tokens after `prompt_ids` (the product's own rendering) to the end of turn."""
    llm.reset()
    out = []
    for token in llm.generate(prompt_ids, temp=0.0, top_k=1, top_p=1.0, repeat_penalty=1.0,
                              reset=True):  # fmt: skip
        if token == llm.token_eos() or len(out) >= budget:
            break
        out.append(token)
    return llm.detokenize(out).decode("utf-8", errors="replace")
