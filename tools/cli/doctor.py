"""`modelwright tools doctor`: start one worker and report its jail as measured from inside.

Also runnable as `python -m tools.cli.doctor [--json]` (the security tests run it as an
unprivileged user that way).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

from tools.sandbox import jail


def _status(pid: int) -> dict[str, list[str]]:
    try:
        with open(f"/proc/{pid}/status") as f:
            return {k: v.split() for k, _, v in (line.partition(":") for line in f)}
    except OSError:
        return {}


def _host_ids(pids: list[int], inside_pid: object) -> tuple[int | None, int | None]:
    """The host uid/gid of the worker process itself: the host pid whose innermost pid (the
    last of NSpid) is the one it reported. Its uid_map cannot tell: bubblewrap nests a
    second user namespace, so the map's parent column is bubblewrap's own uid 0, not the host's."""
    for pid in pids:
        st = _status(pid)
        try:
            if st.get("NSpid", [""])[-1] == str(inside_pid):
                return int(st["Uid"][0]), int(st["Gid"][0])
        except (KeyError, ValueError, IndexError):
            continue
    return None, None


def measure() -> dict:
    """The jail's properties: the worker's own report plus what the host sees of it."""
    from tools.runtime.supervisor import WorkerProcess

    root = tempfile.mkdtemp(prefix="modelwright-doctor-")
    jail.traversable(root)
    out: dict = {"jailed": jail.jailed(), "app_uid": os.geteuid(),
                 "unjailed_allowed": jail.unjailed_allowed()}
    if not jail.jailed():
        out["problem"] = jail.why_unjailed() or "disabled by MODELWRIGHT_SANDBOX=none"
    w = WorkerProcess(os.path.join(root, "w"))
    try:
        reply, _ = w.request({"op": "confinement"}, 60)
        out.update(reply.get("output", {}))
        uid, gid = _host_ids(w.host_pids(), out.get("pid"))
        out["host_uid"], out["host_gid"] = uid, gid
        out["outside_uid"] = uid  # measured on the host: see _host_ids
        st = os.lstat(w.scratch)
        out["scratch_mode"], out["scratch_uid"] = oct(st.st_mode & 0o7777), st.st_uid
        out["forked"] = w.forked is not None
    finally:
        w.kill()
        shutil.rmtree(root, ignore_errors=True)
    return out


def verdict(r: dict) -> list[str]:
    """What is wrong with the jail, one line each; empty when every property holds."""
    bad = []
    if not r.get("jailed"):
        bad.append(f"no jail: {r.get('problem')}")
    if r.get("uid") == 0 or r.get("host_uid") in (0, None):
        bad.append(f"the worker runs as uid {r.get('uid')} inside, {r.get('host_uid')} on the host")
    if not r.get("capabilities_dropped"):
        bad.append(f"capabilities kept: CapEff {r.get('cap_eff')}, CapBnd {r.get('cap_bnd')}")
    if r.get("seccomp") != 2:
        bad.append("no seccomp filter")
    if not r.get("no_new_privs"):
        bad.append("no_new_privs is off")
    if set(r.get("network_interfaces", [])) - {"lo"}:
        bad.append(f"network interfaces: {r.get('network_interfaces')}")
    if r.get("scratch_mode") != "0o700" or r.get("scratch_uid") != r.get("host_uid"):
        bad.append(f"scratch is {r.get('scratch_mode')}, owned by {r.get('scratch_uid')}")
    for key in ("memory_cap_mb", "pids_cap", "cpu_cap_s"):
        if r.get(key) is None:
            bad.append(f"no {key.replace('_', ' ')}")
    return bad


def render(r: dict) -> str:
    rows = [
        ("jail", "bubblewrap + user namespace + seccomp" if r.get("jailed") else "NONE"),
        ("worker started", "forked from the worker template (the jail built by the fork)"
         if r.get("forked") else "from scratch"),
        ("app uid", r.get("app_uid")),
        ("worker uid/gid inside", f"{r.get('uid')}/{r.get('gid')}"),
        ("worker uid/gid on the host", f"{r.get('host_uid')}/{r.get('host_gid')}"),
        ("uid_map (inside, bwrap's, count)", r.get("uid_map")),
        ("scratch mode / owner", f"{r.get('scratch_mode')} / {r.get('scratch_uid')}"),
        ("CapEff / CapBnd", f"{r.get('cap_eff')} / {r.get('cap_bnd')}"),
        ("seccomp", f"{r.get('seccomp')} ({r.get('seccomp_mode')})"),
        ("no_new_privs", r.get("no_new_privs")),
        ("network interfaces", ", ".join(r.get("network_interfaces", [])) or "none"),
        ("memory cap (jail, RLIMIT_DATA)", f"{r.get('memory_cap_mb')} MB"),
        ("pids cap (RLIMIT_NPROC)", r.get("pids_cap")),
        ("CPU cap (RLIMIT_CPU)", f"{r.get('cpu_cap_s')} s"),
        ("/sys visible", r.get("sys_visible")),
        ("/proc/sys entries", r.get("proc_sys_entries")),
        ("writable paths", ", ".join(r.get("writable_paths", []))),
    ]
    lines = [f"{k:<34} {v}" for k, v in rows]
    bad = verdict(r)
    lines.append("verdict: " + ("every property holds" if not bad else "; ".join(bad)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    r = measure()
    print(json.dumps(r, indent=2) if "--json" in args else render(r))
    return 1 if verdict(r) else 0


if __name__ == "__main__":
    sys.exit(main())
