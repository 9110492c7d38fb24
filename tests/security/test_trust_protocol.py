"""Replies from a hostile worker: forged, extra or oversized frames are never believed.

The worker's own protocol stream is reached from a test hook that runs arbitrary Python in
it (what a policy that escaped the AST lint can do); it writes frames the supervisor must
refuse by killing the worker (a typed `crash`) without shifting later replies.
"""

from __future__ import annotations

import pytest

from tools.errors import ErrorKind

FIND_STREAM = """
import sys
f = sys._getframe()
while "proto_out" not in f.f_locals:
    f = f.f_back
out = f.f_locals["proto_out"]
"""


def _exec(session, code: str):
    return session._send({"op": "exec", "code": code}, 60, "exec")


def _cube(s, name: str):
    return s.call("add_primitive", {"kind": "cube", "name": name, "dimensions": [1, 1, 1]})


def test_forged_reply_with_wrong_id_kills_worker_and_later_replies_stay_paired(hostile_session):
    s = hostile_session
    assert _cube(s, "Before").ok
    pid = s.worker.proc.pid
    # A forged "success" frame written ahead of the real reply.
    reply, _, err = _exec(s, FIND_STREAM + "from tools.protocol import write_message\n"
                          "write_message(out, {'ok': True, 'id': 12345, 'output': {'forged': 1}})\n")
    assert err is not None and err.kind == ErrorKind.CRASH and "does not answer" in err.message
    r = _cube(s, "After")  # served by a fresh worker restored from the last commit
    assert r.ok and r.output.get("name", "After") == "After"
    assert s.worker.proc.pid != pid
    assert sorted(o["name"] for o in s.scene()["objects"]) == ["After", "Before"]
    assert s.call("get_scene", {}).output["objects"][0]["name"] == "After"


def test_extra_frame_with_a_guessed_id_does_not_shift_replies(hostile_session):
    """The worker answers the current request twice (its id is in the request it was given):
    the second frame is read as the reply to the next request, whose id it cannot know."""
    s = hostile_session
    code = FIND_STREAM + (
        "from tools.protocol import write_message\n"
        "req = f.f_locals['request']\n"
        "write_message(out, {'ok': True, 'id': req['id'], 'output': {'first': 1}})\n")
    reply, _, err = _exec(s, code)
    assert err is None and reply["output"] == {"first": 1}  # its own request: it may lie
    r = _cube(s, "Next")  # reads the stale real reply first: its id is the old one
    assert not r.ok and r.error.kind == ErrorKind.CRASH
    r = _cube(s, "Next")  # the first Next is not in the restored scene, committed or not
    assert r.ok
    assert [o["name"] for o in s.scene()["objects"]] == ["Next"]


@pytest.mark.parametrize("acknowledged_before", [True, False])
def test_a_commit_whose_reply_never_arrived_is_not_restored(hostile_session, acknowledged_before):
    """The worker commits a change and then sends a reply the supervisor refuses: the caller
    is told the call failed, so the restored scene must not hold the change (it did whenever
    the worker was fast enough to commit before it was killed). Also when no reply had
    reported a commit yet: the worker's `ready` says where the session starts."""
    s = hostile_session
    if acknowledged_before:
        assert _cube(s, "Kept").ok
    code = FIND_STREAM + (
        "import bpy\n"
        "from tools.protocol import write_message\n"
        "bpy.ops.mesh.primitive_cube_add()\n"
        "bpy.context.active_object.name = 'Unacknowledged'\n"
        "runtime.state.commit('add_primitive', {})\n"
        "write_message(out, {'ok': True, 'id': 1, 'output': {}})\n")
    _, _, err = _exec(s, code)
    assert err is not None and err.kind == ErrorKind.CRASH and "does not answer" in err.message
    kept = ["Kept"] if acknowledged_before else []
    assert [o["name"] for o in s.scene()["objects"]] == kept
    assert _cube(s, "After").ok  # the restored worker commits on after the commit it kept
    assert sorted(o["name"] for o in s.scene()["objects"]) == sorted(["After", *kept])


@pytest.mark.parametrize("blobs", [[256 << 20] * 6, [(256 << 20) + 1], [-1], ["x"]])
def test_oversized_or_bad_blob_list_is_refused_as_a_crash(hostile_session, blobs):
    s = hostile_session
    code = FIND_STREAM + (
        "import json, struct\n"
        "req = f.f_locals['request']\n"
        f"data = json.dumps({{'ok': True, 'id': req['id'], '_blobs': {blobs!r}}}).encode()\n"
        "out.write(struct.pack('>2sxxI', b'MW', len(data)) + data)\n"
        "out.write(b'\\0' * 4096)\n")
    _reply, _, err = _exec(s, code)
    assert err is not None and err.kind == ErrorKind.CRASH and "bad reply" in err.message
    assert _cube(s, "Fine").ok  # a fresh worker serves the session


def test_malformed_error_from_worker_is_a_typed_crash(hostile_session):
    s = hostile_session
    _reply, _, err = _exec(s, "runtime.handle = lambda req, blobs: "
                              "({'ok': False, 'error': {'kind': 'root'}}, [])")
    assert err is None
    r = _cube(s, "X")
    assert not r.ok and r.error.kind == ErrorKind.CRASH and "malformed" in r.error.message
