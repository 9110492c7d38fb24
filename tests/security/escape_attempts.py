"""Every escape attempt of the security suite, run once in one worker by whoever runs it:
the test process as root, or `python -m security.escape_attempts` as an ordinary user (which
prints the result as JSON). Paths are those of the identity that runs it: its HOME, a host dir
it can write and a secret it can read there, its own supervisor pid and listener."""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile

from tools import ToolSession
from tools.sandbox import seccomp
from tools.sandbox.jail import PROJECT_ROOT

from .conftest import run_probe

NR = seccomp.SYSCALLS[seccomp.native_arch()]
# (family, type): unix, inet, inet6, netlink, packet, vsock, and raw/dgram variants
FAMILIES = [(1, 1), (1, 2), (2, 1), (2, 2), (10, 1), (16, 3), (16, 2), (17, 3), (40, 1), (40, 2)]

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
for fam, typ in P["families"]:  # an allowlist: AF_UNIX alone
    attempt(f"socket:{fam}:{typ}", lambda f=fam, t=typ: socket.socket(f, t).close())
    attempt(f"socketpair:{fam}:{typ}", lambda f=fam, t=typ: [s.close() for s in socket.socketpair(f, t)])
attempt("shmget", lambda: sys_call(P["nr"]["shmget"], 0, 1 << 20, 0o1600))
attempt("msgget", lambda: sys_call(P["nr"]["msgget"], 0, 0o1600))
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


def expected_project_listing() -> list[str]:
    """What the jail may show of the checkout: `tools`, and the top folder of a venv inside
    it (make setup's .venv) whose site-packages is bound; never .git, tests, the caller's files."""
    root = os.path.realpath(PROJECT_ROOT)
    shown = {"tools"}
    for p in sys.path:
        p = os.path.realpath(p)
        if p.endswith("site-packages") and p.startswith(root + os.sep):
            shown.add(os.path.relpath(p, root).split(os.sep)[0])
    return sorted(shown)


def attempt_params(host_tmp: str, pool_root: str, scratch: str, listener: socket.socket,
                   more_writes: tuple[str, ...] = ()) -> dict:
    """The attempts' PARAMS for a jailed process whose pool root and scratch are these:
    `host_tmp` is a host dir this identity can write (a secret is put there), `listener` a
    socket listening on loopback."""
    secret = os.path.join(host_tmp, "secret")
    with open(secret, "w") as f:
        f.write("readable on the host, not in the jail")
    home = os.path.expanduser("~")
    return {
        "write": [os.path.join(PROJECT_ROOT, "tools", "escape.py"), *more_writes,
                  os.path.join(PROJECT_ROOT, ".git", "x"), os.path.join(home, "mw-escape"),
                  os.path.join(host_tmp, "escape"), "/etc/mw-escape", "/usr/lib/mw-escape"],
        "read": ["/etc/shadow", "/etc/passwd", os.path.join(PROJECT_ROOT, ".git", "HEAD"),
                 os.path.join(home, ".bashrc"), secret, "/proc/1/environ"],
        "project": PROJECT_ROOT, "pool_root": pool_root, "scratch": scratch,
        "supervisor_pid": os.getpid(), "listener": list(listener.getsockname()), "nr": NR,
        "families": FAMILIES,
    }


def assert_confined(attempts: dict, inside_uid: int) -> None:
    """Its own unprivileged user inside, no capabilities, no_new_privs and the seccomp filter."""
    st = attempts["status"]
    assert st["Uid"].split()[0] != "0" and st["Uid"].split()[0] == str(inside_uid)
    assert int(st["CapEff"], 16) == 0 and int(st["CapBnd"], 16) == 0
    assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2"
    inside, _, count = attempts["uid_map"][:3]
    assert inside == str(inside_uid) and count == "1"


def refused(out: dict, key: str) -> bool:
    return out[key].startswith("refused")


def assert_no_writes_out(attempts: dict) -> None:
    """Every write outside its scratch refused, and nothing left there."""
    for path in attempts["_params"]["write"]:
        assert refused(attempts, f"write:{path}"), path
        assert not os.path.exists(path), path


def assert_no_reads_out(attempts: dict) -> None:
    """Every read of a secret, the checkout's .git or the home refused (its own pid namespace's
    pid 1 is itself, or its wrapper: readable)."""
    for path in attempts["_params"]["read"]:
        if path != "/proc/1/environ":
            assert refused(attempts, f"read:{path}"), (path, attempts[f"read:{path}"])


def run_attempts(pool, host_tmp: str) -> dict:
    """Every attempt in one session of `pool`; `host_tmp` is a host dir this identity can write."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    s = ToolSession(pool, deadline_s=120)
    forked = s._w().forked is not None  # from the worker template, or started from scratch
    params = attempt_params(host_tmp, pool.root, str(s._w().scratch), srv)
    try:
        out = run_probe(s, ATTEMPTS, params, deadline_s=120)
    finally:
        s.close()
        srv.close()
    out["_params"] = params
    out["_app_uid"] = os.geteuid()
    out["_forked"] = forked
    out["_expected_project"] = expected_project_listing()
    return out


if __name__ == "__main__":
    from tools import WorkerPool

    pool = WorkerPool(size=1)
    try:
        result = run_attempts(pool, tempfile.mkdtemp(prefix="mw-escape-"))
    finally:
        pool.close()
    print(json.dumps(result))
