"""The seccomp filter of the worker jail, compiled to classic BPF for `bwrap --seccomp FD`.

A denylist (an allowlist would have to follow every syscall bpy, Mesa and OCCT make): the
calls that turn a contained process into an attack on the kernel or the host — mounts,
namespaces, ptrace, kernel modules and kexec, bpf, keyrings, handle-based opens that walk
past a bind mount, perf, io_uring, System V shared memory and message queues (RAM that lives
on with no process mapping it, so no memory watch sees it), terminal injection — fail with
EPERM. Sockets are an allowlist: `socket` and `socketpair` work for AF_UNIX alone, every other
family (inet, netlink, packet, vsock — vsock's port space is the host's, not the jail's
network namespace) fails with EAFNOSUPPORT, as on a kernel built without it. `clone3` fails with ENOSYS so that glibc falls back to `clone`, whose flags (unlike
clone3's struct) BPF can read and refuse when they ask for new namespaces. Any syscall ABI
other than the native one (i386 via int 0x80, x32) is refused outright.
"""

from __future__ import annotations

import errno
import platform
import struct

# linux/audit.h
AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
X32_SYSCALL_BIT = 0x40000000

# linux/seccomp.h return actions
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
RET_KILL_PROCESS = 0x80000000

# linux/filter.h opcodes
LD_W_ABS = 0x20
JEQ_K = 0x15
JGE_K = 0x35
JSET_K = 0x45
RET_K = 0x06

# struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6] (low word first on LE)
OFF_NR, OFF_ARCH = 0, 4


def _arg_lo(i: int) -> int:
    return 16 + 8 * i


AF_UNIX = 1
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
CLONE_NAMESPACES = 0x7E020080  # NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWTIME

DENIED = ("mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
          "fsconfig", "fsmount", "fspick", "mount_setattr", "unshare", "setns", "ptrace",
          "process_vm_readv", "process_vm_writev", "kcmp", "kexec_load", "kexec_file_load",
          "init_module", "finit_module", "delete_module", "bpf", "keyctl", "add_key",
          "request_key", "open_by_handle_at", "name_to_handle_at", "perf_event_open", "reboot",
          "swapon", "swapoff", "userfaultfd", "io_uring_setup", "io_uring_enter",
          "io_uring_register", "acct", "quotactl", "syslog", "settimeofday", "clock_settime",
          "adjtimex", "clock_adjtime", "fanotify_init", "lookup_dcookie", "vhangup",
          "shmget", "msgget",
          # x86 only
          "iopl", "ioperm", "uselib", "_sysctl", "nfsservctl")

# numbers from asm/unistd_64.h (x86_64) and asm-generic/unistd.h (aarch64)
SYSCALLS = {
    AUDIT_ARCH_X86_64: {
        "ioctl": 16, "shmget": 29, "socket": 41, "socketpair": 53, "clone": 56, "msgget": 68, "ptrace": 101, "syslog": 103, "uselib": 134,
        "vhangup": 153, "pivot_root": 155, "_sysctl": 156, "adjtimex": 159, "chroot": 161,
        "acct": 163, "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167,
        "swapoff": 168, "reboot": 169, "iopl": 172, "ioperm": 173, "init_module": 175,
        "delete_module": 176, "quotactl": 179, "nfsservctl": 180, "lookup_dcookie": 212,
        "clock_settime": 227, "kexec_load": 246, "add_key": 248, "request_key": 249,
        "keyctl": 250, "unshare": 272, "perf_event_open": 298, "fanotify_init": 300,
        "name_to_handle_at": 303, "open_by_handle_at": 304, "clock_adjtime": 305, "setns": 308,
        "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "finit_module": 313,
        "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "clone3": 435,
        "mount_setattr": 442,
    },
    AUDIT_ARCH_AARCH64: {
        "lookup_dcookie": 18, "ioctl": 29, "umount2": 39, "mount": 40, "pivot_root": 41,
        "chroot": 51, "vhangup": 58, "quotactl": 60, "acct": 89, "unshare": 97,
        "kexec_load": 104, "init_module": 105, "delete_module": 106, "clock_settime": 112,
        "syslog": 116, "ptrace": 117, "reboot": 142, "settimeofday": 170, "adjtimex": 171,
        "msgget": 186, "shmget": 194, "socket": 198, "socketpair": 199, "add_key": 217, "request_key": 218, "keyctl": 219, "clone": 220,
        "swapon": 224, "swapoff": 225, "perf_event_open": 241, "fanotify_init": 262,
        "name_to_handle_at": 264, "open_by_handle_at": 265, "clock_adjtime": 266, "setns": 268,
        "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "finit_module": 273,
        "bpf": 280, "userfaultfd": 282, "kexec_file_load": 294, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "clone3": 435,
        "mount_setattr": 442,
    },
}
MACHINE_ARCH = {"x86_64": AUDIT_ARCH_X86_64, "amd64": AUDIT_ARCH_X86_64,
                "aarch64": AUDIT_ARCH_AARCH64, "arm64": AUDIT_ARCH_AARCH64}


def native_arch() -> int | None:
    """The audit arch of this machine, or None where no filter is defined for it."""
    return MACHINE_ARCH.get(platform.machine().lower())


class _Program:
    """Classic BPF with forward jumps to named labels, resolved at `assemble()`."""

    def __init__(self) -> None:
        self.ins: list[tuple[int, object, object, int]] = []
        self.labels: dict[str, int] = {}

    def emit(self, code: int, k: int, jt: object = 0, jf: object = 0) -> None:
        self.ins.append((code, jt, jf, k))

    def label(self, name: str) -> None:
        self.labels[name] = len(self.ins)

    def assemble(self) -> bytes:
        out = bytearray()
        for pc, (code, jt, jf, k) in enumerate(self.ins):
            offs = []
            for j in (jt, jf):
                off = self.labels[j] - pc - 1 if isinstance(j, str) else j
                if not 0 <= off <= 255:
                    raise ValueError(f"seccomp jump out of range at {pc}")
                offs.append(off)
            out += struct.pack("<HBBI", code, offs[0], offs[1], k)
        return bytes(out)


def program(arch: int | None = None) -> bytes:
    """The filter as the bytes of a `struct sock_filter[]`, for the machine's arch by default."""
    arch = native_arch() if arch is None else arch
    if arch not in SYSCALLS:
        raise ValueError(f"no seccomp filter for {platform.machine()}")
    nr = SYSCALLS[arch]
    p = _Program()
    p.emit(LD_W_ABS, OFF_ARCH)
    p.emit(JEQ_K, arch, 0, "kill")
    p.emit(LD_W_ABS, OFF_NR)
    if arch == AUDIT_ARCH_X86_64:
        p.emit(JGE_K, X32_SYSCALL_BIT, "eperm", 0)
    for name in DENIED:
        if name in nr:
            p.emit(JEQ_K, nr[name], "eperm", 0)
    p.emit(JEQ_K, nr["clone3"], "enosys", 0)
    p.emit(JEQ_K, nr["clone"], "clone", 0)
    p.emit(JEQ_K, nr["socket"], "socket", 0)
    p.emit(JEQ_K, nr["socketpair"], "socket", 0)
    p.emit(JEQ_K, nr["ioctl"], "ioctl", 0)
    p.emit(RET_K, RET_ALLOW)
    p.label("clone")
    p.emit(LD_W_ABS, _arg_lo(0))
    p.emit(JSET_K, CLONE_NAMESPACES, "eperm", "allow")
    # glibc's netlink lookups (getaddrinfo's AI_ADDRCONFIG, if_nameindex) fall back or fail
    # cleanly on EAFNOSUPPORT; the worker talks to nothing but its own pipes
    p.label("socket")
    p.emit(LD_W_ABS, _arg_lo(0))
    p.emit(JEQ_K, AF_UNIX, "allow", "eafnosupport")
    p.label("ioctl")
    p.emit(LD_W_ABS, _arg_lo(1))
    p.emit(JEQ_K, TIOCSTI, "eperm", 0)
    p.emit(JEQ_K, TIOCLINUX, "eperm", "allow")
    p.label("allow")
    p.emit(RET_K, RET_ALLOW)
    p.label("eperm")
    p.emit(RET_K, RET_ERRNO | errno.EPERM)
    p.label("eafnosupport")
    p.emit(RET_K, RET_ERRNO | errno.EAFNOSUPPORT)
    p.label("enosys")
    p.emit(RET_K, RET_ERRNO | errno.ENOSYS)
    p.label("kill")
    p.emit(RET_K, RET_KILL_PROCESS)
    return p.assemble()
