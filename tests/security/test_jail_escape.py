"""Hostile code that got past the script lint must still be harmless: the OS jail is the
boundary. One worker runs every attempt once (module fixture); each test asserts one."""

from __future__ import annotations

import os
import socket
import sys

import pytest

from tools import ToolSession, sandbox, seccomp
from tools.sandbox import PROJECT_ROOT

from .conftest import BYPASSES, run_probe

HOME = os.path.expanduser("~")
NR = seccomp.SYSCALLS[seccomp.native_arch()]

ATTEMPTS = r'''
P = PARAMS
st = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
out["status"] = {k: st[k].strip() for k in ("Uid", "CapEff", "CapBnd", "NoNewPrivs", "Seccomp")}
out["uid_map"] = open("/proc/self/uid_map").read().split()
for path in P["write"]:
    attempt("write:" + path, lambda p=path: open(p, "w").write("x"))
for path in P["read"]:
    attempt("read:" + path, lambda p=path: len(open(p, "rb").read(64)))
attempt("list_project", lambda: sorted(os.listdir(P["project"])))
attempt("list_pool_root", lambda: sorted(os.listdir(P["pool_root"])))
MS_REMOUNT, MS_BIND = 32, 4096
def mount(src, dst, fs, flags):
    if libc.mount(src, dst, fs, ctypes.c_ulong(flags), None) != 0:
        raise OSError(ctypes.get_errno(), "mount")
attempt("remount_rw", lambda: mount(None, P["project"].encode(), None, MS_REMOUNT | MS_BIND))
attempt("mount_tmpfs", lambda: mount(b"none", P["scratch"].encode(), b"tmpfs", 0))
attempt("ptrace_attach_1", lambda: sys_call(P["nr"]["ptrace"], 16, 1, 0, 0))
attempt("kill_supervisor", lambda: os.kill(P["supervisor_pid"], 9))
attempt("connect_host", lambda: socket.create_connection(tuple(P["listener"]), timeout=2))
attempt("raw_socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("packet_socket", lambda: socket.socket(17, socket.SOCK_RAW, 0))
attempt("udp_out", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("1.1.1.1", 53)))
attempt("write_proc_sys", lambda: open("/proc/sys/vm/swappiness", "w").write("1"))
attempt("write_sysrq", lambda: open("/proc/sysrq-trigger", "w").write("h"))
attempt("sys_visible", lambda: os.listdir("/sys/kernel"))
attempt("unshare_user", lambda: os.unshare(os.CLONE_NEWUSER))
attempt("unshare_net", lambda: os.unshare(os.CLONE_NEWNET))
attempt("clone_newuser", lambda: sys_call(P["nr"]["clone"], 0x10000000 | 17, 0, 0, 0, 0))
attempt("setns", lambda: os.setns(os.open("/proc/self/ns/net", os.O_RDONLY), 0))
attempt("setuid_0", lambda: os.setuid(0))
attempt("setresgid_0", lambda: os.setresgid(0, 0, 0))
import resource
attempt("raise_memory_cap", lambda: resource.setrlimit(resource.RLIMIT_DATA, (-1, -1)))
for name in ("bpf", "perf_event_open", "keyctl", "add_key", "kexec_load", "init_module",
             "finit_module", "open_by_handle_at", "userfaultfd", "io_uring_setup", "chroot",
             "pivot_root", "reboot", "swapoff"):
    attempt("syscall:" + name, lambda n=name: sys_call(P["nr"][n], 0, 0, 0, 0, 0))
import fcntl, termios
attempt("tiocsti", lambda: fcntl.ioctl(2, termios.TIOCSTI, b"x"))
attempt("dev_mem", lambda: open("/dev/mem", "rb"))
attempt("subprocess_mount", lambda: __import__("subprocess").run(
    ["mount", "-t", "tmpfs", "none", P["scratch"]], capture_output=True).returncode)
'''


@pytest.fixture(scope="module")
def attempts(worker_pool, tmp_path_factory):
    host_tmp = tmp_path_factory.mktemp("escape")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    s = ToolSession(worker_pool, deadline_s=120)
    params = {
        "write": [os.path.join(PROJECT_ROOT, "tools", "escape.py"), os.path.join(PROJECT_ROOT, ".git", "x"),
                  os.path.join(HOME, "mw-escape"), str(host_tmp / "escape"), "/etc/mw-escape",
                  "/usr/lib/mw-escape"],
        "read": ["/etc/shadow", "/etc/passwd", os.path.join(PROJECT_ROOT, ".git", "HEAD"),
                 os.path.join(HOME, ".bashrc"), "/proc/1/environ"],
        "project": PROJECT_ROOT, "pool_root": worker_pool.root, "scratch": str(s._w().scratch),
        "supervisor_pid": os.getpid(), "listener": list(srv.getsockname()), "nr": NR,
    }
    try:
        out = run_probe(s, ATTEMPTS, params, deadline_s=120)
        out["_params"] = params
        yield out
    finally:
        s.close()
        srv.close()


def refused(out: dict, key: str) -> bool:
    return out[key].startswith("refused")


def test_runs_unprivileged_without_caps_with_seccomp_from_inside(attempts):
    st = attempts["status"]
    assert st["Uid"].split()[0] != "0" and st["Uid"].split()[0] == str(sandbox.INSIDE_UID)
    assert int(st["CapEff"], 16) == 0 and int(st["CapBnd"], 16) == 0
    assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2"
    inside, outside_parent, count = attempts["uid_map"][:3]
    assert inside == str(sandbox.INSIDE_UID) and count == "1"


def test_cannot_write_outside_scratch(attempts):
    for path in attempts["_params"]["write"]:
        assert refused(attempts, f"write:{path}"), path
        assert not os.path.exists(path), path


def test_cannot_read_secrets_git_or_home(attempts):
    for path in attempts["_params"]["read"]:
        if path != "/proc/1/environ":
            assert refused(attempts, f"read:{path}"), (path, attempts[f"read:{path}"])


def test_sees_only_the_tools_package_of_the_checkout(attempts):
    # A venv inside the checkout (make setup's .venv) is bound for its site-packages; nothing
    # else of the checkout (.git, tests, training, the caller's files) is there.
    expected = ["tools"]
    venv = os.path.realpath(sys.prefix)
    root = os.path.realpath(PROJECT_ROOT)
    if venv.startswith(root + os.sep):
        expected.append(os.path.relpath(venv, root).split(os.sep)[0])
    assert attempts["list_project"] == f"ok: {sorted(expected)}"


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
    assert out["uid"] == sandbox.INSIDE_UID


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
