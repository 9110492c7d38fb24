"""Imported files are hostile data: no reference outside the workspace, no code inside.

glTF/GLB buffer and image URIs, OBJ `mtllib` and MTL texture maps that point outside the
workspace are refused before Blender's importer runs; SCRIPTED drivers on any ID type and
text blocks are stripped on load and never exported again.

`data import` of another store or export (the end of this file): no link is followed at
any component of the source, FIFOs and devices are never read, and a tools version is a
plain name.
"""

from __future__ import annotations

import json
import struct

import pytest

from tools import ToolSession
from tools.errors import ErrorKind


def _gltf(uri_buffer: str | None = None, uri_image: str | None = None) -> dict:
    doc = {"asset": {"version": "2.0"}, "scenes": [{"nodes": []}], "scene": 0}
    if uri_buffer is not None:
        doc["buffers"] = [{"uri": uri_buffer, "byteLength": 12}]
    if uri_image is not None:
        doc["images"] = [{"uri": uri_image}]
    return doc


def _glb(doc: dict) -> bytes:
    js = json.dumps(doc).encode()
    js += b" " * (-len(js) % 4)
    body = struct.pack("<I4s", len(js), b"JSON") + js
    return struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body


@pytest.mark.parametrize("name,data", [
    ("rel.gltf", json.dumps(_gltf("../../../../../etc/passwd")).encode()),
    ("abs.gltf", json.dumps(_gltf("/etc/passwd")).encode()),
    ("file.gltf", json.dumps(_gltf("file:///etc/passwd")).encode()),
    ("pct.gltf", json.dumps(_gltf("%2E%2E/%2E%2E/%2E%2E/etc/passwd")).encode()),
    ("image.gltf", json.dumps(_gltf(None, "../../../../etc/shadow")).encode()),
    ("external.glb", _glb(_gltf("../../../../../etc/passwd"))),
])
def test_gltf_references_outside_the_workspace_are_refused(session, name, data):
    (session.workspace / name).write_bytes(data)
    r = session.call("import_file", {"path": name})
    assert not r.ok and r.error.kind == ErrorKind.SANDBOX, r.error
    assert "outside the workspace" in r.error.message or "not a file in the workspace" in r.error.message \
        or "not a relative path" in r.error.message


def test_gltf_buffer_inside_the_workspace_still_imports(session):
    assert session.call("add_primitive", {"kind": "cube", "name": "C", "dimensions": [1, 1, 1]}).ok
    assert session.call("export", {"format": "glb", "path": "c.glb"}).ok
    assert session.call("clear_scene", {}).ok
    assert session.call("import_file", {"path": "c.glb"}).ok


OBJ = "v 0 0 0\nv 1 0 0\nv 0 1 0\nusemtl m\nf 1 2 3\n"


@pytest.mark.parametrize("obj,mtl", [
    ("mtllib ../../../../../tmp/evil.mtl\n" + OBJ, None),
    ("mtllib /etc/passwd\n" + OBJ, None),
    ("mtllib ok.mtl\n" + OBJ, "newmtl m\nmap_Kd /etc/passwd\n"),
    ("mtllib ok.mtl\n" + OBJ, "newmtl m\nmap_Kd -s 1 1 1 ../../../../../etc/passwd\n"),
    ("mtllib ok.mtl\n" + OBJ, "newmtl m\nbump ../../../../etc/hostname\n"),
])
def test_obj_and_mtl_references_outside_the_workspace_are_refused(session, obj, mtl):
    (session.workspace / "m.obj").write_text(obj)
    if mtl is not None:
        (session.workspace / "ok.mtl").write_text(mtl)
    r = session.call("import_file", {"path": "m.obj"})
    assert not r.ok and r.error.kind == ErrorKind.SANDBOX, r.error


def test_obj_with_local_mtl_still_imports(session):
    (session.workspace / "m.obj").write_text("mtllib ok.mtl\n" + OBJ)
    (session.workspace / "ok.mtl").write_text("newmtl m\nKd 1 0 0\nmap_Kd tex.png\n")
    assert session.call("import_file", {"path": "m.obj"}).ok


# --------------------------------------------------------------- Python-bearing Blender data

PLANT = """
import bpy
def scripted(fc):
    fc.driver.type = "SCRIPTED"
    fc.driver.expression = "__import__('os').getpid() * 0"
cu = bpy.data.curves.new("EvilCurve", "CURVE")
sp = cu.splines.new("POLY"); sp.points.add(1)
co = bpy.data.objects.new("EvilCurveObj", cu)
scripted(cu.driver_add("bevel_depth"))
me = bpy.data.meshes.new("EvilMesh")
me.from_pydata([(0, 0, 0), (1, 0, 0), (0, 1, 0)], [], [(0, 1, 2)])
mo = bpy.data.objects.new("EvilMeshObj", me)
mo.shape_key_add(name="Basis"); mo.shape_key_add(name="K")
scripted(me.shape_keys.driver_add('key_blocks["K"].value'))
mat = bpy.data.materials.new("EvilMat"); mat.use_nodes = True
me.materials.append(mat)
node = next(n for n in mat.node_tree.nodes if "Roughness" in n.inputs)
scripted(node.inputs["Roughness"].driver_add("default_value"))
scripted(mo.driver_add("location", 0))
text = bpy.data.texts.new("evil.py"); text.write("import os")
bpy.data.libraries.write(runtime.workspace + "/evil.blend", {mo, co, text}, compress=False)
"""

COUNT = """
import bpy, json
if PATH:
    with bpy.data.libraries.load(PATH, link=False) as (src, dst):
        dst.objects = list(src.objects)
        dst.texts = list(src.texts)
owners = list(bpy.data.objects) + list(bpy.data.meshes) + list(bpy.data.curves) + \\
    list(bpy.data.shape_keys) + list(bpy.data.materials) + \\
    [m.node_tree for m in bpy.data.materials if m.node_tree is not None]
n = 0
for idb in owners:
    ad = idb.animation_data
    n += sum(1 for d in (ad.drivers if ad else []) if d.driver.type == "SCRIPTED")
json.dump({"scripted": n, "texts": len(bpy.data.texts),
           "objects": sorted(o.name for o in bpy.data.objects)}, open(runtime.workspace + "/count.json", "w"))
"""


@pytest.fixture
def fresh_hostile():
    """Sessions each on a fresh worker, killed afterwards (planted code must not outlive them)."""
    from tools import WorkerPool

    pool = WorkerPool(size=0, test_hooks=True, prewarm=False)
    yield pool
    pool.close()


def _exec(session, code: str) -> None:
    reply, _, err = session._send({"op": "exec", "code": code}, 120, "exec")
    assert err is None and reply.get("ok"), (err, reply)


def _count(session, path: str | None) -> dict:
    _exec(session, f"PATH = {path!r}\n" + COUNT)
    out = json.loads((session.workspace / "count.json").read_text())
    assert {"EvilMeshObj", "EvilCurveObj"} <= {n.split(".")[0] for n in out.pop("objects")}
    return out


def test_scripted_drivers_on_every_id_type_are_stripped_and_not_exported(fresh_hostile):
    with ToolSession(fresh_hostile) as a:
        _exec(a, PLANT)
        evil = (a.workspace / "evil.blend").read_bytes()
    with ToolSession(fresh_hostile) as c:  # control: the file really carries the code
        (c.workspace / "evil.blend").write_bytes(evil)
        planted = _count(c, str(c.workspace / "evil.blend"))
    assert planted["scripted"] >= 4 and planted["texts"] >= 1, planted
    with ToolSession(fresh_hostile) as b:
        (b.workspace / "evil.blend").write_bytes(evil)
        r = b.call("import_file", {"path": "evil.blend"})
        assert r.ok, r.error
        assert _count(b, None) == {"scripted": 0, "texts": 0}
        assert b.call("export", {"format": "blend", "path": "again.blend"}).ok
        again = (b.workspace / "again.blend").read_bytes()
    with ToolSession(fresh_hostile) as d:
        (d.workspace / "again.blend").write_bytes(again)
        assert _count(d, str(d.workspace / "again.blend")) == {"scripted": 0, "texts": 0}


def test_drivers_planted_after_load_are_not_exported(fresh_hostile):
    """Code that plants drivers at run time (a policy past the lint) cannot ship them out."""
    with ToolSession(fresh_hostile) as a:
        _exec(a, PLANT.replace("bpy.data.libraries.write", "mo.users_collection or "
                               "bpy.context.scene.collection.objects.link(mo); "
                               "bpy.context.scene.collection.objects.link(co); (lambda *a, **k: 0)"))
        assert a.call("export", {"format": "blend", "path": "out.blend"}).ok
        data = (a.workspace / "out.blend").read_bytes()
    with ToolSession(fresh_hostile) as d:
        (d.workspace / "out.blend").write_bytes(data)
        assert _count(d, str(d.workspace / "out.blend")) == {"scripted": 0, "texts": 0}


# ---- `data import` of a crafted store or export ----------------------------------------------

def _store_with_episode(tmp_path, **episode):
    from agents.store import Store

    from .test_trust_store import png

    src = tmp_path / "src"
    with Store(src) as store:
        rec = store.begin_episode(source="agent", initial_frame=png(), tools=[{"name": "t"}], **episode)
        rec.add_step(tool="add_primitive", args={"kind": "cube"}, result={"name": "C"}, frame=png(3))
        rec.finish(artifacts={"final.glb": b"glb"})
        return src, rec.episode_id


def _import(tmp_path, src, match: str):
    from agents.store import Store
    from agents.store.errors import StoreError
    from agents.store.importer import import_into

    dst = tmp_path / "dst"
    with Store(dst) as store:
        with pytest.raises(StoreError, match=match) as e:
            import_into(store, src)
        assert store.list_episodes() == []
    assert not [p for p in (dst / "episodes").iterdir()]  # no folder, not even a staged one
    return str(e.value)


@pytest.mark.parametrize("kind", ["store", "export"])
def test_data_import_refuses_a_tools_version_that_is_not_a_plain_name(tmp_path, kind):
    import sqlite3

    from .test_trust_store import _export, _rewrite_meta

    src, _ = _store_with_episode(tmp_path)
    evil = "../../evil"  # from dst/tool_specs/: tmp_path/evil.json
    if kind == "store":
        with sqlite3.connect(src / "index.sqlite3") as db:
            db.execute("UPDATE tool_specs SET version = ?", (evil,))
            db.execute("UPDATE episodes SET tools_version = ?", (evil,))
    else:
        exp = _export(tmp_path, src)
        _rewrite_meta(exp, lambda ep: {**ep, "tools_version": evil})
        manifest = json.loads((exp / "manifest.json").read_text())
        manifest["tool_specs"] = {evil: [{"name": "t"}]}
        (exp / "manifest.json").write_text(json.dumps(manifest))
        src = exp
    _import(tmp_path, src, "tools version '../../evil' is not a plain name")
    assert not list(tmp_path.rglob("evil.json")) and not (tmp_path.parent / "evil.json").exists()


def test_data_import_never_follows_a_symlinked_artifacts_folder(tmp_path):
    import os

    src, eid = _store_with_episode(tmp_path)
    private = tmp_path / "private"
    private.mkdir()
    (private / "final.glb").write_bytes(b"someone's secret")
    os.chmod(private / "final.glb", 0o600)
    artifacts = src / "episodes" / eid / "artifacts"
    (artifacts / "final.glb").unlink()
    artifacts.rmdir()
    artifacts.symlink_to(private)
    message = _import(tmp_path, src, "artifact final.glb")
    assert "not a plain folder" in message
    assert not list((tmp_path / "dst").rglob("final.glb"))


@pytest.mark.parametrize("planted", ["episodes", "index"])
def test_data_import_never_follows_a_symlinked_episodes_folder_or_index(tmp_path, planted):
    import shutil

    src, eid = _store_with_episode(tmp_path)
    if planted == "episodes":
        shutil.move(src / "episodes", tmp_path / "elsewhere")
        (src / "episodes").symlink_to(tmp_path / "elsewhere")
        _import(tmp_path, src, "not a plain folder")
    else:
        shutil.move(src / "index.sqlite3", tmp_path / "other.sqlite3")
        (src / "index.sqlite3").symlink_to(tmp_path / "other.sqlite3")
        _import(tmp_path, src, "not a regular file")


@pytest.mark.parametrize("node", ["fifo", "device"])
def test_data_import_refuses_a_fifo_or_device_in_place_of_a_frame(tmp_path, node):
    """Neither is ever opened for reading: a FIFO nobody writes would hang the import."""
    import os
    import stat

    if node == "device" and os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    src, eid = _store_with_episode(tmp_path)
    frame = src / "episodes" / eid / "frames" / "000000.png"
    frame.unlink()
    if node == "fifo":
        os.mkfifo(frame)
    else:
        os.mknod(frame, stat.S_IFCHR | 0o644, os.makedev(1, 3))  # like /dev/null
    _import(tmp_path, src, "not a regular file")


def test_data_import_refuses_a_fifo_in_place_of_an_export_table(tmp_path):
    import os

    from .test_trust_store import _export

    src, _ = _store_with_episode(tmp_path)
    exp = _export(tmp_path, src)
    (exp / "steps.parquet").unlink()
    os.mkfifo(exp / "steps.parquet")
    _import(tmp_path, exp, "not a regular file")


def test_data_show_escapes_an_imported_prompt(tmp_path):
    """An imported episode's text reaches the terminal escaped (OSC title and clipboard)."""
    from typer.testing import CliRunner

    from agents.store import Store
    from agents.store.importer import import_into
    from studio.cli import build_app

    src, eid = _store_with_episode(tmp_path, prompt="make \x1b]0;pwned\x07 a \x1b]52;c;cHduZWQ=\x07 cube\u202e")
    with Store(tmp_path / "dst") as store:
        assert import_into(store, src).imported == [eid]
    r = CliRunner().invoke(build_app(), ["data", "show", eid, "--data-dir", str(tmp_path / "dst")])
    assert r.exit_code == 0, r.output
    assert "\\x1b]0;pwned\\x07" in r.output and "\\u202e" in r.output
    assert not any(c in r.output for c in "\x1b\x07\u202e")
