"""`modelwright run` (one episode) and `modelwright eval` (a policy over a split, some
families or a benchmark folder; `--compare` for the regression table).

Module-level imports stay light: the loop, the tool runtime and policies load inside the
commands.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from tools.cli.exits import ExitCode, fail, one_line

ORACLE_POLICIES = ("oracle", "reference")
OBSERVE = ("auto", "changed", "always", "text", "never")  # LoopConfig.observe
# `run --policy hf`: the first reply must begin a tool call within this many tokens (a goal
# the local model cannot act on ends in seconds, not after 256 tokens of prose).
PROSE_STOP_TOKENS = 12


def _check_model(policy: str, model: str | None) -> None:
    """The hf policy loads a local folder or a registered model (`modelwright models list`):
    say at once when it is neither (the packaged base is built here on first use)."""
    if policy.partition(":")[0] == "hf" and model:
        from agents import resolve_model

        resolve_model(model, probe=False)


def _policy_options(
    base_url, model, api_key_env, temperature, max_tokens, timeout, device, adapter=None,
    variant="standard",
) -> dict:
    return {
        "adapter": adapter,
        "variant": variant,
        "base_url": base_url,
        "model": model,
        "api_key_env": api_key_env,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "timeout_s": timeout,
        "device": device,
    }


def _source(policy: str) -> str:
    return "oracle" if policy.partition(":")[0] in ORACLE_POLICIES else "agent"


def _open_store(no_record: bool, data_dir: Path | None):
    if no_record:
        return None
    from agents.store import Store

    return Store(data_dir)


def _write_out(out: Path, record: dict, session) -> None:
    """Keep the renders and the final scene of an episode in `out`, through the outbox: the
    frames are a worker's PNGs (re-encoded), the exports files of its scratch (no links)."""
    from tools.errors import ToolError
    from tools.trust.outbox import Outbox

    result = record["_result"]
    box = Outbox(out)
    written = []
    if result.initial_frame:
        written.append(box.write("step_start.png", result.initial_frame).name)
    for step in result.steps:
        if step.frame:
            written.append(box.write(f"step_{step.index:03d}.png", step.frame).name)
    for fmt in ("blend", "glb"):
        name = f"final.{fmt}"
        r = session.call("export", {"format": fmt, "path": name})
        if r.ok:
            try:
                written.append(box.take(session.workspace, name).name)
            except ToolError:
                pass
    summary = {k: v for k, v in record.items() if k != "_result"}
    summary["files"] = sorted([*written, "summary.json"])
    box.write_json("summary.json", summary, indent=2, default=str)


def _boot_workers() -> None:
    """Start the policy's worker and the verifier's clean one now, side by side: each takes
    seconds (Blender's import), which the command's own imports and the episode overlap."""
    from tools import default_pool
    from training.tasks.verifier import boot_for_one_episode

    default_pool().boot()
    boot_for_one_episode()


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run(
        task: str = typer.Option(..., "--task", help="Task id family:level:seed."),
        policy: str = typer.Option(
            "oracle", "--policy", help="none | oracle | openai | hf | script:FILE.jsonl"
        ),
        base_url: str = typer.Option(None, help="OpenAI-compatible endpoint (openai policy)."),
        model: str = typer.Option(None, help="Model name (openai) or local path (hf)."),
        api_key_env: str = typer.Option(
            None, help="Env var holding the API key (default OPENAI_API_KEY)."
        ),
        temperature: float = typer.Option(None, help="Sampling temperature."),
        max_tokens: int = typer.Option(None, help="Tokens per reply."),
        timeout: float = typer.Option(None, help="Seconds per model request."),
        device: str = typer.Option(None, help="Device for the hf policy."),
        adapter: str = typer.Option(None, help="LoRA adapter folder or name for the hf policy "
                                            "(default with no --model: the shipped one)."),
        variant: str = typer.Option("standard", "--variant",
                                    help="hf: standard | fast (on a CPU: llama.cpp q8_0 where "
                                         "llama-cpp-python is installed, else int8; docs/MODELS.md)."),
        prose_stop_tokens: int = typer.Option(
            PROSE_STOP_TOKENS, "--prose-stop-tokens", min=0,
            help="hf: end the episode when the first reply's first N tokens begin no tool "
                 "call (0: off)."),
        max_steps: int = typer.Option(None, help="Step budget (default: the task's)."),
        out: Path = typer.Option(None, "--out", help="Keep renders and the final scene here."),
        no_record: bool = typer.Option(False, "--no-record", help="Do not record the episode."),
        data_dir: Path = typer.Option(None, "--data-dir", help="Trajectory store folder."),
        as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    ) -> None:
        """Run one episode of a task with a policy and print its summary. Exits 1 when the
        episode did not solve the task, 3 when the policy could not go on."""
        from agents import LoopConfig, PolicyError
        from training.eval.harness import task_spec
        from training.eval.policies import make_policy

        spec = task_spec(task)  # a TaskError is the user's (exit 2, see tools/cli/exits.py)
        _check_model(policy, model)
        options = _policy_options(
            base_url, model, api_key_env, temperature, max_tokens, timeout, device, adapter,
            variant,
        )
        options["prose_stop_tokens"] = prose_stop_tokens
        try:
            agent = make_policy(policy, **options)
        except (ValueError, PolicyError) as exc:  # how it was asked for: the user's to fix
            fail(str(exc))
        config = LoopConfig(max_steps=max_steps or spec.budget)
        spec.budget = config.max_steps
        store = _open_store(no_record, data_dir)
        _boot_workers()  # the input is good: they start while the rest is imported
        import training.tasks.checks.verdict  # noqa: F401  (the checker's imports: now, not at the end)
        from tools import ToolSession
        from training.eval.harness import run_spec

        with ToolSession() as session:
            record = run_spec(  # a PolicyError: the model or its server is unavailable (3)
                spec, agent, session, config=config, store=store, source=_source(policy)
            )
            if out is not None:
                _write_out(out, record, session)
        summary = {k: v for k, v in record.items() if k != "_result"}
        if as_json:
            typer.echo(json.dumps(summary, default=str))
        else:
            verdict = "success" if summary["success"] else "failure"
            typer.echo(
                f"{summary['task']}: {verdict} (reward {summary['reward']:.3f}, {summary['steps']} steps, "
                f"{summary['tool_errors']} tool errors, status {summary['status']})"
            )
            if summary.get("error"):
                typer.echo(f"error: {one_line(summary['error'])}", err=True)
        if summary["status"] == "fatal":  # the policy could not go on: its server, its model
            raise typer.Exit(int(ExitCode.UNAVAILABLE))
        if not summary["success"]:  # the episode ran and did not solve the task
            raise typer.Exit(int(ExitCode.FAILED))

    @app.command("eval")
    def eval_(
        policy: str = typer.Option(None, "--policy", help="Policy to evaluate (see `run`)."),
        split: str = typer.Option("test", help="train | validation | test | heldout."),
        families: str = typer.Option(None, help="Comma-separated families (default: all; "
                                     "'training': every family not held out)."),
        benchmark: Path = typer.Option(None, help="Folder of external benchmark cases."),
        per_family: int = typer.Option(10, help="Tasks per family."),
        levels: str = typer.Option(None, help="Comma-separated levels taken in turn (default: "
                                   "each family's own, 1-5); a pipeline's `eval.levels`."),
        workers: int = typer.Option(1, help="Episodes in parallel (one tool worker each)."),
        base_url: str = typer.Option(None, help="OpenAI-compatible endpoint (openai policy)."),
        model: str = typer.Option(None, help="Model name (openai) or local path (hf)."),
        api_key_env: str = typer.Option(None, help="Env var holding the API key."),
        temperature: float = typer.Option(None, help="Sampling temperature."),
        max_tokens: int = typer.Option(None, help="Tokens per reply."),
        timeout: float = typer.Option(None, help="Seconds per model request."),
        device: str = typer.Option(None, help="Device for the hf policy."),
        adapter: str = typer.Option(None, help="LoRA adapter folder for the hf policy."),
        variant: str = typer.Option("standard", "--variant",
                                    help="hf: standard | fast (on a CPU: llama.cpp q8_0 where "
                                         "llama-cpp-python is installed, else int8; docs/MODELS.md)."),
        quant: str = typer.Option("q8_0", "--quant",
                                  help="--variant fast in llama.cpp: q8_0 | f16 | bf16 | f32 (f32: the "
                                       "standard variant's float32 turns; a pipeline's eval "
                                       "stages run it)."),
        max_steps: int = typer.Option(None, help="Step budget cap (default: each task's)."),
        no_record: bool = typer.Option(False, "--no-record", help="Do not record the episodes."),
        data_dir: Path = typer.Option(None, "--data-dir", help="Trajectory store folder."),
        json_out: Path = typer.Option(None, "--json", help="Write the report here ('-': stdout)."),
        compare: tuple[Path, Path] = typer.Option(
            None, "--compare", help="OLD.json NEW.json: print the regression table."
        ),
        seed: int = typer.Option(0, help="Base seed for the episode scheduler."),
        cluster: str = typer.Option(
            None, "--cluster", help="Run on a Ray cluster: auto or ADDRESS (`cluster up`)."
        ),
        phrasing: str = typer.Option(
            "seen", "--phrasing", help="seen | unseen | both: the goals' wordings (unseen: "
            "held-out phrasings no training run shows); both reports the two apart."),
        observe: str = typer.Option(
            "auto", "--observe", help="When to render the scene for the model: auto (not for "
            "a text model, which reads the scene listing alone) | changed | always | text | never."),
    ) -> None:
        """Evaluate a policy and report per-family success, reward, steps, errors, tokens, latency."""
        from training.eval.harness import compare as compare_reports
        from training.eval.harness import format_table, load_report

        if compare:
            reports = []
            for path in compare:
                try:
                    reports.append(load_report(path))
                except OSError as exc:
                    fail(f"{path}: {exc.strerror}; write a report with `modelwright eval --json FILE`")
                except ValueError as exc:  # bad JSON, or JSON that is not a report
                    fail(f"{path} is not an eval report ({exc}); write one with "
                         "`modelwright eval --json FILE`")
            rows = compare_reports(*reports)
            typer.echo(format_table(rows))
            return
        if policy is None:
            fail("--policy is required (or --compare OLD.json NEW.json)")
        from agents.models.variants import FAST_QUANTS

        if observe not in OBSERVE:
            fail(f"--observe {observe}: one of {' | '.join(OBSERVE)}")
        if quant not in FAST_QUANTS:
            fail(f"--quant {quant}: a fast variant is made in {' | '.join(FAST_QUANTS)}")
        if quant != "q8_0" and variant != "fast":
            fail("--quant chooses the fast variant's format: add --variant fast")
        options = _policy_options(base_url, model, api_key_env, temperature, max_tokens, timeout,
                                  device, adapter, variant)  # fmt: skip
        options["quant"] = quant
        chosen_levels = None
        if levels is not None:
            try:
                chosen_levels = [int(x) for x in levels.split(",") if x.strip()]
            except ValueError:
                fail(f"--levels {levels}: give level numbers, e.g. --levels 1,2,3")
        _run_eval(
            policy, split, families, benchmark, per_family, workers,
            options,
            max_steps, no_record, data_dir, json_out, seed, cluster, phrasing, chosen_levels,
            observe,
        )  # fmt: skip


def _cluster_backend(address: str, policy: str, store):
    """The ray backend on the cluster at `address`, or a one-line reason why not."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        fail("--cluster needs Ray: pip install 'modelwright[cluster]'")
    if policy.partition(":")[0] == "hf":
        fail("the hf policy runs in this process: evaluate it without --cluster, or serve it "
             "(`modelwright serve`) and use --policy openai on the cluster")
    from training.eval.cluster import RayBackend

    try:
        return RayBackend(address, store=store)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        fail(f"no usable Ray cluster at {address}: {one_line(str(exc))}; start one with "
             "`modelwright cluster up`")


def shared_model_policies(built, specs, workers: int, max_steps: int | None):
    """An in-process model policy (`hf`) for every episode without loading it again: each
    episode gets a fresh policy on `built`'s weights. With several workers and greedy decoding:
    where a turn can start from the cache of the episode's previous one (`reuse_kv`: a float32
    text model), each episode's turns run as they come, side by side on their own threads
    (`run_alongside`), the cores shared among them: each turn runs only its new tokens and
    overlaps the others' turns, tool calls and scoring (benchmarks/bench_contention.py; lockstep
    batches, whose turns wait for each other and run whole prompts, made 2 workers x0.8 as
    fast as 1 once turns reused their caches); otherwise the turns of each wave of
    `workers` episodes are generated as one batch (a decode step of two rows costs about one's
    on a CPU). Either way a turn's tokens do not depend on timing. torch's threads are chosen
    for the machine as it is. Returns the factory and {"batcher", "cpu"} for the report."""
    import copy

    from agents.models.cpu import ThreadGovernor, usable_cores
    from agents.policies.hf_policy import HFPolicy, KVStore, LockstepBatcher

    if getattr(built, "variant", None) == "fast":  # llama.cpp: a context per turn at once
        threads = max(1, built.llama.threads // workers)
        built.llama.set_threads(threads)
        return built.sibling, {"batcher": None, "cpu": {"threads": threads, "engine": "llama.cpp",
                                                          "turns_alongside": workers > 1}}
    cpu = None
    # The episodes' turn caches in one store: each starts from the system + tools prefix
    # another left (`reuse_kv`; batched turns run whole prompts).
    kv = KVStore(capacity=workers + 1)
    alongside = workers > 1 and built.turns_stand_alone()
    if str(getattr(built.model, "device", "cpu")) == "cpu":
        # turns side by side: the free cores shared among them (one thread each on 2 cores:
        # a decode step of this size gains nothing from a second thread, bench_contention.py)
        governor = ThreadGovernor(cap=max(1, usable_cores() // workers) if alongside else None)
        governor.apply()
        cpu = governor.record()
        cpu["turns_alongside"] = alongside
    batcher = None
    keys = [s.task_id for s in specs]
    if workers > 1 and not built.config.temperature and all(keys) and not alongside:
        turns = max_steps or max(s.budget for s in specs)
        batcher = LockstepBatcher([keys[i : i + workers] for i in range(0, len(keys), workers)],
                                  max_turns=turns)  # fmt: skip

    def factory():
        one = HFPolicy(copy.copy(built.config), model=built.model, processor=built.processor)
        if built.config.variant != "fast":  # its activations' int8 scales: its own cache only
            one.share_kv(kv)
        if batcher is not None:
            one.join_lockstep(batcher)
        if alongside:
            one.run_alongside()
        return one

    return factory, {"batcher": batcher, "cpu": cpu}


def eval_families(text: str | None) -> list[str] | None:
    """`--families`: comma-separated names, None for all, or `training`: every family not held
    out (what a training run's eval scores: `train pipeline`'s report)."""
    chosen = [f.strip() for f in text.split(",") if f.strip()] if text else None
    if chosen == ["training"]:
        from training.tasks import FAMILIES

        return [f for f, fam in FAMILIES.items() if not fam.held_out]
    return chosen


def _run_eval(policy, split, families, benchmark, per_family, workers, options, max_steps,
              no_record, data_dir, json_out, seed, cluster=None, phrasing="seen",
              levels=None, observe="auto") -> None:  # fmt: skip
    from agents import LoopConfig, PolicyError
    from training.eval.harness import evaluate, task_spec
    from training.eval.policies import make_policy
    from training.tasks import split_ids

    _check_model(policy, options["model"])
    try:
        skipped: list[dict] = []
        if benchmark is not None:
            from training.eval.harness import benchmark_specs

            specs, skipped = benchmark_specs(benchmark)
            for case in skipped:
                typer.echo(f"skipped case {case['case']}: {case['reason']}", err=True)
        else:
            chosen = eval_families(families)
            kinds = ("seen", "unseen") if phrasing == "both" else (phrasing,)
            specs = [task_spec(i) for p in kinds
                     for i in split_ids(split, per_family=per_family, families=chosen, phrasing=p,
                                        levels=levels)]
        if cluster is None and policy.partition(":")[0] == "hf":  # they boot as it loads
            from training.eval.spec import start_templates_soon

            start_templates_soon()  # after the tasks are known: a typo there exits at once
        built = make_policy(policy, **options)  # fail fast on a bad spec, before workers start
    except (ValueError, PolicyError) as exc:  # TaskError, UnknownPolicyError, bad values: 2
        fail(str(exc))
    if not specs:
        fail("nothing to evaluate")
    config = LoopConfig(max_steps=max_steps, observe=observe) if max_steps else LoopConfig(observe=observe)
    factory, shared = (lambda: make_policy(policy, **options)), None
    if cluster is None and policy.partition(":")[0] == "hf":  # in this process: load it once
        factory, shared = shared_model_policies(built, specs, workers, max_steps)
    store = _open_store(no_record, data_dir)
    from tqdm import tqdm

    backend = None
    if cluster is not None:
        if benchmark is not None:
            fail("a benchmark folder runs on this machine only (its cases are not in the task "
                 "registry); leave out --cluster")
        backend = _cluster_backend(cluster, policy, store)
    bar = tqdm(total=len(specs), desc=f"eval {policy}", unit="ep", file=sys.stderr)
    wins = [0]

    def progress(record: dict, done: int, total: int) -> None:
        if shared is not None and shared["batcher"] is not None:  # its wave stops waiting
            shared["batcher"].finish(record.get("task", ""))
        wins[0] += bool(record["success"])
        if backend is None:
            bar.set_postfix(success=f"{wins[0]}/{done}")
        else:  # progress across nodes: live ones, episodes in flight, sent again
            st = backend.status()
            alive = sum(1 for n in st.nodes if n["alive"])
            bar.set_postfix(success=f"{wins[0]}/{done}", nodes=f"{alive}/{len(st.nodes)}",
                            running=st.running, retried=st.retried)  # fmt: skip
        bar.update(1)

    from training.eval.requests import PolicySpec

    try:
        report = evaluate(
            specs, None if backend else factory, workers=workers,
            config=config, store=store, source=_source(policy), progress=progress, seed=seed,
            backend=backend, policy_spec=PolicySpec(policy, options),
        )  # fmt: skip
    finally:
        bar.close()  # before any line about why it stopped (Ctrl-C, SIGTERM): that one is last
        if backend is not None:
            backend.close()
    report["policy"] = policy
    report["workers"] = workers
    if shared is not None:
        report["cpu"] = shared["cpu"]
        if shared["batcher"] is not None:
            report["lockstep_batches"] = [len(b) for b in shared["batcher"].batches]
    if backend is not None:
        report["backend"] = {"name": "ray", "nodes": len(backend.status().nodes),
                             "retried": backend.status().retried}  # fmt: skip
    report["skipped"] = skipped
    text = json.dumps(report, indent=2, default=str)
    if json_out is None or str(json_out) == "-":
        typer.echo(text)
    else:
        from tools.trust.outbox import Outbox

        Outbox(json_out.parent).save_text(json_out.name, text)
    o = report["overall"]
    typer.echo(
        f"{policy}: success {100 * o['success_rate']:.1f}% over {o['episodes']} episodes"
        + "".join(f", {k} phrasings {100 * v['overall']['success_rate']:.1f}%"
                  for k, v in report.get("phrasings", {}).items()) + ", "
        f"mean reward {o['mean_reward']:.3f}, tool error rate {o['tool_error_rate']:.3f}",
        err=True,
    )
