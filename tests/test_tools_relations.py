"""A moved object gets its world matrix without an evaluation of the whole scene: the bits
equal what the evaluation writes, objects that follow others still follow them, and what the
worker knows about parents is read again after every load (undo, restore)."""

import random

from tools.cli.fuzz import write_cubes

# Test hook code: count the dependency-graph evaluations of the worker's scene from now on.
COUNT_EVALUATIONS = """
import bpy
def _count(scene, depsgraph):
    runtime.evaluations = getattr(runtime, "evaluations", 0) + 1
bpy.app.handlers.depsgraph_update_post.append(_count)
"""
REPORT_EVALUATIONS = """
import os
with open(os.path.join(runtime.workspace, "evaluations.txt"), "w") as f:
    f.write(str(getattr(runtime, "evaluations", 0)))
"""


def ok(r):
    assert r.ok, r.error
    return r.output


def hash_check(session) -> dict:
    return session._send_test_op({"op": "hash_check"})


def evaluated_hash(session) -> str:
    """The scene hash from a full walk after the dependency graph was evaluated (`measure`
    evaluates it; Blender then writes every moved object's world matrix itself)."""
    ok(session.call("measure", {"name": "anchor"}))
    return hash_check(session)["full"]


def located(session, name: str) -> list[float]:
    out = ok(session.call("get_scene", {"filter": name}))
    return out["objects"][0]["location"]


def test_a_placed_world_matrix_is_the_one_the_evaluation_writes(session):
    rng = random.Random(7)
    ok(session.call("add_primitive", {"kind": "cube", "name": "anchor", "dimensions": [1, 1, 1]}))
    for i in range(6):
        ok(session.call("add_primitive", {
            "kind": rng.choice(["cube", "cylinder", "uv_sphere"]), "name": f"p{i}",
            "dimensions": [1, 2, 0.5], "location": [rng.uniform(-50, 50) for _ in range(3)],
            "rotation_deg": [rng.uniform(-360, 360) for _ in range(3)]}))
    for step in range(24):
        name = f"p{rng.randrange(6)}"
        ok(session.call("transform", {
            "name": name, "location": [rng.uniform(-50, 50) for _ in range(3)],
            "rotation_deg": [rng.uniform(-360, 360) for _ in range(3)],
            "scale": [rng.uniform(0.01, 40) for _ in range(3)]}))
        if step % 8 == 0:
            ok(session.call("duplicate", {"name": name, "new_name": f"d{step}",
                                          "location": [step, -step, 0.5]}))
    ok(session.call("add_light", {"kind": "point", "name": "lamp", "location": [1, 2, 3]}))
    placed = session.scene_hash()
    assert hash_check(session)["full"] == placed
    assert evaluated_hash(session) == placed == session.scene_hash()


def test_moving_a_free_object_does_not_evaluate_the_scene(session):
    write_cubes(session.workspace / "many.obj", 250)  # calls journaled: no main file written
    ok(session.call("import_file", {"path": "many.obj"}))
    session._send_test_op({"op": "exec", "code": COUNT_EVALUATIONS})

    def evaluations() -> int:
        session._send_test_op({"op": "exec", "code": REPORT_EVALUATIONS})
        return int((session.workspace / "evaluations.txt").read_text())

    for i in range(3):
        ok(session.call("transform", {"name": "cube_00001", "location": [i, 0, 0]}))
    ok(session.call("add_primitive", {"kind": "cube", "name": "anchor", "dimensions": [1, 1, 1]}))
    ok(session.call("duplicate", {"name": "anchor", "new_name": "twin", "location": [0, 3, 0]}))
    ok(session.call("add_light", {"kind": "sun", "name": "sun", "location": [0, 0, 9]}))
    assert evaluations() == 0
    ok(session.call("parent", {"child": "twin", "parent": "anchor"}))  # evaluates: the hook counts
    assert evaluations() > 0


def test_children_follow_after_parenting_unparenting_undo_and_restore(session):
    ok(session.call("add_primitive", {"kind": "cube", "name": "anchor", "dimensions": [1, 1, 1]}))
    ok(session.call("add_primitive", {"kind": "cube", "name": "kid", "dimensions": [1, 1, 1],
                                      "location": [0, 2, 0]}))
    ok(session.call("transform", {"name": "anchor", "location": [1, 0, 0]}))  # no parents yet
    ok(session.call("parent", {"child": "kid", "parent": "anchor"}))  # the first parent
    ok(session.call("transform", {"name": "anchor", "location": [5, 0, 0]}))
    assert located(session, "kid") == [4.0, 2.0, 0.0]
    assert evaluated_hash(session) == session.scene_hash()
    ok(session.call("snapshot", {"name": "family"}))

    ok(session.call("parent", {"child": "kid", "parent": None}))  # no parents any more
    ok(session.call("transform", {"name": "anchor", "location": [9, 0, 0]}))
    assert located(session, "kid") == [4.0, 2.0, 0.0]
    ok(session.call("undo", {"steps": 2}))  # a load brings the parent back
    ok(session.call("transform", {"name": "anchor", "location": [-3, 0, 0]}))
    assert located(session, "kid") == [-4.0, 2.0, 0.0]
    assert evaluated_hash(session) == session.scene_hash() == hash_check(session)["full"]

    ok(session.call("clear_scene", {}))
    ok(session.call("add_primitive", {"kind": "cube", "name": "anchor", "dimensions": [1, 1, 1]}))
    ok(session.call("transform", {"name": "anchor", "location": [2, 0, 0]}))  # no parents
    ok(session.call("restore", {"name": "family"}))  # a load: parents are read again
    ok(session.call("transform", {"name": "anchor", "location": [0, 0, 0]}))
    assert located(session, "kid") == [-1.0, 2.0, 0.0]
    assert evaluated_hash(session) == session.scene_hash() == hash_check(session)["full"]
