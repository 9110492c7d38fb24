"""Helpers of the security suite: run hostile Python inside a worker past the script lint.

The AST check of `cadquery_script` is a lint, not the boundary: these payloads reach real
`os`/`importlib` through stdlib modules' private references, then run a probe with real
builtins. What the probe can DO is what the jail must make harmless.
"""

from __future__ import annotations

import json
import os
import uuid

import pytest

from tools import ToolSession

# Each stage one ends with `imp`, the worker's real importlib.import_module.
BYPASSES = {
    "dataclasses.sys": "import dataclasses\nimp = dataclasses.sys.modules['importlib'].import_module\n",
    "random._os": "import random\nimp = random._os.sys.modules['importlib'].import_module\n",
    "typing.sys": "import typing\nimp = typing.sys.modules['importlib'].import_module\n",
    "operator.attrgetter": (
        "import operator, collections\n"
        "g = operator.attrgetter('__globals__')(collections.namedtuple)\n"
        "imp = g['_sys'].modules['importlib'].import_module\n"),
    "generator frames": (
        "def gen():\n    yield me.gi_frame.f_back.f_back.f_globals\n"
        "me = gen()\ng = next(me)\n"
        "imp = g['os'].sys.modules['importlib'].import_module\n"),
}


def payload(probe: str, report: str, params: dict, bypass: str = "dataclasses.sys") -> str:
    """A cadquery_script that escapes the lint, runs `probe` with real builtins, and writes
    the probe's `out` dict as JSON to `report` (a path in the session's workspace)."""
    return (BYPASSES[bypass]
            + "bi = imp('builtins')\n"
            + f"bi.exec({PRELUDE + probe + EPILOGUE!r}, "
            + f"{{'__builtins__': bi, 'REPORT': {report!r}, 'PARAMS': {json.dumps(params)!r}}})\n"
            + "import cadquery as cq\nresult = cq.Workplane().box(1, 1, 1)\n")


PRELUDE = '''
import ctypes, errno, json, os, socket, sys
PARAMS = json.loads(PARAMS)
out = {}
libc = ctypes.CDLL(None, use_errno=True)

def attempt(name, fn):
    try:
        out[name] = "ok: " + repr(fn())[:200]
    except BaseException as e:
        out[name] = "refused: " + type(e).__name__ + " " + str(e)[:200]

def sys_call(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if r == -1:
        err = ctypes.get_errno()
        raise OSError(err, errno.errorcode.get(err, str(err)))
    return r
'''
EPILOGUE = '''
with open(REPORT, "w") as f:
    json.dump(out, f)
'''


def run_probe(session, probe: str, params: dict | None = None, bypass: str = "dataclasses.sys",
              deadline_s: float = 60) -> dict:
    """Run `probe` in the session's worker through `bypass`; the probe's `out` dict."""
    name = f"report-{uuid.uuid4().hex[:8]}.json"
    report = os.path.join(str(session.workspace), name)
    code = payload(probe, report, params or {}, bypass)
    r = session.call("cadquery_script", {"code": code, "name": "probe"}, deadline_s=deadline_s)
    assert r.ok, f"the payload itself failed (the lint changed?): {r.error}"
    with open(report) as f:
        return json.load(f)


@pytest.fixture
def fresh_session(worker_pool):
    """A session of its own (for attacks that may break the worker)."""
    s = ToolSession(worker_pool, deadline_s=60)
    yield s
    s.close()
