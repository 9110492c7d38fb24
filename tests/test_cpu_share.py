"""Sharing the CPU (agents/models/cpu.py): the thread count chosen for a given machine, the
OpenMP wait policy a process and its children get, and a command run below the GUI, checked on
real processes (their nice value and scheduling policy as the kernel reports them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents.models.cpu import (
    BACKGROUND_NICE,
    THREADS_ENV,
    CpuSample,
    background_command,
    busy_elsewhere,
    child_env,
    choose_threads,
    threads_override,
    usable_cores,
    wait_policy,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("cores", "busy", "cap", "override", "want"),
    [
        (2, 0.0, None, None, 2),  # idle: every core
        (2, 0.1, None, None, 2),  # a GUI's blips leave both cores nearly free
        (2, 1.0, None, None, 1),  # one CPU-bound neighbour: the free core only
        (2, 0.6, None, None, 1),  # a core 40 % free is not worth a thread that waits on it
        (2, 7.5, None, None, 1),  # a loaded machine: still one thread, never zero
        (8, 2.0, None, None, 6),
        (8, 2.0, 4, None, 4),  # the config's cpu_threads caps it
        (2, 0.0, 1, None, 1),
        (2, 1.0, None, 3, 3),  # MODELWRIGHT_THREADS wins over the measurement
        (2, -0.5, None, None, 2),  # a negative estimate (own time overcounted) is none
    ],
)
def test_threads_are_chosen_for_the_cores_left_free(cores, busy, cap, override, want):
    assert choose_threads(cores, busy, cap=cap, override=override) == want


def test_the_override_is_a_count_or_auto():
    assert threads_override({}) is None
    assert threads_override({THREADS_ENV: "auto"}) is None
    assert threads_override({THREADS_ENV: " 3 "}) == 3
    for bad in ("0", "-1", "two"):
        with pytest.raises(ValueError, match=THREADS_ENV):
            threads_override({THREADS_ENV: bad})


STAT_A = """cpu  300 0 100 1600 0 0 0 0 0 0
cpu0 100 0 50 850 0 0 0 0 0 0
cpu1 200 0 50 750 0 0 0 0 0 0
intr 12345
"""
# 100 ticks later on each core: cpu0 50 busy, cpu1 100 busy (all of it)
STAT_B = """cpu  450 0 100 1650 0 0 0 0 0 0
cpu0 150 0 50 900 0 0 0 0 0 0
cpu1 300 0 50 750 0 0 0 0 0 0
intr 12399
"""


def test_busy_cores_elsewhere_come_from_proc_stat_less_our_own_time():
    a = CpuSample.now(stat_text=STAT_A)
    b = CpuSample.now(stat_text=STAT_B)
    assert (a.busy, a.total) == (400, 2000) and (b.busy, b.total) == (550, 2200)
    a.own_s, a.at, b.own_s, b.at = 10.0, 100.0, 10.0, 101.0
    assert busy_elsewhere(a, b, 2) == pytest.approx(1.5)  # 150 of 200 ticks busy
    b.own_s = 10.5  # we used half a core of it ourselves
    assert busy_elsewhere(a, b, 2) == pytest.approx(1.0)
    assert choose_threads(2, busy_elsewhere(a, b, 2)) == 1
    only0 = CpuSample.now({0}, STAT_A), CpuSample.now({0}, STAT_B)  # our affinity: cpu0
    assert (only0[1].busy - only0[0].busy, only0[1].total - only0[0].total) == (50, 100)


# 100 ticks later: cpu0 idle, cpu1 busy all along with a process at nice > 0
STAT_NICED = """cpu  400 100 100 1700 0 0 0 0 0 0
cpu0 100 0 50 950 0 0 0 0 0 0
cpu1 200 100 50 750 0 0 0 0 0 0
"""


def test_niced_processes_are_not_competitors_of_a_process_at_nice_0():
    a = CpuSample.now(stat_text=STAT_A, count_niced=False)
    b = CpuSample.now(stat_text=STAT_NICED, count_niced=False)
    a.own_s, a.at, b.own_s, b.at = 0.0, 0.0, 0.0, 1.0
    assert busy_elsewhere(a, b, 2) == pytest.approx(0.0)
    assert choose_threads(2, busy_elsewhere(a, b, 2)) == 2  # beside a studio's niced trainer
    a, b = CpuSample.now(stat_text=STAT_A), CpuSample.now(stat_text=STAT_NICED)  # a niced peer
    a.own_s, a.at, b.own_s, b.at = 0.0, 0.0, 0.0, 1.0
    assert busy_elsewhere(a, b, 2) == pytest.approx(1.0)
    assert choose_threads(2, busy_elsewhere(a, b, 2)) == 1


def test_the_real_proc_stat_reads_for_our_cores():
    sample = CpuSample.now(set(os.sched_getaffinity(0)))
    assert sample.total > 0 and 0 <= sample.busy <= sample.total
    assert usable_cores() == len(os.sched_getaffinity(0))


def test_a_child_gets_the_passive_wait_policy_unless_the_user_chose_one():
    env = child_env({"PATH": "/bin"})
    assert env == {"PATH": "/bin", "OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0"}
    assert wait_policy(env) == "passive"
    mine = child_env({"OMP_WAIT_POLICY": "ACTIVE"})
    assert mine == {"OMP_WAIT_POLICY": "ACTIVE"}  # no spin count forced beside the user's
    assert wait_policy(mine) == "active"
    assert wait_policy({}) == "spin then sleep (libgomp default)"
    assert child_env({"GOMP_SPINCOUNT": "1000"})["GOMP_SPINCOUNT"] == "1000"


def _python(code: str, env: dict | None = None) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env or clean,
                          capture_output=True, text=True, check=True, timeout=300)  # fmt: skip
    return done.stdout.strip()


def test_the_policy_is_set_before_torch_loads_and_said_when_too_late():
    before = _python("from agents.models.cpu import prepare_openmp; import os, json; "
                     "p = prepare_openmp(); import torch; "
                     "print(json.dumps([p, os.environ['OMP_WAIT_POLICY'], os.environ['GOMP_SPINCOUNT']]))")
    assert json.loads(before) == ["passive", "PASSIVE", "0"]
    after = _python("import torch, os, json; from agents.models.cpu import prepare_openmp; "
                    "p = prepare_openmp(); print(json.dumps([p, 'OMP_WAIT_POLICY' in os.environ]))")
    assert json.loads(after) == ["spin then sleep (libgomp default)", False]


def test_the_modelwright_command_prepares_openmp_before_any_command_runs():
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    code = ("import sys, os, typer; import studio.cli as c; app = typer.Typer(); "
            "app.command('show')(lambda: print(os.environ.get('OMP_WAIT_POLICY'))); "
            "c.build_app = lambda modules: app; sys.argv = ['modelwright']; c.main()")
    assert _python(code, env) == "PASSIVE"


def test_a_background_command_runs_niced_under_sched_batch():
    """A real child through the wrapper, seen from here by the kernel's account of its pid."""
    code = "import sys; sys.stdout.write('up\\n'); sys.stdout.flush(); sys.stdin.read()"
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    child = subprocess.Popen(background_command([sys.executable, "-c", code]), cwd=ROOT, env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert child.stdout.readline() == "up\n"  # the wrapper exec'd it: same pid, running
        own = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, child.pid) == max(BACKGROUND_NICE, own) > 0
        assert os.sched_getscheduler(child.pid) == os.SCHED_BATCH
        with open(f"/proc/{child.pid}/environ", "rb") as fh:
            seen = dict(kv.split(b"=", 1) for kv in fh.read().split(b"\0") if b"=" in kv)
        assert seen[b"OMP_WAIT_POLICY"] == b"PASSIVE" and seen[b"GOMP_SPINCOUNT"] == b"0"
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    assert child.returncode == 0


def test_the_background_nice_value_can_be_chosen():
    code = "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"
    env = {**os.environ, "MODELWRIGHT_TRAIN_NICE": "12"}
    done = subprocess.run(background_command([sys.executable, "-c", code]), cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    assert int(done.stdout) == max(12, os.getpriority(os.PRIO_PROCESS, 0))


def test_a_background_command_that_cannot_run_says_so():
    done = subprocess.run(background_command(["/nonexistent/program"]), cwd=ROOT,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 127 and "cannot run /nonexistent/program" in done.stderr
    usage = subprocess.run([sys.executable, "-m", "agents.models.cpu"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert usage.returncode == 2 and "usage" in usage.stderr


def test_a_stage_records_the_threads_it_chose(monkeypatch):
    """set_cpu_threads (every SFT/GRPO stage on a CPU): a fixed count from the environment
    is applied to torch and recorded with the wait policy."""
    import torch

    from training.runs import set_cpu_threads

    before = torch.get_num_threads()
    monkeypatch.setenv(THREADS_ENV, "1")
    try:
        record = set_cpu_threads(2)
        assert torch.get_num_threads() == 1
        assert record["cpu_threads"] == 1 and record["threads_from"] == "MODELWRIGHT_THREADS"
        assert record["omp_wait_policy"] == wait_policy()
        monkeypatch.delenv(THREADS_ENV)
        record = set_cpu_threads(1)  # a cap of 1 leaves nothing to measure for
        assert record["cpu_threads"] == 1 and record["threads_from"] == "measured"
        assert set_cpu_threads(None) is None  # a GPU run leaves torch alone
    finally:
        torch.set_num_threads(before)



def test_the_cpu_of_our_own_children_is_ours_not_a_neighbours():
    """A run's tool workers (its descendants) are its own work: `tree_cpu_seconds` counts a
    child's CPU, so `busy_elsewhere` does not take it for a neighbour and halve the threads."""
    from agents.models.cpu import tree_cpu_seconds

    burn = ("import time, sys\n"
            "t = time.process_time()\n"
            "while time.process_time() - t < 0.5: pass\n"
            "sys.stdout.write('done\\n'); sys.stdout.flush(); sys.stdin.read()\n")
    before_tree, before_own = tree_cpu_seconds(), sum(os.times()[:2])
    child = subprocess.Popen([sys.executable, "-c", burn], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "done\n"  # alive, its 0.5 s of CPU spent
        tree = tree_cpu_seconds() - before_tree
        own = sum(os.times()[:2]) - before_own
    finally:
        child.stdin.close()
        child.wait()
    assert tree - own >= 0.4, (tree, own)
