"""Without a working jail, untrusted input is refused unless the user opts in by name; the
seccomp program is well-formed for each supported arch."""

from __future__ import annotations

import struct

import pytest

from tools import ErrorKind, ToolSession
from tools.sandbox import jail, seccomp

SCRIPT = {"code": "import cadquery as cq\nresult = cq.Workplane().box(1, 1, 1)", "name": "p"}
CUBE = {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}


@pytest.fixture
def no_jail(monkeypatch):
    # `jailed`, not `mode`: the pool's spares boot in the background meanwhile and must stay
    # jailed for the tests after this one
    monkeypatch.setattr(jail, "jailed", lambda: False)
    monkeypatch.delenv(jail.ALLOW_UNJAILED_ENV, raising=False)


def test_untrusted_tools_are_refused_without_a_jail(session, no_jail):
    for tool, args in (("cadquery_script", SCRIPT), ("import_file", {"path": "x.glb"})):
        r = session.call(tool, args)
        assert not r.ok and r.error.kind == ErrorKind.SANDBOX
        assert jail.ALLOW_UNJAILED_ENV in r.error.message and "doctor" in r.error.message
    assert session.call("add_primitive", CUBE).ok  # structured calls are not code


def test_mcp_sessions_refuse_every_call_without_a_jail(worker_pool, no_jail):
    with ToolSession(worker_pool, untrusted=True) as s:
        r = s.call("add_primitive", CUBE)
        assert not r.ok and r.error.kind == ErrorKind.SANDBOX


def test_the_opt_in_says_what_it_does(session, no_jail, monkeypatch):
    monkeypatch.setenv(jail.ALLOW_UNJAILED_ENV, "1")
    assert session.call("cadquery_script", SCRIPT).ok


@pytest.mark.parametrize("arch", [seccomp.AUDIT_ARCH_X86_64, seccomp.AUDIT_ARCH_AARCH64])
def test_seccomp_program_is_well_formed(arch):
    prog = seccomp.program(arch)
    ins = [struct.unpack("<HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
    assert len(prog) % 8 == 0 and len(ins) < 4096
    assert ins[0] == (seccomp.LD_W_ABS, 0, 0, seccomp.OFF_ARCH) and ins[1][3] == arch
    for pc, (code, jt, jf, _) in enumerate(ins):  # every jump lands inside the program
        if code & 0x07 == 0x05:
            assert pc + 1 + max(jt, jf) < len(ins)
    assert ins[-1][0] == seccomp.RET_K and ins[-1][3] == seccomp.RET_KILL_PROCESS
    denied = {k for code, _, _, k in ins if code == seccomp.JEQ_K}
    assert {seccomp.SYSCALLS[arch][n] for n in ("mount", "unshare", "ptrace", "bpf")} <= denied
