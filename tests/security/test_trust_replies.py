"""A hostile worker's replies are data: nesting, size, blob count and envelope are checked
before any caller reads them, and a reply that fails is a typed crash and a restart.

The worker's protocol stream is reached from the test hooks (arbitrary Python in the
worker, what a policy past the script lint can do) and, for the CLI, from a
`cadquery_script` that escapes the lint.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc

import pytest

from tools import protocol
from tools.errors import ErrorKind

from .conftest import payload
from .test_trust_protocol import FIND_STREAM, _cube, _exec

RAW = FIND_STREAM + """
import struct
req = f.f_locals['request']
data = DATA.replace(b'"ID"', str(req['id']).encode())
out.write(struct.pack('>2sxxI', b'MW', len(data)) + data)
"""


def _raw(data: str) -> str:
    """Code that sends the bytes the expression `data` makes, built in the worker (a frame
    over the cap would not fit in the request), as the JSON of the reply to the current
    request ("ID" is its id)."""
    return f"DATA = {data}\n" + RAW


def _refused(s, code: str, why: str) -> None:
    _reply, _, err = _exec(s, code)
    assert err is not None and err.kind == ErrorKind.CRASH, err
    assert "bad reply" in err.message and why in err.message, err.message
    assert _cube(s, "After").ok  # a fresh worker, restored, serves the session
    assert [o["name"] for o in s.scene()["objects"]] == ["After"]


HEAD = """b'{"ok":true,"id":"ID","output":{"x":'"""


@pytest.mark.parametrize("data, why", [
    (HEAD + " + b'[' * 100_000 + b']' * 100_000 + b'}}'", "deeper"),
    (HEAD + " + b'[' * 900 + b']' * 900 + b'}}'", "deeper"),
    (HEAD + f" + b'[' + b','.join([b'0'] * {protocol.MAX_ITEMS + 1}) + b']}}}}'", "items"),
    (HEAD + f" + b'[' + b','.join([b'{{}}'] * {protocol.MAX_CONTAINERS + 1}) + b']}}}}'", "arrays and objects"),
    ("""b'{"ok":true,"id":"ID","output":{},"rss_mb":NaN}'""", "not JSON"),
    (HEAD + f" + b'\"' + b'a' * {protocol.MAX_JSON} + b'\"}}}}'", "header"),
], ids=["nesting-100k", "nesting-900", "items", "containers", "nan", "oversized"])
def test_a_frame_past_the_json_bounds_is_a_crash(hostile_session, data, why):
    _refused(hostile_session, _raw(data), why)


@pytest.mark.parametrize("reply, why", [
    ({"ok": False}, "without an `error`"),
    ({"ok": False, "error": "boom"}, "without an `error`"),
    ({"ok": False, "error": {"kind": "root", "message": "x"}}, "unknown error kind"),
    ({"ok": False, "error": {"kind": "kernel", "message": 5}}, "error message"),
    ({"ok": False, "error": {"kind": "kernel", "message": "x" * 20_000}}, "error message"),
    ({"ok": "yes", "output": {}}, "`ok`"),
    ({"output": {}}, "`ok`"),
    ({"ok": True}, "without an `output`"),
    ({"ok": True, "output": [1]}, "without an `output`"),
    ({"ok": True, "output": {}, "scene_hash": 5}, "scene_hash"),
    ({"ok": True, "output": {}, "rss_mb": "lots"}, "rss_mb"),
    ({"ok": True, "output": {}, "commit": "../1"}, "commit"),
    ({"ok": True, "output": {}, "commit": True}, "commit"),
    ({"ok": True, "output": {}, "evil": 1}, "unexpected field"),
], ids=lambda v: json.dumps(v)[:40] if isinstance(v, dict) else None)
def test_a_reply_off_its_schema_is_a_crash(hostile_session, reply, why):
    """The forged reply answers a real tool call, through the worker's own reply path."""
    s = hostile_session
    _reply, _, err = _exec(s, f"runtime.handle = lambda req, blobs: ({reply!r}, [])")
    assert err is None
    r = _cube(s, "X")
    assert not r.ok and r.error.kind == ErrorKind.CRASH and "bad reply" in r.error.message
    assert why in r.error.message, r.error.message
    assert _cube(s, "After").ok
    assert [o["name"] for o in s.scene()["objects"]] == ["After"]


@pytest.mark.parametrize("op, blobs", [("call", 9), ("call", 50_000), ("status", 1)])
def test_more_blobs_than_the_op_sends_is_a_crash(hostile_session, op, blobs):
    s = hostile_session
    _reply, _, err = _exec(s, "runtime.handle = lambda req, blobs: "
                              f"({{'ok': True, 'output': {{}}}}, [b'x'] * {blobs})")
    assert err is None
    if op == "call":
        r = _cube(s, "X")
        assert not r.ok and r.error.kind == ErrorKind.CRASH and "blobs" in r.error.message
    else:
        with pytest.raises(Exception) as e:
            s._op({"op": "status"}, 60, "status")
        assert getattr(e.value, "kind", None) == ErrorKind.CRASH and "blobs" in e.value.message
    assert _cube(s, "After").ok


def test_a_meshes_reply_whose_counts_overrun_its_blob_is_a_crash(hostile_session):
    s = hostile_session
    entry = {"name": "A", "key": "k", "color": "#FFFFFF", "matrix": [0.0] * 16, "location": [0, 0, 0],
             "blob": 0, "nv": 1000, "nt": 0, "ne": 0}
    _exec(s, f"runtime.handle = lambda req, blobs: ({{'ok': True, 'output': {{'objects': [{entry!r}]}}}}, [b'x' * 24])")
    with pytest.raises(Exception) as e:
        s.meshes({})
    assert getattr(e.value, "kind", None) == ErrorKind.CRASH and "counts" in e.value.message
    assert _cube(s, "After").ok


@pytest.mark.parametrize("shape", ["strings", "ints", "objects", "escapes"])
def test_a_frame_under_every_cap_decodes_to_under_64_mb(shape):
    """The decoded size is bounded by the caps: the worst shapes that pass them (tiny values,
    each a Python object of ~50 bytes) stay far from the 1.68 GB a 60 MB reply cost."""
    item = {"strings": b'"ab"', "ints": b"1000", "objects": b'{"k":1}', "escapes": b'"\\ud83d\\ude00"'}[shape]
    cap = protocol.MAX_CONTAINERS if shape == "objects" else protocol.MAX_ITEMS
    n = min(cap - 10, (protocol.MAX_JSON - 64) // (len(item) + 1))
    data = b'{"ok":true,"output":{"x":[' + b",".join([item] * n) + b"]}}"
    tracemalloc.start()
    try:
        payload, _ = protocol.decode_payload(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(payload["output"]["x"]) == n
    assert peak < 64 << 20, peak


@pytest.mark.slow
def test_the_largest_real_replies_fit_the_caps(hostile_session):
    """get_scene's largest page (10,000 objects, the spec's cap) and the meshes op over as
    many objects: the caps were fit to these, with room to spare."""
    s = hostile_session
    _reply, _, err = _exec(s, """
import bpy, bmesh
me = bpy.data.meshes.new('m')
bm = bmesh.new(); bmesh.ops.create_cube(bm, size=1.0); bm.to_mesh(me); bm.free()
for i in range(10000):
    ob = bpy.data.objects.new('Object_with_a_fairly_long_name_%05d' % i, me)
    ob.location = (i, i * 0.5, 0)
    bpy.context.scene.collection.objects.link(ob)
runtime.state.commit('script', {})
""")
    assert err is None
    r = s.call("get_scene", {"limit": 10000}, deadline_s=300)
    assert r.ok and len(r.output["objects"]) == 10000
    out, blobs = s.meshes({})
    assert len(out["objects"]) == 10000 and len(blobs) == 10000


FORGE = """
import struct
f = sys._getframe()
while "proto_out" not in f.f_locals:
    f = f.f_back
out, req = f.f_locals["proto_out"], f.f_locals["request"]
data = PARAMS["data"].replace('"ID"', str(req["id"])).encode()
out.write(struct.pack(">2sxxI", b"MW", len(data)) + data)
out.flush()
"""
OSC = "\x1b]0;pwned\x07\x1b]52;c;cHduZWQ=\x07\u202e"


def test_cli_tools_run_reports_hostile_replies_in_one_line_each(tmp_path):
    """`modelwright tools run`: forged frames (deep nesting, a failure without an error, too
    many blobs) and OSC sequences in an error and in object names are one escaped line each."""
    calls = [{"tool": "cadquery_script", "args": {"name": "p", "code": payload(FORGE, "/dev/null", {"data": d})}}
             for d in ('{"ok":true,"id":"ID","output":' + "[" * 5000 + "]" * 5000 + "}",
                       '{"ok":false,"id":"ID"}',
                       '{"ok":true,"id":"ID","output":{},"_blobs":' + json.dumps([1] * 9) + "}")]
    rename = ("import bpy\nfor o in list(bpy.data.objects):\n"
              f"    if not o.get('mw_helper'): o.name = {OSC!r} + o.name\n")
    calls += [
        {"tool": "cadquery_script", "args": {"name": "q", "code": f"raise ValueError({OSC!r})"}},
        {"tool": "add_primitive", "args": {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}},
        {"tool": "cadquery_script", "args": {"name": "r", "code": payload(rename, "/dev/null", {})}},
        {"tool": "transform", "args": {"name": "missing", "location": [0, 0, 0]}},
    ]
    seq = tmp_path / "seq.jsonl"
    seq.write_text("".join(json.dumps(c) + "\n" for c in calls))
    p = subprocess.run([sys.executable, "-m", "studio.cli", "tools", "run", str(seq), "--out", str(tmp_path / "o"),
                        "--keep-going"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    for text in (p.stdout, p.stderr):
        assert not any(c in text for c in "\x1b\x07\x9b\x9d\u202e"), text[-2000:]
    lines = p.stderr.strip().splitlines()  # one `error:` line a failure, nothing else
    assert len(lines) == 5 and all(line.startswith("error: ") for line in lines), p.stderr
    assert all("(crash)" in line and "bad reply" in line for line in lines[:3]), lines
    assert "\\x1b]0;pwned\\x07" in lines[3] and "\\u202e" in lines[3]
    assert "\\x1b]52;c;" in lines[4] and "missing" in lines[4]  # the planted names, escaped
