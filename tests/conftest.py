"""Shared test fixtures. Append new fixtures; do not rewrite others'."""

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run and never time an example: a loaded
# machine must not turn a slow example into a failure, nor a new seed into a new red run.
settings.register_profile("modelwright", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("modelwright")


# --- tiny local vision-language model (agents/tinymodel.py) -------------------------------
@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny random Qwen3-VL built offline once per test session (~6 s); treat it as read-only."""
    from agents.tinymodel import build_tiny_model

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


# --- the packaged base model (agents/models.py) -----------------------------------------------
@pytest.fixture(scope="session")
def base_data_dir(tmp_path_factory):
    """A data dir holding `smollm2-135m-instruct` built from the installed wheel (~20-35 s,
    once per session). Point MODELWRIGHT_DATA_DIR (or --data-dir) at it to name the base;
    treat its models/ as read-only."""
    from agents.models import ensure_base

    data_dir = tmp_path_factory.mktemp("base-data")
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


# --- the order files run in under xdist (Makefile: --dist loadfile --no-loadscope-reorder) ---
# Two xdist processes take whole files from one queue. The few long files go first, so the run
# does not end with one process on a six-minute file while the other sits idle; the many short
# files follow in their usual order and even out the end. tests/durations.json holds each file's
# seconds from a full run (`make test` writes the current run's to .pytest_cache/durations.json:
# copy it over when files grow or move). A file not listed keeps its place after the listed ones.
import json  # noqa: E402
from pathlib import Path  # noqa: E402

_DURATIONS = Path(__file__).with_name("durations.json")
_RECORD = Path(__file__).resolve().parents[1] / ".pytest_cache" / "durations.json"
_seconds: dict[str, float] = {}


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(session, config, items):
    try:
        known = json.loads(_DURATIONS.read_text())
    except (OSError, ValueError):
        return
    # a stable sort: tests keep their order within a file, unlisted files theirs among themselves
    items.sort(key=lambda item: -float(known.get(_file_of(item.nodeid), 0.0)))


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
