"""The two tiers of the suite (tests/conftest.py): `make test-fast` runs the tests marked `fast`,
those that boot no worker, Qt, X server, Ray or model; `make test` runs all of them. The split
is read from each test's fixtures and HEAVY_FILES, and a fast test that starts a worker (itself
or through a child Python) fails; these tests check both halves on known tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.tier_guard import sitecustomize as guard

ROOT = Path(__file__).resolve().parents[1]


def _collected(marker: str, *files: str) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-m", marker, *files],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {line.strip() for line in proc.stdout.splitlines() if "::" in line}


def test_the_fast_tier_holds_parsers_and_checks_but_no_kernel_qt_or_model_test():
    files = ("tests/test_agents_toolcall_parser.py", "tests/test_tasks_oracle.py",
             "tests/test_studio_app.py", "tests/test_real_base.py", "tests/test_cluster_ray.py")
    fast, heavy = _collected("fast", *files), _collected("heavy", *files)
    assert fast and heavy and not fast & heavy
    # a parser test, and a task module's test that only reads the task table
    assert any(n.startswith("tests/test_agents_toolcall_parser.py::") for n in fast)
    assert "tests/test_tasks_oracle.py::test_cases_sample_every_level_twice_and_every_family_once" in fast
    # real workers (task_session), Qt (qtbot), the real base, Ray: make test only
    assert any(n.startswith("tests/test_tasks_oracle.py::test_oracle_succeeds_nothing_fails") for n in heavy)
    for name in ("test_studio_app.py", "test_real_base.py", "test_cluster_ray.py"):
        assert not any(n.startswith(f"tests/{name}::") for n in fast), name
        assert any(n.startswith(f"tests/{name}::") for n in heavy), name


def test_the_guard_knows_a_worker_ray_and_an_x_server_by_their_command_lines():
    worker = [sys.executable, "-s", "-P", "-m", "tools.worker", "--scratch", "/tmp/x"]
    assert guard.heavy_process(worker) == "a sandboxed Blender/CadQuery worker"
    assert guard.heavy_process(["/venv/lib/ray/core/src/ray/raylet/raylet", "--node"]) == "a Ray node"
    assert guard.heavy_process(["/usr/bin/Xvfb", ":91"]) == "an X server"
    assert guard.heavy_process([sys.executable, "-m", "studio.cli", "tasks", "list"]) == ""
    seen: list[str] = []
    guard.hook("subprocess.Popen", (sys.executable, worker, None, None), seen.append)
    guard.hook("subprocess.Popen", ("git", ["git", "status"], None, None), seen.append)
    guard.hook("open", ("tools.worker", "r", 0), seen.append)  # not a process start
    assert seen == ["a sandboxed Blender/CadQuery worker"]


def test_a_child_python_of_a_fast_test_reports_a_worker_it_starts(tmp_path):
    """The child loads the guard as its sitecustomize (tests/conftest.py puts it on PYTHONPATH
    while a fast test runs) and writes what it started to MODELWRIGHT_TIER_GUARD; a child that
    starts only ordinary processes writes nothing."""
    record = tmp_path / "started.txt"
    env = {**os.environ, "MODELWRIGHT_TIER_GUARD": str(record),
           "PYTHONPATH": str(ROOT / "tests" / "support" / "tier_guard")}
    ordinary = "import subprocess; subprocess.run(['true', 'studio.cli'])"
    subprocess.run([sys.executable, "-c", ordinary], env=env, check=True, timeout=120)
    assert not record.exists()
    # (the name is put together in the child: this test's own command line must not say it)
    booting = "import subprocess; subprocess.run(['true', '-m', 'tools.' + 'worker'])"
    subprocess.run([sys.executable, "-c", booting], env=env, check=True, timeout=120)  # `true`: nothing boots
    assert record.read_text().splitlines() == ["a sandboxed Blender/CadQuery worker (started by a child process)"]


def test_every_heavy_entry_names_a_test_that_is_there():
    from conftest import HEAVY_FILES

    for key in HEAVY_FILES:
        path, _, test = key.partition("::")
        assert (ROOT / path).is_file(), key
        if test:
            name = test.split("[")[0]
            assert f"def {name}(" in (ROOT / path).read_text(), key


def test_a_fixture_named_for_a_pool_or_a_session_is_heavy():
    from conftest import _heavy_fixture

    for name in ("worker_pool", "session", "task_session", "hostile_pool", "roomy_session", "qtbot",
                 "ordinary_user", "tiny_model_dir", "base_data_dir"):
        assert _heavy_fixture(name), name
    for name in ("tmp_path", "monkeypatch", "request", "bad", "store", "sessions_dir"):
        assert not _heavy_fixture(name), name
