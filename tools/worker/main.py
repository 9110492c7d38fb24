"""Worker entry point: harden the process, load the kernels, serve calls until stdin closes."""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import traceback


def _harden() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core dumps of a jailed process
    resource.setrlimit(resource.RLIMIT_FSIZE, (4 << 30, 4 << 30))  # no runaway file
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
    parser.add_argument("--test-hooks", action="store_true")
    opts = parser.parse_args()

    # The protocol owns the original stdout; anything Blender prints goes to stderr.
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    proto_in = sys.stdin.buffer
    _harden()

    from tools.protocol import ProtocolError, read_message, write_message

    t0 = time.perf_counter()
    try:
        from tools.worker.runtime import WorkerRuntime

        runtime = WorkerRuntime(opts.scratch, opts.workspace, test_hooks=opts.test_hooks, restore=opts.restore)
    except Exception:
        write_message(proto_out, {"ready": False, "error": traceback.format_exc(limit=5)})
        return
    write_message(proto_out, {"ready": True, "pid": os.getpid(), "startup_s": time.perf_counter() - t0,
                              "versions": runtime.versions()})
    while True:
        try:
            request, blobs = read_message(proto_in)
        except ProtocolError:
            return  # supervisor gone
        reply, out_blobs = runtime.handle(request, blobs)
        write_message(proto_out, {**reply, "id": request.get("id")}, out_blobs)  # echoed: replies pair with requests
