"""`--variant fast`: the agent's q8_0 GGUF in llama.cpp where llama-cpp-python is installed
(agents/policies/llamacpp_policy.py, agents/models/variants.py), the in-process int8 variant
otherwise. Greedy decoding, real workers, no timing."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agents.policies.hf_policy import HFPolicy
from agents.policies.llamacpp_policy import (
    EXTRA_BUFFERS_ENV,
    build_advice,
    extra_buffers,
    llama_cpp_available,
)
from agents.policies.local import make_local
from studio.cli import build_app

pytestmark = pytest.mark.usefixtures("one_torch_thread")
needs_llama = pytest.mark.skipif(not llama_cpp_available(),
                                 reason="llama-cpp-python (the `fast` extra) is not installed")
FAMILIES = ["primitive_placement", "materials", "scene_editing", "requests"]


def test_without_llama_cpp_or_a_gguf_the_fast_variant_is_int8_and_says_why(tiny_text_dir, capsys):
    """A model folder that did not come from a GGUF (or no llama-cpp-python): the int8 variant
    runs, and one line says why."""
    policy = make_local(model=str(tiny_text_dir), variant="fast", max_tokens=8, tools=["delete"])
    assert isinstance(policy, HFPolicy) and policy.config.variant == "fast"
    said = capsys.readouterr().err
    assert "running the in-process int8 variant" in said
    why = "is not a registered model" if llama_cpp_available() else "llama-cpp-python is not installed"
    assert why in said
    reply = policy.act([{"role": "user", "content": "Remove the cube named A."}], [])
    assert reply.tokens_out > 0


@pytest.fixture(scope="module")
def data_dir(base_data_dir):
    old = os.environ.get("MODELWRIGHT_DATA_DIR")
    os.environ["MODELWRIGHT_DATA_DIR"] = str(base_data_dir)
    yield base_data_dir
    if old is None:
        os.environ.pop("MODELWRIGHT_DATA_DIR", None)
    else:
        os.environ["MODELWRIGHT_DATA_DIR"] = old


class Spy:
    """A policy as it is, its calls written down by task."""

    def __init__(self, inner, sink: dict) -> None:
        self.inner, self.sink, self.task = inner, sink, None

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def reset(self, task_info=None):
        self.task = (task_info or {}).get("task_id")
        self.sink[self.task] = []
        return self.inner.reset(task_info)

    def act(self, messages, tools):
        reply = self.inner.act(messages, tools)
        self.sink[self.task] += [(c.name, c.arguments) for c in reply.tool_calls]
        return reply


@needs_llama
@pytest.mark.slow
def test_the_fast_variant_runs_the_agents_gguf_in_the_loop_as_the_standard_does(data_dir):
    """The shipped agent's fast variant: its GGUF is made once and found again; on level-1 test
    tasks through the real loop it makes the standard variant's calls (q8_0 may round a digit:
    the same tools everywhere), a later turn runs only its new tokens, and `models show` lists
    the variant with its size and the speed its turns were run at."""
    from agents.models.shipped import default_shipped
    from agents.models.variants import fast_gguf
    from agents.policies.llamacpp_policy import LlamaCppPolicy
    from training.eval.run_eval import run_episodes, task_ids

    shipped = default_shipped()
    fast = make_local(variant="fast", max_tokens=96)
    assert isinstance(fast, LlamaCppPolicy)
    made = fast_gguf(None, None)
    stamp = made.gguf.stat().st_mtime_ns
    assert fast_gguf(None, None).gguf == made.gguf and made.gguf.stat().st_mtime_ns == stamp
    standard = make_local(max_tokens=96)
    assert isinstance(standard, HFPolicy)
    ids = task_ids(FAMILIES, [1], "test", 1)
    calls: dict = {"fast": {}, "standard": {}}
    for name, policy in (("fast", fast), ("standard", standard)):
        report = run_episodes(ids, lambda p=policy, n=name: Spy(p, calls[n]), max_steps=2)
        assert report["overall"]["episodes"] == len(ids) and report["overall"]["errors"] == 0
    assert sorted(calls["fast"]) == sorted(ids)
    for task in ids:  # the same tools on every task; q8_0 may round a digit of an argument
        assert [c[0] for c in calls["fast"][task]] == [c[0] for c in calls["standard"][task]], task
    assert fast.prompt_tokens > 0 and fast.prompt_encoded < fast.prompt_tokens  # prefixes reused
    budget = fast.prompt_budget()  # the loop fits prompts to the context less a turn's tokens
    assert budget.limit == fast.llama.n_ctx - 96
    goal = [{"role": "user", "content": "Delete Ball."}]
    assert budget.count(goal, None) == len(fast._ids(goal, []))
    fast.llama.save_stats()
    result = CliRunner().invoke(build_app(), ["models", "show", shipped.name, "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    (row,) = [v for v in shown["variants"] if v["engine"] == "llama.cpp"]
    assert row["path"] == str(made.gguf) and row["size_bytes"] == made.gguf.stat().st_size
    assert row["turns"] >= len(ids) and row["new_tok_s"] > 0
    # the next run (the studio's next goal) finds the GGUF loaded, its contexts pooled
    again = make_local(variant="fast", max_tokens=96)
    assert again.llama is fast.llama and fast.llama._idle
    fast.llama.close()  # contexts freed, the model forgotten: the next one loads it again
    assert fast.llama.closed and not fast.llama._idle
    assert make_local(variant="fast", max_tokens=96).llama is not fast.llama


class Turns(Spy):
    """A policy as it is, the tokens of each turn it generated written down by task."""

    def act(self, messages, tools):
        reply = self.inner.act(messages, tools)
        self.sink.setdefault(self.task, []).append(list(reply.raw["completion_ids"]))
        return reply


@needs_llama
@pytest.mark.slow
def test_guessing_from_earlier_replies_gives_the_same_tokens_whatever_was_guessed(data_dir):
    """The fast variant's greedy turns guess ahead from the model's own earlier replies
    (agents/policies/lookup_decoding.py `ReplyMemory`), and every llama.cpp run holds two
    tokens at least: so a turn's tokens are the same whatever the memory held (empty, warm
    from the same episodes, guessing one token at most), in fewer model runs than tokens.
    Guessing from the prompt (`prompt`) and a token at a time (`off`) make the same tool calls
    (a single token's arithmetic differs from a batch's: a near-tie may round the other way)."""
    from agents.policies.llamacpp_policy import LlamaCppPolicy
    from agents.policies.lookup_decoding import ReplyMemory
    from agents.policies.toolcall_parser import parse_tool_calls
    from training.eval.run_eval import run_episodes, task_ids

    fast = make_local(variant="fast", max_tokens=96)
    assert isinstance(fast, LlamaCppPolicy) and fast.llama.lookup == "replies"  # the default
    ids = task_ids(FAMILIES, [1], "test", 2)
    turns: dict = {}
    ran: dict = {}
    for run, mode, memory in (("cold", "replies", ReplyMemory()), ("warm", "replies", None),
                              ("one", "replies", ReplyMemory(max_draft=1)),
                              ("prompt", "prompt", None), ("off", "off", None)):  # fmt: skip
        fast.llama.lookup = mode
        if memory is not None:
            fast.llama.memory = memory
        before = dict(fast.llama.counts)
        turns[run] = {}
        report = run_episodes(ids, lambda s=turns[run]: Turns(fast.sibling(), s), max_steps=3)
        assert report["overall"]["errors"] == 0
        ran[run] = {k: fast.llama.counts[k] - before[k]
                    for k in ("turns", "steps", "drafted", "accepted", "new_tokens")}
        assert sorted(turns[run]) == sorted(ids)
    for run in ("cold", "warm", "one"):
        assert turns[run] == turns["cold"], run  # token for token, every turn
        r = ran[run]
        assert 0 < r["accepted"] <= r["drafted"] and r["steps"] <= r["drafted"]  # 2+ tokens a run
        assert r["steps"] < r["new_tokens"] - r["turns"]  # fewer runs than a token at a time
    assert ran["warm"]["steps"] < ran["cold"]["steps"]  # what it learnt, it guesses
    assert ran["off"]["steps"] == ran["off"]["drafted"] == 0
    tokenizer = fast.llama.tokenizer

    def tools(run: str, task: str) -> list[list[str]]:
        return [[c.name for c in parse_tool_calls(tokenizer.decode(t, skip_special_tokens=True)).calls]
                for t in turns[run][task]]

    for run in ("prompt", "off"):
        for task in ids:
            assert tools(run, task) == tools("cold", task), (run, task)
        same = sum(turns[run][t] == turns["cold"][t] for t in ids)
        assert same >= len(ids) - 1, f"{run}: {same} of {len(ids)} episodes token for token"
    fast.llama.lookup, fast.llama.memory = "replies", ReplyMemory()


def test_llama_cpps_extra_kernels_are_left_out_only_for_an_amx_build_on_an_amx_cpu(monkeypatch):
    """The AMX weight layout crashed; repacked rows did not. So the extra buffer types stay on
    unless both the build and the CPU have AMX, and the environment variable decides over both."""
    monkeypatch.delenv(EXTRA_BUFFERS_ENV, raising=False)
    amx_build = "CPU : SSE3 = 1 | AVX512 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | REPACK = 1 | "
    plain_build = "CPU : SSE3 = 1 | AVX512 = 1 | LLAMAFILE = 1 | REPACK = 1 | "
    amx_cpu = "flags\t\t: fpu sse2 avx512f amx_bf16 amx_tile amx_int8 avx512_fp16\n"
    plain_cpu = "flags\t\t: fpu sse2 avx512f avx512_vnni\n"
    assert extra_buffers(amx_build, amx_cpu) is False
    assert extra_buffers(plain_build, amx_cpu) is True  # `make fast`'s build on an AMX CPU
    assert extra_buffers(amx_build, plain_cpu) is True
    assert extra_buffers(plain_build, plain_cpu) is True
    monkeypatch.setenv(EXTRA_BUFFERS_ENV, "1")
    assert extra_buffers(amx_build, amx_cpu) is True
    monkeypatch.setenv(EXTRA_BUFFERS_ENV, "0")
    assert extra_buffers(plain_build, plain_cpu) is False


@pytest.mark.parametrize("flags, on, off", [
    ("fpu sse2 sse4_2 avx avx2 fma f16c bmi2 avx512f avx512_vnni avx512vbmi avx512_bf16 "
     "amx_tile amx_int8 amx_bf16 avx_vnni",
     ["AVX2", "AVX512", "AVX512_VNNI", "AVX512_VBMI", "AVX512_BF16", "AVX_VNNI"], []),
    ("fpu sse2 sse4_2 avx avx2 fma f16c", ["AVX", "AVX2", "FMA", "F16C"],
     ["AVX512", "AVX512_VNNI", "AVX_VNNI"]),
])
def test_make_fast_builds_for_the_cpus_own_instruction_sets_and_never_amx(tmp_path, flags, on, off):
    script = Path(__file__).resolve().parent.parent / "scripts" / "fast_extra.sh"
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    out = subprocess.run(["bash", str(script), "--print-cmake-args"], capture_output=True,
                         text=True, env={**os.environ, "CPUINFO": str(cpuinfo)}, check=True)
    args = set(out.stdout.split())
    assert "-DGGML_NATIVE=OFF" in args  # -march=native would compile the AMX kernels
    assert "-DGGML_OPENMP=OFF" in args  # OpenMP's barriers sleep under the passive wait policy
    assert {"-DGGML_AMX_INT8=OFF", "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_BF16=OFF"} <= args
    assert {f"-DGGML_{o}=ON" for o in on} <= args
    assert {f"-DGGML_{o}=OFF" for o in off} <= args
    # not x86-64 (an Arm /proc/cpuinfo has no flags line): a native build
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd evtstrm aes\n")
    out = subprocess.run(["bash", str(script), "--print-cmake-args"], capture_output=True,
                         text=True, env={**os.environ, "CPUINFO": str(cpuinfo)}, check=True)
    assert out.stdout.split() == ["-DGGML_NATIVE=ON", "-DGGML_OPENMP=OFF"]


def test_a_slower_llama_cpp_build_gets_one_line_saying_make_fast(monkeypatch):
    monkeypatch.delenv(EXTRA_BUFFERS_ENV, raising=False)
    made = "CPU : AVX2 = 1 | AVX512 = 1 | LLAMAFILE = 1 | REPACK = 1 | "  # make fast's build
    omp = "CPU : AVX2 = 1 | AVX512 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
    amx = "CPU : AVX512 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
    amx_cpu, plain_cpu = "flags : sse2 avx512f amx_tile amx_int8\n", "flags : sse2 avx512f\n"
    assert build_advice(made, amx_cpu, "passive") == ""
    assert build_advice(omp, plain_cpu, "spin then sleep (libgomp default)") == ""
    said = build_advice(omp, plain_cpu, "passive")
    assert "with OpenMP" in said and "`make fast`" in said and "\n" not in said
    said = build_advice(amx, amx_cpu, "passive")
    assert "with OpenMP" in said and "with AMX" in said and "`make fast`" in said
    assert "with AMX" not in build_advice(amx, plain_cpu, "passive")  # no AMX here: it runs


@needs_llama
@pytest.mark.slow
def test_a_pipeline_eval_stage_in_llama_cpp_f32_reports_the_standard_float32_episodes(
        data_dir, tmp_path, monkeypatch):  # fmt: skip
    """`eval.variant: fast` with `eval.quant: f32`: the stage's adapter (the shipped curriculum
    one) merged into an f32 GGUF under RUN/variants, its greedy episodes on level 1-2 test
    tasks, family toolboxes shown, the same as the standard variant's float32 eval: reward,
    steps, tokens out and prompt tokens of every turn. The GGUF is made once. One thread each
    (a sum's order can follow the thread count, and a near-tie then flip a greedy token)."""
    from agents.models.registry import resolve, resolve_adapter
    from training.pipeline import evaluate_model
    from training.train_config import TrainConfig

    monkeypatch.setenv("MODELWRIGHT_THREADS", "1")
    base = resolve("smollm2-135m-instruct", data_dir)
    adapter = resolve_adapter("smollm2-curriculum", data_dir)

    def run(variant: str) -> dict:
        cfg = TrainConfig.model_validate({
            "kind": "pipeline", "model": {"path": str(base), "dtype": "bfloat16"},
            "demos": {"families": ["materials"]}, "sft": {}, "grpo": {},
            "eval": {"families": ["materials", "primitive_placement"], "levels": [1, 2],
                     "per_family": 2, "max_steps": 4, "max_tokens": 96, "dtype": "float32",
                     "variant": variant, "quant": "f32"},
        })  # fmt: skip
        evaluate_model(cfg, base, adapter, variant, tmp_path)
        return json.loads((tmp_path / f"eval-{variant}.json").read_text())

    def seen(report: dict) -> list:
        return sorted((e["task"], e["reward"], e["steps"], e["tokens_out"], e["prompt_tokens"])
                      for e in report["episodes"])  # fmt: skip

    from agents.policies import llamacpp_policy

    fast, standard = run("fast"), run("standard")
    assert len(fast["episodes"]) == 4 and seen(fast) == seen(standard)
    assert not [g for g in llamacpp_policy._OPEN if "curriculum" in g.name]  # closed after
    assert fast["schema_valid_calls"] == standard["schema_valid_calls"]
    (gguf,) = (tmp_path / "variants").glob("smollm2-curriculum-*.f32.gguf")
    assert fast["engine"] == {"engine": "llama.cpp", "quant": "f32", "gguf": gguf.name,
                              "threads": fast["engine"]["threads"], "workers": 1}
    stamp = gguf.stat().st_mtime_ns
    run("fast")
    assert gguf.stat().st_mtime_ns == stamp  # found again, not made again


def test_the_fast_variants_format_is_one_a_fast_variant_is_made_in(tmp_path):
    """`eval --quant` and `eval.quant` take q8_0, f16, bf16 or f32; anything else is one line."""
    from training.train_config import TrainConfig

    result = CliRunner().invoke(build_app(), ["eval", "--policy", "hf", "--variant", "fast",
                                              "--quant", "q4_k_m", "--no-record"])
    assert result.exit_code == 2 and "--quant q4_k_m: a fast variant is made in q8_0 | f16 | bf16 | f32" \
        in result.output
    result = CliRunner().invoke(build_app(), ["eval", "--policy", "hf", "--quant", "f32"])
    assert result.exit_code == 2 and "add --variant fast" in result.output
    with pytest.raises(ValueError, match="quant"):
        TrainConfig.model_validate({"kind": "pipeline", "model": {"path": str(tmp_path)},
                                    "eval": {"variant": "fast", "quant": "q4_0"}})


def test_a_pipeline_with_fast_evals_says_at_once_when_llama_cpp_is_missing(tmp_path):
    """`eval.variant: fast` without llama-cpp-python: one line naming `make fast` before the
    first stage runs (nothing written), not at the first eval hours later."""
    import yaml

    from training.pipeline import check_eval_engine
    from training.train_config import load_config

    cfg = yaml.safe_load(Path("configs/pipeline-tiny-cpu.yaml").read_text())
    cfg["eval"] = {**cfg.get("eval", {}), "variant": "fast", "quant": "f32"}
    path = tmp_path / "fast-evals.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert load_config(path).eval.variant == "fast"
    if llama_cpp_available():
        check_eval_engine(load_config(path))  # nothing to say
        return
    out = tmp_path / "run"
    result = CliRunner().invoke(build_app(), ["train", "pipeline", "--config", str(path),
                                              "--out", str(out)])  # fmt: skip
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "`make fast` builds it" in result.output and len(result.output.strip().splitlines()) == 1
    assert not out.exists() or not any(out.iterdir())
