"""Hostile code that got past the script lint must still be harmless: the OS jail is the
boundary. One worker per identity runs every attempt once (module fixture, escape_attempts.py):
as root, and as an ordinary user (`mwtest`, through runuser, with its own pool, supervisor and
paths); each test asserts one attempt's outcome for both."""

from __future__ import annotations

import json
import os

import pytest

from tools.sandbox import jail, template

from .conftest import BYPASSES, run_probe
from .escape_attempts import (
    assert_confined,
    assert_no_reads_out,
    assert_no_writes_out,
    refused,
    run_attempts,
)

# As root: the attempts as root and again as an ordinary user the tests create, each in a
# worker forked from the worker template (tools/worker/selfjail.py builds the jail), and as
# root once more in a worker started from scratch by bubblewrap (`scratch`: no template).
# Started as an ordinary user the suite itself is the unprivileged run.
IDENTITIES = ["root", "user", "scratch"] if os.geteuid() == 0 else ["user", "scratch"]


@pytest.fixture(scope="module", params=IDENTITIES)
def attempts(request, tmp_path_factory):
    if request.param == "scratch":
        from tools import WorkerPool

        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(template.ENV, "0")
            pool = WorkerPool(size=0, prewarm=False)
            try:
                out = run_attempts(pool, str(tmp_path_factory.mktemp("escape")))
            finally:
                pool.close()
        assert not out["_forked"]
        return out
    if os.geteuid() != 0 or request.param == "root":  # this process's own identity
        return run_attempts(request.getfixturevalue("worker_pool"), str(tmp_path_factory.mktemp("escape")))
    user = request.getfixturevalue("ordinary_user")
    r = user.python("-m", "security.escape_attempts", timeout=900)
    assert r.returncode == 0 and r.stdout.strip(), r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["_app_uid"] == user.uid != 0
    return out


def test_workers_come_from_the_template_unless_it_is_off(attempts, request):
    """The attempts ran in a forked worker (root, user) or in one bubblewrap started
    (scratch): both ways build the jail every other test here asserts."""
    assert attempts["_forked"] is (request.node.callspec.params["attempts"] != "scratch")


def test_runs_unprivileged_without_caps_with_seccomp_from_inside(attempts):
    assert_confined(attempts, jail.INSIDE_UID)


def test_cannot_write_outside_scratch(attempts):
    # As the user, /etc/mw-escape once succeeded: an unprivileged bwrap left its own root tmpfs
    # (the /etc it makes for binds) writable. Now read-only, the outcome is the root one.
    assert_no_writes_out(attempts)


def test_cannot_read_secrets_git_or_home(attempts):
    assert_no_reads_out(attempts)


def test_sees_only_the_tools_package_of_the_checkout(attempts):
    # A venv inside the checkout (make setup's .venv) is bound for its site-packages; nothing
    # else of the checkout (.git, tests, training, the caller's files) is there.
    assert attempts["list_project"] == f"ok: {attempts['_expected_project']}"


def test_cannot_see_other_workers_scratch(attempts):
    listing = attempts["list_pool_root"]
    assert listing.startswith("ok: [") and listing.count("'") == 2, listing  # only its own


@pytest.mark.parametrize("key", ["remount_rw", "mount_tmpfs", "subprocess_mount"])
def test_cannot_mount_or_remount(attempts, key):
    if key == "subprocess_mount":
        assert attempts[key] != "ok: 0"
    else:
        assert "Errno 1]" in attempts[key], attempts[key]


def test_cannot_ptrace_or_signal_the_supervisor(attempts):
    assert "Errno 1]" in attempts["ptrace_attach_1"]
    assert refused(attempts, "kill_supervisor")  # not even visible: its own pid namespace


@pytest.mark.parametrize("key", ["connect_host", "raw_socket", "packet_socket", "udp_out"])
def test_no_network_and_no_raw_or_packet_sockets(attempts, key):
    assert refused(attempts, key), attempts[key]


def test_sockets_are_unix_alone(attempts):
    """vsock shares the host's port space whatever the network namespace: no family but
    AF_UNIX is allowed, neither by socket() nor socketpair()."""
    for fam, typ in attempts["_params"]["families"]:
        for call in ("socket", "socketpair"):
            got = attempts[f"{call}:{fam}:{typ}"]
            if fam == 1:
                assert got.startswith("ok"), (call, fam, typ, got)
            else:  # EAFNOSUPPORT from seccomp (the kernel's own socketpair(AF_INET) is EOPNOTSUPP)
                assert "Errno 97]" in got, (call, fam, typ, got)


@pytest.mark.parametrize("key", ["shmget", "msgget"])
def test_no_system_v_memory(attempts, key):
    """SysV segments and queues outlive every mapping: memory no watch of the jail would see."""
    assert "Errno 1]" in attempts[key], attempts[key]


@pytest.mark.parametrize("key", ["write_proc_sys", "write_sysrq", "sys_visible", "dev_mem"])
def test_no_kernel_knobs(attempts, key):
    assert refused(attempts, key), attempts[key]


@pytest.mark.parametrize("key", ["unshare_user", "unshare_net", "clone_newuser", "setns"])
def test_cannot_make_or_enter_namespaces(attempts, key):
    assert "Errno 1]" in attempts[key], attempts[key]


@pytest.mark.parametrize("key", ["setuid_0", "setresgid_0", "raise_memory_cap"])
def test_cannot_escalate_or_lift_caps(attempts, key):
    assert refused(attempts, key), attempts[key]


@pytest.mark.parametrize("name", ["bpf", "perf_event_open", "keyctl", "add_key", "kexec_load",
                                  "init_module", "finit_module", "open_by_handle_at", "userfaultfd",
                                  "io_uring_setup", "chroot", "pivot_root", "reboot", "swapoff"])
def test_seccomp_denies_kernel_attack_surface(attempts, name):
    assert "Errno 1]" in attempts[f"syscall:{name}"], attempts[f"syscall:{name}"]


def test_seccomp_denies_terminal_injection(attempts):
    assert "Errno 1]" in attempts["tiocsti"], attempts["tiocsti"]


@pytest.mark.parametrize("bypass", sorted(BYPASSES))
def test_each_lint_bypass_reaches_os_but_not_out(session, bypass, tmp_path):
    """Every known lint bypass gives real os inside; none gives a way out."""
    target = tmp_path / "escaped"
    out = run_probe(session, "attempt('w', lambda: open(PARAMS['t'], 'w').write('x'))\n"
                    "out['uid'] = os.getuid()\n", {"t": str(target)}, bypass=bypass)
    assert refused(out, "w") and not target.exists()
    assert out["uid"] == jail.INSIDE_UID


def test_str_format_reach_leaks_no_host_environment(session, monkeypatch):
    monkeypatch.setenv("MW_HOST_SECRET", "hunter2")
    code = ("import collections\n"
            "s = '{0.__globals__[_sys].modules[os].environ}'.format(collections.namedtuple)\n"
            "raise ValueError(s)\n")
    r = session.call("cadquery_script", {"code": code, "name": "x"})
    assert not r.ok and "PYTHONPATH" in r.error.message  # the reach works...
    assert "hunter2" not in r.error.message and "MW_HOST_SECRET" not in r.error.message  # ...to nothing


def test_a_restart_after_a_crash_follows_no_planted_link(fresh_session, tmp_path):
    """The dead worker's scratch is reused to restore the scene: a link planted there must
    not aim the supervisor's own writes (its worker.log) at a host file."""
    victim = tmp_path / "victim"
    victim.write_text("orig")
    scratch = str(fresh_session._w().scratch)
    probe = ("log = os.path.join(PARAMS['scratch'], 'worker.log')\n"
             "os.unlink(log)\nos.symlink(PARAMS['victim'], log)\nout['planted'] = os.path.islink(log)\n")
    assert run_probe(fresh_session, probe, {"scratch": scratch, "victim": str(victim)})["planted"]
    assert fresh_session._fault("abort").error.kind.value == "crash"
    assert fresh_session.call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}).ok
    assert victim.read_text() == "orig"
    assert fresh_session.restarts == 1


@pytest.mark.timeout(300)  # the bug this guards against is a supervisor blocked for good
def test_a_restart_after_a_crash_is_not_blocked_by_a_planted_fifo(fresh_session):
    """A FIFO planted at the dead worker's log must not block the supervisor opening it for
    the restored worker (opening a FIFO to write waits for a reader that never comes)."""
    scratch = str(fresh_session._w().scratch)
    probe = ("log = os.path.join(PARAMS['scratch'], 'worker.log')\n"
             "import stat\nos.unlink(log)\nos.mkfifo(log)\nout['planted'] = stat.S_ISFIFO(os.lstat(log).st_mode)\n")
    assert run_probe(fresh_session, probe, {"scratch": scratch})["planted"]
    assert fresh_session._fault("abort").error.kind.value == "crash"
    assert fresh_session.call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}).ok
    assert fresh_session.restarts == 1
    assert os.path.isfile(os.path.join(scratch, "worker.log"))  # a plain log again
