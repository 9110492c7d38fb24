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
    """A data dir holding `smollm2-135m-instruct` built from the installed wheel (~20-35 s,
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
