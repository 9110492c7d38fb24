"""Worker entry point: cap the process, load the kernels, serve calls until stdin closes.

The caps are set before anything untrusted runs, soft and hard alike, so code in the worker
cannot raise them again (that needs CAP_SYS_RESOURCE, which the jail drops).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import traceback


def _harden(memory_mb: int, max_procs: int, cpu_s: int, disk_mb: int = 8192) -> None:
    caps = {
        resource.RLIMIT_CORE: 0,  # no core dumps of a jailed process
        # no runaway file, and none bigger than the scratch may hold (tools/sandbox/diskwatch.py)
        resource.RLIMIT_FSIZE: min(4 << 30, disk_mb << 20),
        # RLIMIT_DATA, not RLIMIT_AS: bpy, Mesa and OCCT reserve far more address space than
        # they touch, and RLIMIT_AS counts the reservations; DATA counts writable private memory
        resource.RLIMIT_DATA: memory_mb << 20,
        # counted per uid inside the worker's own user namespace: the threads and processes of
        # this one jail (a fork bomb stops here, not at the host's limit)
        resource.RLIMIT_NPROC: max_procs,
    }
    for what, value in caps.items():
        _, hard = resource.getrlimit(what)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(what, (value, value))
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    cpu_hard = cpu_s + 5 if hard == resource.RLIM_INFINITY else min(cpu_s + 5, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (min(cpu_s, cpu_hard), cpu_hard))  # SIGXCPU, then KILL
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), min(1024, hard)))
    try:  # die with the supervisor even outside bubblewrap
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scratch", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--restore", action="store_true")
    parser.add_argument("--restore-upto", type=int, default=None)
    parser.add_argument("--test-hooks", action="store_true")
    parser.add_argument("--preload-cad", action="store_true")
    parser.add_argument("--no-warm-render", dest="warm_render", action="store_false")
    parser.add_argument("--memory-mb", type=int, default=4096)
    parser.add_argument("--max-procs", type=int, default=256)
    parser.add_argument("--cpu-s", type=int, default=4 * 3600)
    parser.add_argument("--disk-mb", type=int, default=8192)
    opts = parser.parse_args()

    # The protocol owns the original stdout; anything Blender prints goes to stderr.
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    proto_in = sys.stdin.buffer
    _harden(opts.memory_mb, opts.max_procs, opts.cpu_s, opts.disk_mb)

    from tools.protocol import ProtocolError, read_message, write_message

    t0 = time.perf_counter()
    try:
        from tools.worker.runtime import WorkerRuntime

        runtime = WorkerRuntime(opts.scratch, opts.workspace, test_hooks=opts.test_hooks, restore=opts.restore,
                                preload_cad=opts.preload_cad, warm_render=opts.warm_render,
                                restore_upto=opts.restore_upto, disk_mb=opts.disk_mb)
    except Exception:
        write_message(proto_out, {"ready": False, "error": traceback.format_exc(limit=5)})
        return
    write_message(proto_out, {"ready": True, "pid": os.getpid(), "startup_s": time.perf_counter() - t0,
                              "versions": runtime.versions(), "commit": runtime.state.head()})
    while True:
        try:
            request, blobs = read_message(proto_in)
        except ProtocolError:
            return  # supervisor gone
        reply, out_blobs = runtime.handle(request, blobs)
        write_message(proto_out, {**reply, "id": request.get("id")}, out_blobs)  # echoed: replies pair with requests
