"""Shared test fixtures. Append new fixtures; do not rewrite others'."""

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run and never time an example: a loaded
# machine must not turn a slow example into a failure, nor a new seed into a new red run.
settings.register_profile("modelwright", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("modelwright")


# --- tiny local vision-language model (training/sft/tiny_model.py) -------------------------------
@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny random Qwen3-VL built offline once per test session (~6 s); treat it as read-only."""
    from training.sft.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=0)


@pytest.fixture(scope="session")
def tiny_text_dir(tiny_model_dir, tmp_path_factory):
    """A random 2-layer Llama (float32, text only: its turns reuse their KV cache) over the
    tiny model's tokenizer and tool template, saved as a model folder; read-only."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir), local_files_only=True)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=4096, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id)  # fmt: skip
    out = tmp_path_factory.mktemp("tiny-text")
    LlamaForCausalLM(config).eval().save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


# --- tool runtime (tools/) ------------------------------------------------------------------
import os  # noqa: E402

os.environ.setdefault("MODELWRIGHT_TEST_HOOKS", "1")  # lets tests crash and hang workers on purpose


@pytest.fixture(scope="session")
def worker_pool():
    """One warm pool of sandboxed Blender+CadQuery workers shared by the whole test session."""
    from tools import WorkerPool

    pool = WorkerPool(size=1, test_hooks=True)
    yield pool
    pool.close()


@pytest.fixture
def session(worker_pool):
    """A fresh tool session (empty scene) on the shared pool; released after the test."""
    from tools import ToolSession

    s = ToolSession(worker_pool, deadline_s=30)
    yield s
    s.close()


@pytest.fixture
def one_torch_thread():
    """torch on one thread for the test: on a loaded 2-core machine its default 2 threads spin
    against each other (~8x slower). Model tests opt in with `pytestmark`."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# --- the packaged base model (agents/models/registry.py) -----------------------------------------------
@pytest.fixture(scope="session")
def base_data_dir(tmp_path_factory, worker_id):
    """A data dir holding `smollm2-135m-instruct` built from the installed wheel (~10-20 s,
    once per run: the xdist processes share one, the first builds it under a file lock). Point
    MODELWRIGHT_DATA_DIR (or --data-dir) at it to name the base; treat its models/ as
    read-only."""
    from filelock import FileLock

    from agents.models.registry import ensure_base

    if worker_id == "master":  # no xdist: this run's own folder
        data_dir = tmp_path_factory.mktemp("base-data")
        ensure_base(data_dir)
        return data_dir
    data_dir = tmp_path_factory.getbasetemp().parent / "base-data"  # this run's, not the last's
    with FileLock(str(data_dir) + ".lock"):
        ensure_base(data_dir)
    return data_dir


@pytest.fixture(scope="module")
def task_session(worker_pool):
    """One tool session per module for a task module's `verify_task` cases and tool checks
    (each attempt resets it); a generous per-call deadline for a loaded machine."""
    from tools import ToolSession

    s = ToolSession(worker_pool, deadline_s=120)
    yield s
    s.close()


# --- each file's seconds, for finding what makes the suite long ------------------------------
# The xdist controller sums every test's setup, call and teardown by file and writes them, longest
# first, to .pytest_cache/durations.json at the end of a run. (Running the long files first was
# tried: the two processes already end within a minute of each other, and with the Ray cluster,
# the real base and the studio fine-tune all at the start the run took 38.6 min instead of 34.5.)
import json  # noqa: E402
from pathlib import Path  # noqa: E402

_RECORD = Path(__file__).resolve().parents[1] / ".pytest_cache" / "durations.json"
_seconds: dict[str, float] = {}


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_runtest_logreport(report):
    _seconds[_file_of(report.nodeid)] = _seconds.get(_file_of(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput") or not _seconds:  # the xdist controller writes it
        return
    try:
        _RECORD.parent.mkdir(exist_ok=True)
        ranked = dict(sorted(((f, round(s, 1)) for f, s in _seconds.items()), key=lambda kv: -kv[1]))
        _RECORD.write_text(json.dumps(ranked, indent=1) + "\n")
    except OSError:
        pass


# --- test tiers: `make test-fast` runs the `fast` tests, `make test` all of them ------------------
# A test is `heavy` when it boots what takes seconds to minutes: a sandboxed Blender/CadQuery
# worker, a Qt window, an X server, Ray, or a model (the tiny one trains, the real base loads).
# That is read from the fixtures it uses (HEAVY_FIXTURES) and, for the tests that start such a
# thing in their own body or through a child process, from HEAVY_FILES. Every other test is
# `fast`: parsers, rewards on fixture scenes, the store, configs, CLI errors.
# A fast test that starts a worker, Ray or an X server anyway (itself or through a child Python)
# or opens a Qt application fails and says so: add it to HEAVY_FILES (or use a heavy fixture),
# and the fast tier stays fast as tests are added. tests/test_test_tiers.py checks the split.
import sys  # noqa: E402
import tempfile  # noqa: E402

from support.tier_guard import sitecustomize as _tier_guard  # noqa: E402

HEAVY_FIXTURES = frozenset({
    "worker_pool", "session", "task_session", "hostile_session", "fresh_session",  # workers
    "ordinary_user",  # the app run as another user (tests/security/conftest.py): its workers
    "qapp", "qtbot", "xvfb_display",  # Qt, an X server
    "tiny_model_dir", "base_data_dir",  # a model: trained from scratch, or the real base
})  # fmt: skip

# Tests that start a worker, Ray or a model in their own body or through a child process (the
# CLI running episodes or tools, a training script), or that take tens of seconds on their own:
# a file, a test (every parametrization of it), or a test id's prefix ("...[tools run-2]").
_W = "boots Blender/CadQuery workers"
HEAVY_FILES = {
    "tests/security/test_jail_disk.py": _W,
    "tests/test_cli_errors.py::test_sigterm_stops_an_eval_in_one_line_and_keeps_its_episodes": _W,
    "tests/security/test_jail_escape.py": _W,  # its module fixture boots workers for whichever test runs first
    "tests/security/test_jail_identity.py": _W,
    "tests/security/test_jail_memory.py": _W,
    "tests/security/test_jail_unprivileged.py": _W,
    "tests/security/test_trust_episodes.py": _W,
    "tests/security/test_trust_files.py::test_tools_run_refuses_links_in_its_out_folder_and_leaves_them": _W,
    "tests/security/test_trust_frames.py::test_a_forged_render_is_a_failed_call_and_the_session_goes_on": _W,
    "tests/security/test_trust_imports.py::test_scripted_drivers_on_every_id_type_are_stripped_and_not_exported": _W,
    "tests/security/test_trust_imports.py::test_drivers_planted_after_load_are_not_exported": _W,
    "tests/security/test_trust_outbox.py": _W,
    "tests/security/test_checker_jail.py::test_a_command_that_scored_exits_without_a_word_and_leaves_no_template_folder": _W,
    "tests/security/test_trust_replies.py::test_cli_tools_run_reports_hostile_replies_in_one_line_each": _W,
    "tests/security/test_trust_replies.py::test_a_frame_under_every_cap_decodes_to_under_64_mb": "decodes frames at every cap",
    "tests/security/test_trust_reports.py::test_try_lists_the_trusted_errors_under_a_worker_that_forges_them": _W,
    "tests/security/test_verifier_forging.py": _W,
    "tests/test_agents_tinymodel.py::test_the_dev_script_builds_a_model_that_loads_and_generates": "builds a model",
    "tests/test_cli_errors.py::test_bad_input_is_one_line_naming_the_thing_and_the_documented_code[tools run-2]": _W,
    "tests/test_cli_errors.py::test_bad_input_is_one_line_naming_the_thing_and_the_documented_code[run-18]": _W,
    "tests/test_cluster_cli.py": "starts Ray and workers",
    "tests/test_episode_backend.py::test_the_local_path_never_imports_ray": _W,
    "tests/test_layering.py::test_heavy_packages_are_imported_lazily": _W,
    "tests/test_mcp.py::test_mcp_client_lists_tools_and_calls_them": _W,
    "tests/test_models.py::test_a_persons_gguf_is_converted_once_with_its_hash_recorded": "converts a model",
    "tests/test_store_crash.py::test_200_kill9_never_lose_a_committed_step_or_show_half_a_file": "200 writers killed",
    "tests/test_store_from_run.py": _W,
    "tests/test_store_replay.py": _W,
    "tests/test_studio_comodel.py": _W,
    "tests/test_studio_viewport_nodisplay.py::test_bare_modelwright_without_display_runs_offscreen_and_exits": _W,
    "tests/test_tasks_cli.py::test_tasks_try_runs_in_a_fresh_session": _W,
    "tests/test_tasks_cli.py::test_tasks_verify_sweeps_oracles_idleness_and_perturbations": _W,
    "tests/test_tasks_registry.py::test_verify_passes_a_good_checker_and_catches_a_planted_weak_one": _W,
    "tests/test_toolbox.py::test_every_familys_toolbox_covers_what_its_oracle_plans_call_at_every_level": "every family's tasks",
    "tests/test_toolbox.py::test_no_toolbox_is_the_answer_key_of_any_level": "every family's tasks",
    "tests/test_tools_faults.py": _W,
    "tests/test_tools_io.py": _W,
    "tests/test_tools_template.py": _W,
    "tests/test_tools_worker_start.py": _W,
    "tests/test_training_demos.py": _W,
    "tests/test_training_eval.py": _W,
}  # fmt: skip

_GUARD_DIR = str(Path(__file__).resolve().parent / "support" / "tier_guard")
_started: list[str] = []  # what the running fast test started, in this process
_guarding = False


def _audit(event, args):
    if _guarding:
        _tier_guard.hook(event, args, _started.append)


sys.addaudithook(_audit)


def _listed(nodeid: str) -> bool:
    return any(nodeid == key or nodeid.startswith(key) and ("[" in key or nodeid[len(key)] in "[:")
               for key in HEAVY_FILES)


def _heavy_fixture(name: str) -> bool:
    # ...and any fixture named like one that holds workers: `hostile_pool`, `roomy_session`
    return name in HEAVY_FIXTURES or name.endswith(("pool", "_session"))


def is_heavy(item) -> bool:
    return (any(_heavy_fixture(name) for name in getattr(item, "fixturenames", ()))
            or _listed(item.nodeid) or item.get_closest_marker("slow") is not None)


def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.heavy if is_heavy(item) else pytest.mark.fast)


def _qt_app():
    widgets = sys.modules.get("PySide6.QtWidgets")
    return widgets is not None and widgets.QApplication.instance() is not None


_guard_state: dict = {}


def _guard_on(item) -> None:
    """From the start of a fast test's setup (its module's fixtures too) to the end of its
    teardown: note every heavy process it, or a child Python it starts, starts."""
    global _guarding
    record = Path(tempfile.gettempdir()) / f"modelwright-tier-guard-{os.getpid()}.txt"
    record.unlink(missing_ok=True)
    _guard_state.update(record=record, qt=_qt_app(),
                        env={k: os.environ.get(k) for k in ("PYTHONPATH", "MODELWRIGHT_TIER_GUARD")})
    os.environ["MODELWRIGHT_TIER_GUARD"] = str(record)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_GUARD_DIR, _guard_state["env"]["PYTHONPATH"]) if p)
    _started.clear()
    _guarding = True


def _guard_off() -> None:
    global _guarding
    _guarding = False
    for k, v in _guard_state.pop("env", {}).items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _guard_found() -> list[str]:
    record = _guard_state.get("record")
    started = list(_started) + (record.read_text().splitlines() if record and record.exists() else [])
    if not _guard_state.get("qt", True) and _qt_app():
        started.append("a Qt application")
    return sorted(set(started))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    if item.get_closest_marker("fast") is not None:
        _guard_on(item)
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    result = yield
    if _guarding and (found := _guard_found()):
        pytest.fail(f"a `fast` test started {', '.join(found)}: it belongs to the heavy tier (use "
                    "the fixture that starts it, or list its file in HEAVY_FILES in tests/conftest.py)",
                    pytrace=False)
    return result


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        return (yield)
    finally:
        _guard_off()


# --- the packaged base named by the environment ------------------------------------------------
@pytest.fixture(scope="module")
def base_data_env(base_data_dir):
    """`base_data_dir`, with MODELWRIGHT_DATA_DIR naming it for the module's tests (what
    `make_hf()`, the CLI and the eval harness read); restored afterwards."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MODELWRIGHT_DATA_DIR", str(base_data_dir))
        yield base_data_dir
