"""The jail as seen from inside a worker: what `modelwright tools doctor` prints.

Measured, not configured: each figure is read from /proc or tried, so a jail that silently
failed to apply a setting shows it here.
"""

from __future__ import annotations

import os
import resource
import socket

SECCOMP_MODES = {"0": "disabled", "1": "strict", "2": "filter"}
CANDIDATES = ("/", "/usr", "/etc", "/tmp", "/run", "/dev/shm", "/proc/sys", "/sys", "/root", "/home")


def _status() -> dict[str, str]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            out[key] = value.strip()
    return out


def _id_map(name: str) -> list[list[int]]:
    try:
        with open(f"/proc/self/{name}") as f:
            return [[int(x) for x in line.split()] for line in f if line.strip()]
    except OSError:
        return []


def _limit(what: int) -> int | None:
    soft, _ = resource.getrlimit(what)
    return None if soft == resource.RLIM_INFINITY else soft


def _writable(scratch: str) -> list[str]:
    """Mount points and well-known dirs where creating a file works."""
    seen = set(CANDIDATES) | {scratch}
    try:
        with open("/proc/self/mountinfo") as f:
            seen |= {line.split()[4] for line in f}
    except OSError:
        pass
    out = []
    for path in sorted(seen):
        if not os.path.isdir(path):
            continue
        probe = os.path.join(path, f".mw-doctor-{os.getpid()}")
        try:
            fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except OSError:
            continue
        os.close(fd)
        os.unlink(probe)
        out.append(path)
    return out


def _interfaces() -> list[str]:
    try:
        return sorted(name for _, name in socket.if_nameindex())
    except OSError:
        with open("/proc/net/dev") as f:
            return sorted(line.split(":")[0].strip() for line in f.readlines()[2:])


def report(scratch: str) -> dict:
    st = _status()
    uid_map, gid_map = _id_map("uid_map"), _id_map("gid_map")
    caps_eff = int(st.get("CapEff", "0"), 16)
    return {
        "uid": os.getuid(), "gid": os.getgid(), "euid": os.geteuid(),
        "uid_map": uid_map, "gid_map": gid_map,
        "outside_uid": next((m[1] for m in uid_map if m[0] <= os.getuid() < m[0] + m[2]), None),
        "cap_eff": st.get("CapEff"), "cap_prm": st.get("CapPrm"), "cap_bnd": st.get("CapBnd"),
        "capabilities_dropped": caps_eff == 0 and int(st.get("CapBnd", "1"), 16) == 0,
        "no_new_privs": st.get("NoNewPrivs") == "1",
        "seccomp": int(st.get("Seccomp", "0")),
        "seccomp_mode": SECCOMP_MODES.get(st.get("Seccomp", "0"), "?"),
        "network_interfaces": _interfaces(),
        "memory_cap_mb": (lambda v: None if v is None else v >> 20)(_limit(resource.RLIMIT_DATA)),
        "pids_cap": _limit(resource.RLIMIT_NPROC),
        "cpu_cap_s": _limit(resource.RLIMIT_CPU),
        "writable_paths": _writable(scratch),
        "sys_visible": os.path.exists("/sys/kernel"),
        "proc_sys_entries": len(os.listdir("/proc/sys")) if os.path.isdir("/proc/sys") else 0,
        "pid": os.getpid(),
    }
