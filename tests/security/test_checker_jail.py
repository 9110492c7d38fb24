"""The geometry checker reads files a policy's worker wrote (meshes, BREPs, 3MF): a loader bug
exploited there gives the attacker full Python in the checker. Its jail is the boundary, as a
worker's is, whether the checker was forked from the checker template
(training/tasks/checker_template.py: imports done once, the jail built by the fork itself) or
started from scratch by bubblewrap (`MODELWRIGHT_CHECKER_TEMPLATE=0`).

Each way, one checker runs every escape attempt of the worker suite (escape_attempts.py) as
an exploit would: its job file unpickles into code (the trusted side writes that file, so the
test stands in for a loader exploit). The same refusals are asserted as for a worker; what it
may see of the checkout is `tools` and `training`, read-only. Then the two ways give the same
verdicts on real episodes, and a checker template that dies is replaced at the next check.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import socket
import time

import pytest

from tools import ToolSession
from tools.sandbox import jail, template
from tools.sandbox.jail import PROJECT_ROOT
from tools.trust import confined
from training.tasks import checker, get_task
from training.tasks.checker_process import TEMPLATE, TRAINING_DIR, CheckerPool, CheckerProcess
from training.tasks.runner import run_calls

from .conftest import EPILOGUE, PRELUDE
from .escape_attempts import (
    ATTEMPTS,
    assert_confined,
    assert_no_reads_out,
    assert_no_writes_out,
    attempt_params,
    expected_project_listing,
    refused,
)


class _Exploit:
    """Unpickles into `exec(code, env)`: the checker runs it as it loads its job."""

    def __init__(self, code: str, env: dict):
        self.code, self.env = code, env

    def __reduce__(self):
        return (exec, (self.code, self.env))


def _attempts_in_checker(tmp: str) -> dict:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    pool = CheckerPool(spares=0)
    proc = CheckerProcess(pool.root, "probe", False)
    try:
        report = os.path.join(proc.workspace, "report.json")
        params = attempt_params(tmp, pool.root, proc.scratch, srv,
                                more_writes=(os.path.join(TRAINING_DIR, "escape.py"),))
        code = PRELUDE + ATTEMPTS + EPILOGUE
        job = _Exploit(code, {"REPORT": report, "PARAMS": json.dumps(params)})
        confined.write_file(proc.scratch, "inputs/job.pickle", pickle.dumps((job, [])))
        proc.send({"op": "check"})
        answer = proc.read(120)
        # the exploit ran, then the checker went on with no task: a failure, not a verdict
        assert answer.get("op") == "failed", answer
        with open(report) as f:
            out = json.load(f)
        out["_forked"] = proc.forked is not None
        out["_params"] = params
        return out
    finally:
        proc.kill()
        pool.close()
        srv.close()


@pytest.fixture(scope="module", params=["forked", "scratch"])
def attempts(request, tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(TEMPLATE.switch, "1" if request.param == "forked" else "0")
        out = _attempts_in_checker(str(tmp_path_factory.mktemp("checker-escape")))
    assert out["_forked"] is (request.param == "forked")
    return out


def test_runs_unprivileged_without_caps_with_seccomp_from_inside(attempts):
    assert_confined(attempts, jail.INSIDE_UID)


def test_cannot_write_outside_its_scratch_or_read_secrets(attempts):
    assert_no_writes_out(attempts)
    assert_no_reads_out(attempts)


def test_sees_tools_and_training_of_the_checkout_alone(attempts):
    assert attempts["list_project"] == f"ok: {sorted([*expected_project_listing(), 'training'])}"
    listing = attempts["list_pool_root"]
    assert listing.startswith("ok: [") and listing.count("'") == 2, listing  # only its own


@pytest.mark.parametrize("key", ["remount_rw", "mount_tmpfs", "ptrace_attach_1", "shmget", "msgget",
                                 "unshare_user", "unshare_net", "clone_newuser", "setns", "tiocsti"])
def test_kernel_surface_refused(attempts, key):
    assert "Errno 1]" in attempts[key], attempts[key]


@pytest.mark.parametrize("key", ["kill_supervisor", "connect_host", "raw_socket", "packet_socket",
                                 "udp_out", "write_proc_sys", "write_sysrq", "sys_visible", "dev_mem",
                                 "setuid_0", "setresgid_0", "raise_memory_cap"])
def test_no_reach_out(attempts, key):
    assert refused(attempts, key), attempts[key]


def test_sockets_are_unix_alone(attempts):
    for fam, typ in attempts["_params"]["families"]:
        got = attempts[f"socket:{fam}:{typ}"]
        assert got.startswith("ok") if fam == 1 else "Errno 97]" in got, (fam, typ, got)


@pytest.mark.parametrize("name", ["bpf", "perf_event_open", "keyctl", "userfaultfd", "io_uring_setup",
                                  "init_module", "chroot", "pivot_root"])
def test_seccomp_denies_kernel_attack_surface(attempts, name):
    assert "Errno 1]" in attempts[f"syscall:{name}"], attempts[f"syscall:{name}"]


# one task of a scene family and one CAD task (its fork imports CadQuery before its job)
VERDICT_TASKS = ["primitive_placement:2:110001", "scene_editing:1:110000", "brackets:1:110000"]


def test_forked_and_scratch_checkers_give_the_same_verdicts(worker_pool, monkeypatch):
    """The same episodes scored by forked checkers and by checkers started from scratch: the
    same totals, components, success and details, and the forks did come from the template."""
    got = {}
    for way, switch in (("forked", "1"), ("scratch", "0")):
        monkeypatch.setenv(TEMPLATE.switch, switch)
        pool = CheckerPool(spares=0)
        seen = []
        take = pool.take

        def spy(cad, take=take, seen=seen):
            proc = take(cad)
            seen.append(proc.forked is not None)
            return proc

        pool.take = spy
        try:
            for tid in VERDICT_TASKS:
                task = get_task(tid)
                with ToolSession(worker_pool, deadline_s=120) as s:
                    task.setup(s)
                    calls = run_calls(s, task.oracle)
                    v = checker.check(task, s, calls, pool=pool)
                got[(way, tid)] = (v.total, v.components, v.success, v.details)
        finally:
            pool.close()
        assert seen == [way == "forked"] * len(VERDICT_TASKS)
    for tid in VERDICT_TASKS:
        assert got[("forked", tid)] == got[("scratch", tid)], tid
        assert got[("forked", tid)][2] is True, tid  # the oracle's episode: a real verdict


def test_a_dead_checker_template_is_replaced_at_the_next_check(worker_pool, monkeypatch):
    monkeypatch.setenv(TEMPLATE.switch, "1")
    task = get_task(VERDICT_TASKS[0])
    pool = CheckerPool(spares=0)
    try:
        with ToolSession(worker_pool, deadline_s=120) as s:
            task.setup(s)
            calls = run_calls(s, task.oracle)
            assert checker.check(task, s, calls, pool=pool).success
            first = template.shared(None, TEMPLATE)  # alive: no launch needed
            os.kill(first.proc.pid, signal.SIGKILL)
            while first.alive:
                time.sleep(0.05)
            assert checker.check(task, s, calls, pool=pool).success
        second = template.shared(None, TEMPLATE)
        assert second is not first and second.alive
    finally:
        pool.close()


SCORE_AND_EXIT = """
import sys
from tools import ToolSession, WorkerPool
from tools.sandbox import template
from training.tasks import checker, get_task
from training.tasks.checker_process import TEMPLATE
from training.tasks.runner import run_calls
task = get_task("primitive_placement:1:110000")
pool = WorkerPool(size=0, prewarm=False)
with ToolSession(pool) as s:
    task.setup(s)
    print(checker.check(task, s, run_calls(s, task.oracle)).success)
print(template.shared(None, TEMPLATE).home, flush=True)
"""


def test_a_command_that_scored_exits_without_a_word_and_leaves_no_template_folder():
    """A command's exit ends its checker template (started from a thread that lives as long
    as the process): no "template exited" line on stderr, its folder removed. Once its
    launcher was a pooled thread, joined at exit while the main thread still ran: the template
    died first and every command said so and left its folder behind."""
    import subprocess
    import sys
    from pathlib import Path

    proc = subprocess.run([sys.executable, "-c", SCORE_AND_EXIT], capture_output=True, text=True,
                          cwd=PROJECT_ROOT, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    success, home = proc.stdout.split()
    assert success == "True"
    assert "template" not in proc.stderr, proc.stderr
    assert not Path(home).exists()
