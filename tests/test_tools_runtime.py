"""Each tool against real Blender and CadQuery in a sandboxed worker."""

import io

import numpy as np
import pytest
from PIL import Image

from tools import ErrorKind, ToolSession

PLATE = """
import cadquery as cq
result = (cq.Workplane("XY").box(40, 30, 5, centered=(True, True, False))
          .faces(">Z").workplane().rect(30, 20, forConstruction=True).vertices().hole(4))
"""


def ok(r):
    assert r.ok, r.error
    return r.output


def obj(scene, name):
    return next(o for o in scene["objects"] if o["name"] == name)


def test_primitives_have_their_bounding_dimensions(session):
    for i, kind in enumerate(["cube", "cylinder", "uv_sphere", "cone", "torus"]):
        ok(session.call("add_primitive", {"kind": kind, "name": kind, "dimensions": [2, 2, 1],
                                          "location": [i * 3, 0, 0.5]}))
    ok(session.call("add_primitive", {"kind": "plane", "name": "floor", "dimensions": [10, 4, 0]}))
    scene = session.scene()
    for kind in ["cube", "cylinder", "uv_sphere", "cone", "torus"]:
        o = obj(scene, kind)
        assert o["dimensions"] == pytest.approx([2, 2, 1], abs=1e-3), kind
        assert o["source"] == "blender" and o["faces"] > 0
    assert obj(scene, "floor")["dimensions"][:2] == pytest.approx([10, 4])
    r = session.call("add_primitive", {"kind": "cube", "name": "cube", "dimensions": [1, 1, 1]})
    assert r.error.kind == ErrorKind.VALIDATION and "exists" in r.error.message


def test_transform_material_and_world_bbox(session):
    ok(session.call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [2, 1, 1]}))
    ok(session.call("transform", {"name": "A", "location": [1, 2, 3], "rotation_deg": [0, 0, 90], "scale": [1, 1, 2]}))
    ok(session.call("set_material", {"name": "A", "color": "#FF8000", "metallic": 0.5, "roughness": 0.2}))
    a = obj(session.scene(), "A")
    assert a["location"] == pytest.approx([1, 2, 3])
    assert a["rotation_deg"] == pytest.approx([0, 0, 90], abs=1e-4)
    assert a["bbox_min"] == pytest.approx([0.5, 1, 2], abs=1e-5)  # rotated: x and y swap
    assert a["bbox_max"] == pytest.approx([1.5, 3, 4], abs=1e-5)
    assert a["material"] == {"color": "#FF8000", "metallic": 0.5, "roughness": 0.2}
    r = session.call("transform", {"name": "missing", "location": [0, 0, 0]})
    assert r.error.kind == ErrorKind.VALIDATION and "A" in r.error.message  # lists what exists


def test_boolean_duplicate_rename_parent_join_delete(session):
    ok(session.call("add_primitive", {"kind": "cube", "name": "block", "dimensions": [2, 2, 2]}))
    ok(session.call("add_primitive", {"kind": "cylinder", "name": "drill", "dimensions": [1, 1, 4]}))
    m0 = ok(session.call("measure", {"name": "block"}))["volume"]
    ok(session.call("boolean", {"target": "block", "cutter": "drill", "operation": "difference"}))
    scene = session.scene()
    assert [o["name"] for o in scene["objects"]] == ["block"]
    m1 = ok(session.call("measure", {"name": "block"}))["volume"]
    assert m1 == pytest.approx(m0 - np.pi * 0.25 * 2, rel=0.01)
    ok(session.call("duplicate", {"name": "block", "new_name": "copy", "location": [5, 0, 0]}))
    ok(session.call("rename", {"name": "copy", "new_name": "twin"}))
    ok(session.call("parent", {"child": "twin", "parent": "block"}))
    assert obj(session.scene(), "twin")["parent"] == "block"
    ok(session.call("transform", {"name": "block", "location": [0, 0, 1]}))
    assert obj(session.scene(), "twin")["location"] == pytest.approx([5, 0, 1])
    cycle = session.call("parent", {"child": "block", "parent": "twin"})
    assert cycle.error.kind == ErrorKind.VALIDATION
    ok(session.call("add_primitive", {"kind": "cube", "name": "c", "dimensions": [1, 1, 1], "location": [9, 0, 0]}))
    ok(session.call("join", {"into": "twin", "others": ["c"]}))
    assert {o["name"] for o in session.scene()["objects"]} == {"block", "twin"}
    ok(session.call("delete", {"name": "block"}))
    assert obj(session.scene(), "twin")["parent"] is None


def test_modifiers_and_light(session):
    ok(session.call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}))
    ok(session.call("modifier", {"name": "A", "kind": "array", "count": 3, "offset": [1.5, 0, 0]}))
    assert obj(session.scene(), "A")["dimensions"] == pytest.approx([4, 1, 1])
    ok(session.call("modifier", {"name": "A", "kind": "bevel", "width": 0.1}))
    assert obj(session.scene(), "A")["faces"] > 18
    ok(session.call("add_light", {"kind": "sun", "name": "sun"}))
    assert obj(session.scene(), "sun")["type"] == "light"


def test_cad_parts_live_in_the_scene_and_renders(session):
    out = ok(session.call("cadquery_script", {"code": PLATE, "name": "plate"}))
    assert out["valid"] and out["volume"] == pytest.approx(40 * 30 * 5 - 4 * np.pi * 4 * 5, rel=1e-6)
    p = obj(session.scene(), "plate")
    # authored in millimetres, shown in the scene in metres (the kernel boundary converts)
    assert p["source"] == "cad" and p["dimensions"] == pytest.approx([0.04, 0.03, 0.005], abs=1e-6)
    ok(session.call("cad_box", {"name": "blk", "length": 10, "width": 10, "height": 10}))
    ok(session.call("cad_fillet", {"name": "blk", "edges": "|Z", "radius": 2}))
    q = ok(session.call("cad_query", {"name": "blk"}))
    assert q["volume"] == pytest.approx(1000 - 4 * (4 - np.pi) * 10, rel=1e-6)
    bad = session.call("cad_fillet", {"name": "blk", "edges": "|Z", "radius": 50})
    assert bad.error.kind == ErrorKind.KERNEL
    assert ok(session.call("cad_query", {"name": "blk"}))["volume"] == pytest.approx(q["volume"])  # rolled back
    ok(session.call("cad_hole", {"name": "blk", "diameter": 3, "positions": [[0, 0]], "counterbore_diameter": 6,
                                 "counterbore_depth": 2}))
    ok(session.call("cad_box", {"name": "tray", "length": 10, "width": 10, "height": 5}))
    ok(session.call("cad_shell", {"name": "tray", "faces": ">Z", "thickness": 1}))
    assert ok(session.call("cad_query", {"name": "tray"}))["volume"] == pytest.approx(500 - 8 * 8 * 4, rel=1e-6)
    ok(session.call("cad_revolve", {"name": "shaft", "points": [[0, 0], [5, 0], [5, 10], [3, 10], [3, 30], [0, 30]]}))
    assert ok(session.call("cad_query", {"name": "shaft"}))["volume"] == pytest.approx(np.pi * (25 * 10 + 9 * 20), rel=1e-6)
    ok(session.call("cad_sketch_extrude", {"name": "slab", "profile": {"kind": "rect", "width": 4, "height": 2}, "distance": 1}))
    pos = ok(session.call("cad_pattern", {"kind": "circle", "count": 4, "radius": 10}))["positions"]
    assert pos[1] == pytest.approx([0, 10])
    # a rerun replaces the part's mesh, keeping its name
    ok(session.call("cadquery_script", {"code": "import cadquery as cq\nresult = cq.Workplane().sphere(3)", "name": "plate"}))
    assert obj(session.scene(), "plate")["dimensions"] == pytest.approx([0.006] * 3, abs=5e-5)
    # a CAD part moved in Blender is queried in world space: 0.1 m in the scene is 100 mm
    ok(session.call("transform", {"name": "shaft", "location": [0.1, 0, 0]}))
    assert ok(session.call("cad_query", {"name": "shaft"}))["bbox_min"][0] == pytest.approx(95, abs=1e-3)
    img = Image.open(io.BytesIO(session.render(size=128).images[0]))
    assert img.size == (256, 256)


def test_cad_boolean_is_exact_and_script_result_conventions(session):
    ok(session.call("cad_box", {"name": "a", "length": 10, "width": 10, "height": 10}))
    ok(session.call("cad_cylinder", {"name": "b", "radius": 2, "height": 20}))
    ok(session.call("boolean", {"target": "a", "cutter": "b", "operation": "difference"}))
    assert ok(session.call("cad_query", {"name": "a"}))["volume"] == pytest.approx(1000 - np.pi * 4 * 10, rel=1e-9)
    conventions = {
        "show": "import cadquery as cq\nshow_object(cq.Workplane().box(1, 2, 3))",
        "export": "import cadquery as cq\nw = cq.Workplane().box(1, 2, 3)\nx = cq.Workplane().box(9, 9, 9)\ncq.exporters.export(w, '/etc/out.step')",
        "single": "import cadquery as cq\npart = cq.Workplane().box(1, 2, 3)",
    }
    for name, code in conventions.items():
        out = ok(session.call("cadquery_script", {"code": code, "name": name}))
        assert out["volume"] == pytest.approx(6), name
    none = session.call("cadquery_script", {"code": "x = 1", "name": "n"})
    assert none.error.kind == ErrorKind.VALIDATION and "result" in none.error.message
    err = session.call("cadquery_script", {"code": "import cadquery as cq\n\nresult = cq.Workplane().box(1, 1, 1).fillet(5)", "name": "f"})
    assert err.error.kind == ErrorKind.KERNEL and "line 3" in err.error.message


def test_undo_snapshot_restore_hash(session):
    h0 = session.scene_hash()
    ok(session.call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}))
    ok(session.call("cad_box", {"name": "B", "length": 1, "width": 2, "height": 3}))
    ok(session.call("snapshot", {"name": "base"}))
    h1 = session.scene_hash()
    ok(session.call("transform", {"name": "A", "location": [1, 1, 1]}))
    ok(session.call("delete", {"name": "B"}))
    ok(session.call("set_material", {"name": "A", "color": "#123456"}))
    assert session.scene_hash() != h1
    ok(session.call("restore", {"name": "base"}))
    assert session.scene_hash() == h1
    assert ok(session.call("cad_query", {"name": "B"}))["volume"] == pytest.approx(6)
    ok(session.call("undo", {}))  # undoes the restore
    assert session.scene_hash() != h1
    ok(session.call("undo", {"steps": 3}))
    assert session.scene_hash() == h1
    ok(session.call("undo", {"steps": 2}))
    assert session.scene_hash() == h0
    r = session.call("undo", {})
    assert r.error.kind == ErrorKind.VALIDATION and "nothing to undo" in r.error.message
    r = session.call("restore", {"name": "nope"})
    assert r.error.kind == ErrorKind.VALIDATION and "base" in r.error.message


def test_render_is_deterministic_and_not_blank(session):
    ok(session.call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}))
    ok(session.call("set_material", {"name": "A", "color": "#E03020"}))
    a = session.render(size=128)
    b = session.render(size=128)
    assert a.images[0] == b.images[0]
    px = np.asarray(Image.open(io.BytesIO(a.images[0])).convert("RGB")).astype(int)
    assert px.shape == (256, 256, 3) and px.std() > 10
    red = (px[..., 0] > 150) & (px[..., 1] < 100)
    assert red.sum() > 500  # the red cube is visible
    single = session.render(views=["top"], size=64)
    assert Image.open(io.BytesIO(single.images[0])).size == (64, 64)
    cam = session.call("render", {"camera": {"location": [3, -3, 2], "target": [0, 0, 0]}, "size": 96})
    assert Image.open(io.BytesIO(cam.images[0])).size == (96, 96)


@pytest.mark.parametrize("seed", [0, 1])
def test_snapshot_and_undo_survive_random_mutations(session, seed):
    import random

    from tools import TOOLS
    from tools.cli.fuzz import value_for

    rng = random.Random(seed)
    ok(session.call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}))
    ok(session.call("cad_box", {"name": "B", "length": 1, "width": 1, "height": 1}))
    ok(session.call("snapshot", {"name": "s"}))
    base = session.scene_hash()
    mutators = ["add_primitive", "transform", "set_material", "duplicate", "rename", "delete", "modifier",
                "cad_box", "cad_fillet", "cad_hole", "boolean", "parent", "add_light"]
    applied = 0
    while applied < 12:
        tool = rng.choice(mutators)
        args = value_for(TOOLS[tool].schema(), rng)
        for key in ("name", "target", "cutter", "child", "parent"):
            if key in args and rng.random() < 0.7:
                args[key] = rng.choice(["A", "B"])
        applied += session.call(tool, args).ok
    assert session.scene_hash() != base
    ok(session.call("restore", {"name": "s"}))
    assert session.scene_hash() == base
    ok(session.call("undo", {}))  # the restore itself is one undo step
    ok(session.call("undo", {"steps": applied}))
    assert session.scene_hash() == base


def test_cad_parts_show_in_renders(session):
    empty = np.asarray(Image.open(io.BytesIO(session.render(views=["top"], size=96).images[0]))).astype(int)
    ok(session.call("cad_box", {"name": "B", "length": 1, "width": 1, "height": 1}))
    with_part = np.asarray(Image.open(io.BytesIO(session.render(views=["top"], size=96).images[0]))).astype(int)
    centre = (slice(30, 66), slice(30, 66))
    assert np.abs(with_part[centre] - empty[centre]).mean() > 20


def test_scene_hash_is_the_same_in_another_worker_process(session):
    """Replay depends on it: Blender emits some primitives' faces in a per-process order."""
    from tools import WorkerPool

    calls = [("add_primitive", {"kind": k, "name": k, "dimensions": [2, 2, 1]})
             for k in ("uv_sphere", "torus", "cylinder", "cone", "cube")]
    calls.append(("cad_cylinder", {"name": "pin", "radius": 1, "height": 3}))
    for tool, args in calls:
        ok(session.call(tool, args))
    other_pool = WorkerPool(size=0, prewarm=False)
    try:
        with ToolSession(other_pool) as other:
            for tool, args in calls:
                ok(other.call(tool, args))
            assert other.scene_hash() == session.scene_hash()
            ok(other.call("transform", {"name": "torus", "rotation_deg": [0, 0, 1]}))
            assert other.scene_hash() != session.scene_hash()
    finally:
        other_pool.close()


def test_visibility_and_wireframe(session):
    ok(session.call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}))
    ok(session.call("set_material", {"name": "A", "color": "#E03020"}))
    shown = session.render(views=["top"], size=96).images[0]
    h = session.scene_hash()
    ok(session.call("set_visible", {"name": "A", "visible": False}))
    assert obj(session.scene(), "A")["visible"] is False and session.scene_hash() != h
    hidden = np.asarray(Image.open(io.BytesIO(session.render(views=["top"], size=96).images[0]))).astype(int)
    assert not ((hidden[..., 0] > 150) & (hidden[..., 1] < 100)).any()  # no red cube
    ok(session.call("undo", {}))
    assert session.scene_hash() == h
    wire = session.call("render", {"views": ["top"], "size": 96, "shading": "wireframe"}).images[0]
    solid = np.asarray(Image.open(io.BytesIO(shown))).astype(int)
    red = lambda px: ((px[..., 0] > 150) & (px[..., 1] < 100)).sum()  # noqa: E731
    assert red(np.asarray(Image.open(io.BytesIO(wire))).astype(int)) < red(solid) / 3


def test_switch_parks_and_takes_whole_session_states(session):
    """Rollouts sharing a worker swap whole states: scene, undo history and snapshots."""
    cube = {"kind": "cube", "dimensions": [1, 1, 1]}
    ok(session.call("add_primitive", {**cube, "name": "Start"}))
    start = session.scene_hash()
    session.switch(park="start", take=None)  # park the start; an empty scene is live
    assert session.scene()["objects"] == []
    assert session.switch(park=None, take="start", fork=True) == start  # rollout A forks it
    ok(session.call("add_primitive", {**cube, "name": "A", "location": [2, 0, 0]}))
    ok(session.call("snapshot", {"name": "mine"}))
    session.switch(park="A", take="start", fork=True)  # rollout B forks it too
    ok(session.call("add_primitive", {**cube, "name": "B", "location": [0, 2, 0]}))
    # B's history and snapshots are its own: A's snapshot is not there, and its undo steps
    # are the start's history plus B's own call (A's call is not among them).
    r = session.call("restore", {"name": "mine"})
    assert r.error.kind == ErrorKind.VALIDATION and "mine" in r.error.message
    assert session.status()["undo_depth"] == 2  # empty scene -> Start -> B
    ok(session.call("undo", {"steps": 1}))
    assert session.scene_hash() == start
    session.switch(park="B", take="A")  # back to A, exactly as it was
    assert {o["name"] for o in session.scene()["objects"]} == {"Start", "A"}
    ok(session.call("restore", {"name": "mine"}))  # A's own snapshot is back with it
    ok(session.call("undo", {"steps": 2}))  # past the restore point, then A's call
    assert session.scene_hash() == start
    # A missing state is refused and nothing changes; a bad key is refused.
    before = session.scene_hash()
    with pytest.raises(Exception, match="no stashed state"):
        session.switch(park="A2", take="nope")
    assert session.scene_hash() == before
    with pytest.raises(Exception, match="bad stash key"):
        session.switch(park="../x", take="B")
    session.switch(park=None, take="B")  # moved, not copied: B can be taken once
    with pytest.raises(Exception, match="no stashed state"):
        session.switch(park=None, take="B")


def test_resets_keep_one_script_stripping_load_hook(session):
    """Each reset hardens Blender again (factory settings restore the preferences), but the
    load hook that strips scripts is persistent: it stays one, or every later load (undo,
    restore, recovery) would strip the whole scene once per reset so far."""
    for _ in range(3):
        session.reset()
    code = ("import bpy, os\nfrom tools.worker import safety\n"
            "n = sum(h is safety._after_load for h in bpy.app.handlers.load_post)\n"
            "open(os.path.join(runtime.workspace, 'hooks.txt'), 'w').write(str(n))\n")
    session._send_test_op({"op": "exec", "code": code})
    assert (session.workspace / "hooks.txt").read_text() == "1"
    assert not session.call("get_scene", {}).output["objects"]
