"""Cost that follows the change, not the scene: the incremental hash and journaled undo points
equal a full recomputation, the model's scene listing stays bounded, and large scenes render
through the merged proxy. Sizes and counts are asserted, never times."""

import io
import json
import random

import pytest
from PIL import Image

from agents.loop.context import compact_scene
from tools.cli.fuzz import write_cubes

OBJECT_NAMES = [f"obj{i}" for i in range(8)]


def ok(r):
    assert r.ok, r.error
    return r.output


def hash_check(session, **opts) -> dict:
    """The worker's incremental hash against a full walk (a test hook)."""
    return session._send_test_op({"op": "hash_check", **opts})


@pytest.fixture
def journaling(session):
    """Journal every Blender edit, however small the scene (the default starts at 200 objects),
    and put the pooled worker back as it was afterwards."""
    hash_check(session, journal_from_objects=0)
    yield session
    hash_check(session, journal_from_objects=200)


def _random_call(rng: random.Random, names: list[str]) -> tuple[str, dict]:
    name = rng.choice(OBJECT_NAMES)
    other = rng.choice(OBJECT_NAMES)
    vec = [round(rng.uniform(-3, 3), 3) for _ in range(3)]
    kind = rng.choice(["add", "add", "transform", "transform", "material", "duplicate", "rename",
                       "parent", "unparent", "delete", "join", "modifier", "visible", "light",
                       "cad", "bad"])
    if kind == "add":
        return "add_primitive", {"kind": rng.choice(["cube", "cylinder", "uv_sphere", "cone"]),
                                 "name": name, "dimensions": [1, 1.5, 0.5], "location": vec}
    if kind == "transform":
        return "transform", {"name": name, "location": vec, "rotation_deg": [0, 0, rng.choice([0, 30, 90])]}
    if kind == "material":
        return "set_material", {"name": name, "color": rng.choice(["#FF0000", "#00AA33", "#2040FF"])}
    if kind == "duplicate":
        return "duplicate", {"name": name, "new_name": other}
    if kind == "rename":
        return "rename", {"name": name, "new_name": other}
    if kind == "parent":
        return "parent", {"child": name, "parent": other}
    if kind == "unparent":
        return "parent", {"child": name, "parent": None}
    if kind == "delete":
        return "delete", {"name": name}
    if kind == "join":
        return "join", {"into": name, "others": [other]}
    if kind == "modifier":
        return "modifier", {"name": name, "kind": rng.choice(["bevel", "array", "mirror"]),
                            "apply": rng.random() < 0.5}
    if kind == "visible":
        return "set_visible", {"name": name, "visible": rng.random() < 0.5}
    if kind == "light":
        return "add_light", {"kind": "point", "name": name, "location": vec}
    if kind == "cad":
        return "cad_box", {"name": name, "length": 1, "width": 2, "height": 0.5}
    return "transform", {"name": "no_such_object", "location": vec}


@pytest.mark.parametrize("seed", [0, 1])
def test_incremental_hash_and_journaled_undo_equal_full_recomputation(journaling, seed):
    session, rng = journaling, random.Random(seed)
    history = [session.scene_hash()]  # the hash of every undo point, oldest first
    for step in range(70):
        if step and step % 23 == 0:  # undo a few steps: journal entries replayed on a checkpoint
            k = rng.randint(1, 4)
            out = ok(session.call("undo", {"steps": k}))
            del history[-out["undone"]:]
            assert session.scene_hash() == history[-1], f"undo {k} at step {step}"
        elif step == 40:  # a crash restores the last commit by replaying its journal
            assert not session._fault("abort").ok
            hash_check(session, journal_from_objects=0)  # a fresh worker: journal again
            assert session.scene_hash() == history[-1]
        else:
            tool, args = _random_call(rng, OBJECT_NAMES)
            r = session.call(tool, args)
            if r.ok:
                history.append(r.scene_hash)
            else:
                assert r.scene_hash == history[-1], f"failed {tool} changed the scene"
        check = hash_check(session)
        assert session.scene_hash() == check["full"], f"step {step}"
    assert hash_check(session)["journal_entries"] > 0  # the journal path was exercised


def test_a_mutating_call_reads_only_what_it_touched(session):
    write_cubes(session.workspace / "many.obj", 300)
    ok(session.call("import_file", {"path": "many.obj"}))
    ok(session.call("add_primitive", {"kind": "cube", "name": "parent", "dimensions": [1, 1, 1]}))
    ok(session.call("parent", {"child": "cube_00007", "parent": "parent"}))
    walks = hash_check(session)["full_walks"]
    for i in range(5):
        r = ok(session.call("transform", {"name": "parent", "location": [i, 0, 0]}))
        assert r["object"]["name"] == "parent"
    ok(session.call("set_material", {"name": "cube_00007", "color": "#FF0000"}))
    ok(session.call("duplicate", {"name": "cube_00007", "new_name": "twin"}))
    ok(session.call("set_material", {"name": "cube_00007", "color": "#00FF00"}))  # twin shares it
    ok(session.call("delete", {"name": "parent"}))
    check = hash_check(session)
    assert check["full_walks"] == walks  # no call above read the other 300 objects
    assert session.scene_hash() == check["full"]
    assert check["journal_entries"] > 0  # 302 objects: Blender edits are journaled by default
    before = session.scene_hash()
    ok(session.call("undo", {"steps": 3}))
    ok(session.call("transform", {"name": "cube_00001", "location": [5, 5, 5]}))
    assert session.scene_hash() == hash_check(session)["full"] != before


def test_a_call_after_the_first_render_reads_only_what_it_touched(session):
    write_cubes(session.workspace / "many.obj", 600)  # 500+ meshes render from a proxy
    ok(session.call("import_file", {"path": "many.obj"}))
    walks = hash_check(session)["full_walks"]
    assert session.render(views=["iso"], size=64).ok  # adds a helper: the proxy
    ok(session.call("transform", {"name": "cube_00003", "location": [0, 0, 40]}))
    assert session.render(views=["front"], size=64).ok  # new bounds: the grid is made again
    ok(session.call("transform", {"name": "cube_00004", "location": [0, 0, -40]}))
    check = hash_check(session)
    assert check["full_walks"] == walks and session.scene_hash() == check["full"]


def test_a_refused_call_needs_no_reload_but_a_failed_one_rolls_back(session):
    write_cubes(session.workspace / "many.obj", 250)
    ok(session.call("import_file", {"path": "many.obj"}))
    ok(session.call("transform", {"name": "cube_00001", "location": [50, 50, 50]}))
    before, loads = session.scene_hash(), hash_check(session)["loads"]
    typo = session.call("transform", {"name": "cube_0001", "location": [0, 0, 0]})
    assert typo.error.kind.value == "validation" and typo.scene_hash == before
    assert hash_check(session)["loads"] == loads  # nothing changed, nothing reloaded
    empty = session.call("boolean", {"target": "cube_00000", "cutter": "cube_00001",
                                     "operation": "intersect"})  # fails after changing the target
    assert empty.error.kind.value == "kernel" and empty.scene_hash == before
    check = hash_check(session)
    assert check["loads"] == loads + 1 and check["full"] == before


def test_get_scene_is_a_bounded_page_with_totals(session):
    write_cubes(session.workspace / "many.obj", 1000)
    ok(session.call("import_file", {"path": "many.obj"}))
    ok(session.call("transform", {"name": "cube_00500", "location": [0, 0, 9]}))
    page = ok(session.call("get_scene", {}))
    assert len(page["objects"]) == 25 and page["total"] == 1000 and page["next_offset"] == 25
    assert page["counts"] == {"mesh": 1000} and page["changed"] == ["cube_00500"]
    assert len(json.dumps(page)) < 16_000  # the default reply fits a model's context
    later = ok(session.call("get_scene", {"offset": 990, "limit": 50}))
    assert [o["name"] for o in later["objects"]] == [f"cube_{i:05d}" for i in range(990, 1000)]
    assert "next_offset" not in later and "counts" not in later
    picked = ok(session.call("get_scene", {"filter": "cube_0050?"}))
    assert [o["name"] for o in picked["objects"]] == [f"cube_{i:05d}" for i in range(500, 510)]
    assert picked["total"] == 10
    assert len(session.scene()["objects"]) == 1000  # the runtime's own view still has them all
    bad = session.call("get_scene", {"limit": 0})
    assert not bad.ok and "limit" in bad.error.message


@pytest.mark.parametrize("n", [10, 100, 1000, 10_000])
def test_the_observation_scene_text_has_a_fixed_budget(n):
    worst = {"type": "mesh", "source": "cad", "location": [-12345.123456789] * 3,  # longest rows
             "rotation_deg": [-145.123456] * 3, "dimensions": [-10000.1234] * 3,
             "material": {"color": "#ABCDEF"}, "parent": "p" * 63}
    objects = [{"name": f"object_{i:06d}".ljust(63, "x"), **worst} for i in range(n)]
    scene = {"objects": objects, "total": n, "changed": ["c" * 63] * 20}
    assert len(compact_scene(scene, limit=40)) <= 16_000  # ~4 000 tokens at any scene size


def test_a_large_scene_renders_through_the_merged_proxy(session):
    from tools.worker.render_budget import MERGE_FROM

    write_cubes(session.workspace / "many.obj", MERGE_FROM + 100)
    ok(session.call("import_file", {"path": "many.obj"}))
    ok(session.call("set_material", {"name": "cube_00000", "color": "#FF0000"}))
    ok(session.call("transform", {"name": "cube_00000", "scale": [40, 40, 40]}))  # seen from afar
    before = session.scene_hash()
    first = session.render(views=["top"], size=128)
    second = session.render(views=["top"], size=128)
    assert first.ok and second.ok, (first.error, second.error)
    assert first.images[0] == second.images[0]  # same scene, same pixels
    im = Image.open(io.BytesIO(first.images[0])).convert("RGB")
    assert len(set(im.getdata())) > 3  # background, grid, grey cubes and the red one
    assert any(r > 150 and g < 80 and b < 80 for r, g, b in im.getdata())
    assert session.scene_hash() == before == hash_check(session)["full"]
    assert session.scene()["scene_objects"] == MERGE_FROM + 100  # the proxy is not an object
