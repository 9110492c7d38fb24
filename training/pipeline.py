"""The end-to-end pipeline: model -> oracle demonstrations -> SFT -> eval -> GRPO -> eval -> report.

`modelwright train pipeline --config configs/pipeline-tiny-cpu.yaml --out DIR` runs every stage
into DIR (model/, demos.parquet, sft/, grpo/, eval-*.json) and writes DIR/report.json with one
entry per stage (`untrained`, `sft`, `grpo`) scored on held-out test seeds, and DIR/report.md.
A stage whose output is complete is skipped by `--resume`.

Episodes (demonstrations and evaluations) run through the one episode loop and the eval
harness (`training.eval.harness`); the in-process model is wrapped in the `hf` policy.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from training.eval.run_eval import CallCounter, evaluate_loaded, run_episodes, task_ids
from training.eval.stats import stage_summary
from training.tasks.base import family_tools, held_out_families
from training.train_config import TrainConfig

__all__ = ["CallCounter", "collect_demos", "evaluate_model", "run_pipeline", "task_ids"]


def collect_demos(config: TrainConfig, out: Path, model_dir: Path | None = None) -> dict:
    """Oracle episodes on training seeds -> one row per turn of each success in demos.parquet.

    The tasks come from the same weighted sampler as GRPO's curriculum (`demos.family_weights`,
    `demos.level_weights`; training/tasks/sampling.py). With `model_dir`, every turn's prompt is
    fitted to that model's budget (`demo_budget`) by the rule the loop applies when it acts."""
    from training.eval.oracle import OraclePolicy
    from training.sft.demos import CapturingPolicy, write_rows
    from training.tasks.sampling import demo_task_ids

    spec = config.demos
    ids = demo_task_ids(spec)
    max_steps = max(8, config.eval.max_steps)
    sink: list[dict] = []
    lock = threading.Lock()
    budget = demo_budget(config, model_dir) if model_dir is not None else None
    report = run_episodes(
        ids, lambda: CapturingPolicy(OraclePolicy(calls_per_turn=spec.calls_per_turn,
                                                  count_steps=spec.count_steps),
                                     sink, lock, config.tools, budget),  # fmt: skip
        max_steps, workers=spec.workers,
    )
    rows = _demo_rows(sink, report, "", first_turn=0)
    out_info = {
        "episodes": len(ids),
        "kept": len({r["task_id"] for r in rows}),
        "rows": len(rows),
        "oracle_success_rate": report["overall"]["success_rate"],
    }
    if spec.recovery_per_family:
        from training.sft.demos import FumblingOracle

        retry = demo_task_ids(spec, spec.recovery_per_family)
        sink = []
        fumbled = run_episodes(
            retry, lambda: CapturingPolicy(FumblingOracle(spec.calls_per_turn, spec.count_steps),
                                           sink, lock, config.tools, budget),  # fmt: skip
            max_steps, workers=spec.workers,
        )
        # Kept: episodes whose wrong first call failed and which the oracle then solved.
        recovered = [e for e in fumbled["episodes"] if e["success"] and e["tool_errors"] >= 1]
        extra = _demo_rows(sink, {"episodes": recovered}, "#recovery", first_turn=1)
        rows += extra
        out_info.update(recovery_episodes=len(retry), recovery_kept=len(recovered),
                        recovery_rows=len(extra), rows=len(rows))  # fmt: skip
    write_rows(rows, out / "demos.parquet")
    return out_info


def demo_budget(config: TrainConfig, model_dir: Path) -> Any:
    """The prompt budget of the model in `model_dir` as it will act in eval: its context less
    `eval.max_tokens`, counted by its own tokenizer (or processor) with the config's tools, as
    the hf policy counts (`counting_budget`). Only the processor is loaded."""
    from transformers import AutoConfig, AutoProcessor, AutoTokenizer

    from agents.policies.hf_policy import context_length, counting_budget

    folder = str(model_dir)
    model_config = AutoConfig.from_pretrained(folder, local_files_only=True)
    load = AutoTokenizer if getattr(model_config, "vision_config", None) is None else AutoProcessor
    context = context_length(model_config)
    if not context:
        return None
    return counting_budget(load.from_pretrained(folder, local_files_only=True),
                           context - config.eval.max_tokens, config.tools)  # fmt: skip


def _demo_rows(sink: list[dict], report: dict, tag: str, first_turn: int) -> list[dict]:
    """SFT rows of the successful episodes' turns from `first_turn` on, in task/turn order."""
    from training.sft.demos import conversation_row

    success = {e["task"]: e for e in report["episodes"] if e["success"]}
    rows = []
    for item in sorted(sink, key=lambda d: (d["task_id"], d["turn"])):
        ep = success.get(item["task_id"])
        if ep is None or item["turn"] < first_turn:
            continue
        row = conversation_row(*item["conversation"])
        row.update(
            episode_id=f"{item['task_id']}{tag}#turn{item['turn']}",
            task_id=item["task_id"],
            success=True,
            reward=float(ep["reward"]),
            source="oracle",
            model="oracle",
        )
        rows.append(row)
    return rows


def evaluate_model(
    config: TrainConfig, model_dir: Path, adapter: Path | None, name: str, out: Path
) -> dict:
    """Greedy episodes of the (adapted) model on the `eval:` tasks; writes eval-NAME.json.

    Each finished episode goes into `eval-NAME.episodes.jsonl` as it ends (its record and its
    calls' schema tally): a stage stopped part-way runs only the rest on `--resume`, and its
    report is the whole stage's. An episode is greedy, so a rerun of it is the same one."""
    from training.eval.harness import aggregate
    from training.eval.run_eval import eval_ids
    from training.sft.trainer import load_model

    ids = eval_ids(config)
    journal = out / f"eval-{name}.episodes.jsonl"
    head = _journal_head(config, model_dir, adapter)
    done = _journal(journal, ids, head)
    todo = [i for i in ids if i not in done]
    tally: dict = {"valid": 0, "attempts": 0}
    lock = threading.Lock()
    if not done:
        out.mkdir(parents=True, exist_ok=True)
        journal.write_text(json.dumps(head) + "\n")

    def keep(record: dict, finished: int, total: int) -> None:
        own = tally.get("by_task", {}).get(record.get("task"), [0, 0])
        with lock, journal.open("a") as f:
            f.write(json.dumps({"record": record, "calls": own}, default=str) + "\n")

    report: dict = {}
    if todo and config.eval.variant == "fast":  # llama.cpp on the merged GGUF (eval.quant)
        from training.eval.run_eval import evaluate_fast

        report = evaluate_fast(config, model_dir, adapter, out / "variants", progress=keep,
                               ids=todo, tally=tally)  # fmt: skip
    elif todo:
        spec = config.model
        if config.eval.dtype is not None:
            spec = spec.model_copy(update={"dtype": config.eval.dtype})
        model, processor = load_model(spec, out, model_dir)
        if adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(adapter))
        model.eval()
        report = evaluate_loaded(config, model, processor, label=str(model_dir), progress=keep,
                                 ids=todo, tally=tally)  # fmt: skip
    if done:  # the earlier attempts' episodes and this one's, in the stage's order
        ran = {e["task"]: e for e in report.get("episodes", [])}
        whole = aggregate([done[i][0] if i in done else ran[i] for i in ids
                           if i in done or i in ran])  # fmt: skip
        now = report.get("schema_valid_calls", {})
        whole["schema_valid_calls"] = {
            "valid": sum(c[0] for _, c in done.values()) + now.get("valid", 0),
            "attempts": sum(c[1] for _, c in done.values()) + now.get("attempts", 0),
        }
        whole.update({k: report[k] for k in ("engine", "cpu", "retries") if k in report})
        whole["resumed"] = {"episodes_before": len(done), "episodes_run": len(ran)}
        report = whole
    report["stage"] = name
    (out / f"eval-{name}.json").write_text(json.dumps(report, indent=1, default=str))
    return stage_summary(report)


def drop_eval_journals(out: Path) -> None:
    """A fresh run (no --resume) reuses no earlier run's finished eval episodes."""
    for stale in out.glob("eval-*.episodes.jsonl"):
        stale.unlink()


def _journal_head(config: TrainConfig, model_dir: Path, adapter: Path | None) -> dict:
    """What an eval journal's episodes were of: the eval's settings, the model, and the
    adapter's weights by digest (a retrained checkpoint at the same path is another)."""
    import hashlib

    digest = None
    if adapter is not None:
        h = hashlib.sha256()
        for f in sorted(Path(adapter).glob("adapter_*")):
            h.update(f.name.encode())
            h.update(f.read_bytes())
        digest = h.hexdigest()
    return {"eval": config.eval.model_dump(mode="json"), "model": str(model_dir),
            "adapter": str(adapter) if adapter else None, "adapter_sha256": digest}  # fmt: skip


def _journal(path: Path, ids: list[str], head: dict) -> dict[str, tuple[dict, list]]:
    """The episodes an earlier attempt at this eval finished (task -> (record, [valid,
    attempts])); none when there is no journal, or it was of another model, adapter or eval
    setting. A line cut short by the stop is left out (its episode runs again), and so is an
    episode that could not run."""
    if not path.is_file():
        return {}
    lines = path.read_text().splitlines()
    try:
        first = json.loads(lines[0]) if lines else None
    except ValueError:
        first = None
    if first != head:
        return {}
    done: dict[str, tuple[dict, list]] = {}
    for line in lines[1:]:
        try:
            item = json.loads(line)
            record, calls = item["record"], [int(c) for c in item["calls"]]
        except (ValueError, KeyError, TypeError):
            continue
        if record.get("task") in ids and record.get("status") != "error":
            done[record["task"]] = (record, calls)
    return done


def select_sft_checkpoint(config: TrainConfig, out: Path, model_dir: Path) -> dict:
    """Score every kept SFT checkpoint on validation seeds; the best (valid-call rate, then
    mean reward, then the later step) is the one GRPO starts from and the report scores.

    Greedy replies of a tiny model swing by several points from one checkpoint to the next;
    choosing on validation seeds keeps the held-out test seeds out of the choice.
    """
    from training.runs import COMPLETE

    select = config.sft.select_checkpoint
    val = config.model_copy(
        update={
            "eval": config.eval.model_copy(
                update={"split": select.split, "per_family": select.per_family,
                        "families": select.families or config.eval.families,
                        "phrasing": "seen"}  # held-out phrasings never choose a checkpoint
            )
        }
    )
    candidates = []
    for ckpt in sorted(
        (c for c in (out / "sft").glob("checkpoint-*") if (c / COMPLETE).is_file()),
        key=lambda c: int(c.name.split("-")[1]),
    ):
        step = int(ckpt.name.split("-")[1])
        base, adapter = (ckpt, None) if config.sft.full_finetune else (model_dir, ckpt)
        summary = evaluate_model(val, base, adapter, f"select-sft-{step}", out)
        candidates.append(
            {
                "step": step,
                "base": str(base),
                "adapter": str(adapter) if adapter else None,
                "valid_call_rate": summary["valid_call_rate"],
                "mean_reward": summary["mean_reward"],
                "episodes": summary["episodes"],
            }
        )
    if not candidates:
        raise RuntimeError(f"no complete SFT checkpoint in {out / 'sft'} to choose from")
    best = max(candidates, key=lambda c: (c["valid_call_rate"], c["mean_reward"], c["step"]))
    return {"split": select.split, "candidates": candidates, "chosen": best}


HEARTBEAT_S = 30.0  # how often an unfinished stage's time so far is saved


def _stage(out: Path, name: str, resume: bool, fn) -> Any:
    """Run a stage once; with --resume, reuse its saved result.

    A stage stopped part-way (SFT and GRPO go on from their checkpoints) counts every attempt:
    while it runs its seconds and peak memory so far are saved every `HEARTBEAT_S` in
    `.NAME.partial.json`, and a resumed attempt adds to them, so the report's time is what the
    stage cost in all (work redone after the last checkpoint included), not its last part."""
    done = out / f".{name}.json"
    if resume and done.is_file():
        return json.loads(done.read_text())
    partial = out / f".{name}.partial.json"
    before = {"seconds": 0.0, "attempts": 0, "peak_rss_mb": 0}
    if resume and partial.is_file():
        try:
            saved = json.loads(partial.read_text())
            before = {k: type(v)(saved.get(k, v)) for k, v in before.items()}
        except (OSError, ValueError, TypeError):
            pass  # unreadable: this attempt's time alone
    reset_peak_memory()
    start = time.time()
    stop = threading.Event()

    def so_far() -> dict:
        peak = _memory_status().get("peak_rss_mb", 0)
        return {"seconds": round(before["seconds"] + time.time() - start, 1),
                "attempts": before["attempts"] + 1,
                "peak_rss_mb": max(before["peak_rss_mb"], peak)}  # fmt: skip

    def save() -> None:
        try:
            tmp = partial.with_suffix(".tmp")
            tmp.write_text(json.dumps(so_far()))
            tmp.replace(partial)
        except OSError:
            pass

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            save()

    out.mkdir(parents=True, exist_ok=True)
    heart = threading.Thread(target=beat, daemon=True, name=f"mw-stage-{name}")
    heart.start()
    try:
        value = fn()
    except BaseException:  # stopped (Ctrl-C) or failed: the time so far is kept for --resume
        stop.set()
        heart.join()
        save()
        raise
    stop.set()
    heart.join()
    total = so_far()
    result = {"result": value, "seconds": total["seconds"]}
    if total["attempts"] > 1:
        result["attempts"] = total["attempts"]
        result["seconds_last_attempt"] = round(time.time() - start, 1)
    result.update(release_memory())
    if before["peak_rss_mb"] > result.get("stage_peak_rss_mb", 0):
        result["stage_peak_rss_mb"] = before["peak_rss_mb"]  # an earlier attempt's
        result["peak_rss_mb"] = max(result.get("peak_rss_mb", 0), before["peak_rss_mb"])
    done.write_text(json.dumps(result, default=str))
    partial.unlink(missing_ok=True)
    return result


_PEAK_MB = 0  # the process's peak resident memory before the last reset, in MB


def reset_peak_memory() -> None:
    """Start a stage's peak afresh: Linux's high-water mark (VmHWM) is reset to the resident
    size now (`/proc/self/clear_refs`), the peak so far kept here. No-op elsewhere."""
    global _PEAK_MB
    _PEAK_MB = max(_PEAK_MB, _memory_status().get("peak_rss_mb", 0))
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def release_memory() -> dict:
    """Free what a finished stage left (its trainer, model and rollout objects are garbage once
    it returns) and hand freed heap back to the OS; the process's resident and peak memory
    after it, in MB (Linux), so a run's report shows where memory went."""
    import gc

    from training.runs import trim_heap

    gc.collect()
    trim_heap()  # glibc keeps what the stage's threads freed
    memory = _memory_status()
    if "peak_rss_mb" in memory:
        # The stage's own peak (since `reset_peak_memory`), and the process's so far.
        memory["stage_peak_rss_mb"] = memory["peak_rss_mb"]
        memory["peak_rss_mb"] = max(_PEAK_MB, memory["peak_rss_mb"])
    return memory


def _memory_status() -> dict:
    """The process's resident memory now (`rss_mb`) and its high-water mark (`peak_rss_mb`)."""
    status = Path("/proc/self/status")
    if not status.is_file():
        return {}
    fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
    return {key: round(int(fields[name].split()[0]) / 1024)
            for key, name in (("rss_mb", "VmRSS"), ("peak_rss_mb", "VmHWM")) if name in fields}


def run_pipeline(config: TrainConfig, out: Path, resume: bool = False) -> dict:
    from training.rl.grpo import run_grpo
    from training.runs import allocator_args, bound_allocator, set_cpu_threads
    from training.sft.tiny_model import build_tiny_model
    from training.sft.trainer import run_sft

    bound_allocator(**allocator_args(config.run))  # before the stages' threads start
    config = with_eval_families(config)
    check_shown_tools(config)
    check_eval_engine(config)
    out.mkdir(parents=True, exist_ok=True)
    if not resume:
        drop_eval_journals(out)
    set_cpu_threads(config.run.cpu_threads)
    started = time.time()
    model_dir = base_folder(config, out)
    stages: dict[str, Any] = {}
    if config.model.build_tiny:
        size = config.model.tiny_size
        stages["model"] = _stage(
            out,
            "model",
            resume,
            lambda: str(build_tiny_model(model_dir, seed=config.run.seed, size=size)),
        )
    stages["demos"] = _stage(out, "demos", resume, lambda: collect_demos(config, out, model_dir))
    if config.eval.untrained:
        stages["eval_untrained"] = _stage(
            out,
            "eval_untrained",
            resume,
            lambda: evaluate_model(config, model_dir, None, "untrained", out),
        )
    sft_cfg = config.model_copy(
        update={"sft": config.sft.model_copy(update={"data": [str(out / "demos.parquet")]})}
    )
    stages["sft"] = _stage(
        out, "sft", resume, lambda: _sft(run_sft, sft_cfg, out, model_dir, resume)
    )
    # After a full fine-tune the SFT model is the base GRPO puts a fresh LoRA on; after a LoRA
    # SFT, GRPO keeps training the SFT adapter on the original base.
    if config.sft.full_finetune:
        sft_base, sft_adapter = out / "sft" / "model", None
    else:
        sft_base, sft_adapter = model_dir, out / "sft" / "adapter"
    if config.sft.select_checkpoint is not None:
        stages["select_sft"] = _stage(
            out, "select_sft", resume, lambda: select_sft_checkpoint(config, out, model_dir)
        )
        chosen = stages["select_sft"]["result"]["chosen"]
        sft_base = Path(chosen["base"])
        sft_adapter = Path(chosen["adapter"]) if chosen["adapter"] else None
    stages["eval_sft"] = _stage(
        out, "eval_sft", resume, lambda: evaluate_model(config, sft_base, sft_adapter, "sft", out)
    )
    stages["grpo"] = _stage(
        out, "grpo", resume, lambda: _grpo(run_grpo, config, out, sft_base, sft_adapter, resume)
    )
    stages["eval_grpo"] = _stage(
        out,
        "eval_grpo",
        resume,
        lambda: evaluate_model(config, sft_base, out / "grpo" / "adapter", "grpo", out),
    )
    if config.eval.held_out_per_family:
        held = held_out_config(config)
        for name, base, adapter in (("sft", sft_base, sft_adapter),
                                    ("grpo", sft_base, out / "grpo" / "adapter")):  # fmt: skip
            stages[f"held_out_{name}"] = _stage(
                out, f"held_out_{name}", resume,
                lambda b=base, a=adapter, n=name: evaluate_model(held, b, a, f"held-out-{n}", out),
            )  # fmt: skip
    if config.eval.long is not None:
        stages["eval_long_grpo"] = _stage(
            out, "eval_long_grpo", resume,
            lambda: evaluate_model(long_config(config), sft_base, out / "grpo" / "adapter",
                                   "long-grpo", out),
        )  # fmt: skip
    report = build_report(config, out, stages, time.time() - started)
    (out / "report.json").write_text(json.dumps(report, indent=1))
    (out / "report.md").write_text(report["summary"] + "\n")
    return report


def check_eval_engine(config: TrainConfig) -> None:
    """`eval.variant: fast` runs the eval stages in llama.cpp: say so before the first stage,
    not hours later at the first eval, when it is not installed."""
    if config.eval.variant != "fast":
        return
    from agents.policies.llamacpp_policy import llama_cpp_available

    if not llama_cpp_available():
        from tools.cli.exits import UserError

        raise UserError("eval.variant: fast runs the eval stages in llama.cpp, which is not "
                        "installed: `make fast` builds it (~4 min), or set eval.variant: standard")


def base_folder(config: TrainConfig, out: Path) -> Path:
    """The base model's folder: the tiny one built into the run, a folder, or a registered
    name (the packaged SmolLM2 is built from its wheel on first use)."""
    if config.model.build_tiny:
        return Path(config.model.path) if config.model.path else out / "model"
    from agents import resolve_model

    return Path(resolve_model(config.model.path).name)


def with_eval_families(config: TrainConfig) -> TrainConfig:
    """`eval.families` empty means every training family (as `demos` and `grpo.tasks` read
    an empty list): written out, so every stage and the report name them."""
    if config.eval.families:
        return config
    from training.tasks.base import held_out_families
    from training.tasks.families import FAMILIES

    held = set(held_out_families())
    spec = config.eval.model_copy(update={"families": [f for f in FAMILIES if f not in held]})
    return config.model_copy(update={"eval": spec})


def long_config(config: TrainConfig) -> TrainConfig:
    """The small long-task eval (`eval.long`, levels 4-5 on test seeds, seen phrasings)."""
    long = config.eval.long
    spec = config.eval.model_copy(update={
        "families": long.families or config.eval.families, "levels": long.levels,
        "split": "test", "per_family": long.per_family, "max_steps": long.max_steps,
        "phrasing": "seen"})  # fmt: skip
    return config.model_copy(update={"eval": spec})


def held_out_config(config: TrainConfig) -> TrainConfig:
    """The eval of the held-out families (`eval.held_out_families`, default every family the
    registry holds out) on their test seeds. Each task shows its family's declared toolbox
    (`tools: None`), by the rule every family's prompts follow (training/tasks/toolbox.py): no
    list is written for them by hand, and none is derived from their solutions."""
    families = config.eval.held_out_families or held_out_families()
    spec = config.eval.model_copy(update={"families": families, "split": "test",
                                          "levels": config.eval.held_out_levels,
                                          "per_family": config.eval.held_out_per_family})  # fmt: skip
    return config.model_copy(update={"eval": spec, "tools": None})


def check_shown_tools(config: TrainConfig, seeds_per_bucket: int = 8) -> None:
    """Refuse a `tools:` list that hides a tool the oracle needs for the pipeline's tasks.

    Demonstrations would then teach calls to a tool the prompt never shows. (The held-out
    families' episodes show their declared toolboxes, which tests/test_toolbox.py keeps
    covering their solutions.) Checked on the demo and eval tasks and on the first seeds of
    each GRPO (family, level), before anything runs.
    """
    from training.tasks import get_task
    from training.tasks.sampling import demo_task_ids, grpo_sampler
    from training.train_config import ConfigError

    if config.tools is None:
        return
    ids = demo_task_ids(config.demos)
    ids += task_ids(
        config.eval.families, config.eval.levels, config.eval.split, config.eval.per_family
    )
    grpo = grpo_sampler(config.grpo)
    seeds = list(grpo.seeds)[:seeds_per_bucket]
    ids += [f"{b}:{s}" for b in grpo.buckets for s in seeds]
    missing: dict[str, set[str]] = {}
    for task_id in dict.fromkeys(ids):
        for step in get_task(task_id).oracle:
            if step["tool"] not in config.tools:
                missing.setdefault(step["tool"], set()).add(task_id.split(":")[0])
    if missing:
        needs = "; ".join(f"{t} (for {', '.join(sorted(f))})" for t, f in sorted(missing.items()))
        raise ConfigError(
            f"tools: the oracle's solutions need tools the list does not show: {needs}. "
            "Add them to `tools:` or drop those families."
        )


def _sft(run_sft, cfg: TrainConfig, out: Path, model_dir: Path, resume: bool) -> dict:
    r = run_sft(cfg, out / "sft", resume=resume, model_path=model_dir)
    return {"steps": r.steps, "final_loss": r.final_loss}


def _grpo(
    run_grpo, cfg: TrainConfig, out: Path, model_dir: Path, adapter: Path | None, resume: bool
) -> dict:
    r = run_grpo(cfg, out / "grpo", resume=resume, adapter=adapter, model_path=model_dir)
    return {"steps": r.steps, "crash_retries": r.crash_retries}


def phrasing_names(phrasing: str) -> list[str]:
    """The phrasings an eval with `eval.phrasing` scores."""
    return ["seen", "unseen"] if phrasing == "both" else [phrasing]


def reward_curve(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    return [
        {"step": r["step"], "reward": r["reward"], "success": r.get("reward/success")}
        for r in rows
        if "reward" in r
    ]


def stage_memory(stages: dict) -> dict:
    """Each stage's own peak resident memory in MB (Linux; a stage run by an older version
    recorded only the peak so far), and the run's."""
    return {
        "stage_peak_rss_mb": {k: v.get("stage_peak_rss_mb", v.get("peak_rss_mb"))
                              for k, v in stages.items()},  # fmt: skip
        "peak_rss_mb": max((v.get("peak_rss_mb") or 0 for v in stages.values()), default=0),
    }


def build_report(config: TrainConfig, out: Path, stages: dict, seconds: float) -> dict:
    from training.eval.stats import difference, summary_text

    entries = {name: stages[f"eval_{name}"]["result"] for name in ("untrained", "sft", "grpo")
               if f"eval_{name}" in stages}  # fmt: skip
    report = {
        "config": config.name,
        "held_out": {
            "split": config.eval.split,
            "families": config.eval.families,
            "levels": config.eval.levels,
            "per_family": config.eval.per_family,
        },
        "stages": entries,
        "grpo_vs_sft_mean_reward": difference(entries["sft"], entries["grpo"]),
        "training": {k: stages[k] for k in ("demos", "sft", "select_sft", "grpo") if k in stages},
        "grpo_reward_curve": reward_curve(out / "grpo"),
        # Sum of the stages' own times, so a resumed pipeline reports what the stages cost.
        "wall_seconds": round(sum(v.get("seconds", 0.0) for v in stages.values()), 1),
        "stage_seconds": {k: v.get("seconds") for k, v in stages.items()},
        **stage_memory(stages),
    }
    if "untrained" in entries:
        report["sft_vs_untrained_mean_reward"] = difference(entries["untrained"], entries["sft"])
    if len(config.eval.levels) > 1:
        # Where more than one call decides the reward: the levels above the first, pooled,
        # for each phrasing apart (training/tasks/wording.py).
        above = [lv for lv in config.eval.levels if lv > 1]
        report["grpo_vs_sft_by_phrasing"] = {
            "levels": above,
            **{name: difference(entries["sft"], entries["grpo"], levels=above, phrasing=name)
               for name in phrasing_names(config.eval.phrasing)},
        }  # fmt: skip
    if "eval_long_grpo" in stages:
        report["long"] = {"stage": "grpo", **stages["eval_long_grpo"]["result"]}
    if "held_out_sft" in stages and "held_out_grpo" in stages:
        held = {n: stages[f"held_out_{n}"]["result"] for n in ("sft", "grpo")}
        families = held_out_config(config).eval.families
        report["held_out_family"] = {
            "family": ", ".join(families),  # one name when one family is held out
            "families": families,
            "tools": {f: list(family_tools(f)) for f in families},  # each its declared toolbox
            "stages": held,
            "grpo_vs_sft_mean_reward": difference(held["sft"], held["grpo"]),
        }
    report["summary"] = summary_text(report)
    return report
