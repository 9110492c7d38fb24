"""Exports reload with the right geometry; `modelwright tools run` writes its contract files."""

import json
import subprocess
import sys

import cadquery as cq
import pytest
import trimesh


def test_exports_reload_with_right_geometry(session):
    assert session.call("add_primitive", {"kind": "cube", "name": "box", "dimensions": [2, 3, 4]}).ok
    assert session.call("cad_cylinder", {"name": "pin", "radius": 1, "height": 5}).ok
    assert session.call("transform", {"name": "pin", "location": [10, 0, 0]}).ok
    for fmt in ("glb", "stl", "obj"):
        r = session.call("export", {"format": fmt, "path": f"out/box.{fmt}", "objects": ["box"]})
        assert r.ok, r.error
        mesh = trimesh.load(session.workspace / r.output["path"], force="mesh")
        assert sorted(mesh.extents) == pytest.approx([2, 3, 4], abs=1e-4), fmt
        assert mesh.volume == pytest.approx(24, rel=1e-4), fmt
    r = session.call("export", {"format": "step", "path": "out/pin.step", "objects": ["pin"]})
    assert r.ok, r.error
    shape = cq.importers.importStep(str(session.workspace / "out/pin.step")).val()
    assert shape.Volume() == pytest.approx(3.14159265 * 5, rel=1e-6)
    # placed where the scene shows it: 10 m in the scene is 10 000 mm in the part's STEP file
    assert shape.BoundingBox().center.x == pytest.approx(10_000, abs=1e-6)
    bad = session.call("export", {"format": "step", "path": "out/box.step", "objects": ["box"]})
    assert bad.error.kind.value == "validation" and "CAD parts only" in bad.error.message
    assert session.call("export", {"format": "blend", "path": "out/all.blend"}).ok
    assert session.call("clear_scene", {}).ok
    for f in ("out/all.blend", "out/pin.step", "out/box.stl"):
        assert session.call("import_file", {"path": f}).ok, f
    names = {o["name"] for o in session.scene()["objects"]}
    assert {"box", "pin"} <= names and len(names) == 4



def test_a_swept_bend_reloads_from_step_as_the_same_solid(session):
    """A round-transition sweep along a polyline rounds its corner with a surface of revolution,
    which OCCT 7.9 reloaded from STEP as another solid (3,232 mm³ for this 3,500 mm³ rod). The
    tool now writes that face as its exact B-spline, so the file is the part."""
    r = session.call("cad_sweep", {"name": "Duct", "radius": 4,
                                   "path": [[0, 0, 0], [0, 0, 40], [30, 0, 40]]})
    assert r.ok, r.error
    made = r.output["volume"]
    assert made == pytest.approx(3500.27, abs=0.01)
    assert session.call("export", {"format": "step", "path": "out/duct.step"}).ok
    back = cq.importers.importStep(str(session.workspace / "out/duct.step")).val()
    assert back.isValid() and back.Volume() == pytest.approx(made, rel=1e-9)
    assert sorted(f.geomType() for f in back.Faces()) == [
        "BSPLINE", "CYLINDER", "CYLINDER", "PLANE", "PLANE"]  # only the corner rewritten

def _read_3mf(path):
    """The meshes of a 3MF as a slicer finds them: [Content_Types], the root relationship,
    then the model it names (trimesh's own 3MF reader needs lxml, which is not installed)."""
    import xml.etree.ElementTree as ET
    import zipfile

    ns = {"m": "http://schemas.microsoft.com/3dmanufacturing/core/2015/02",
          "r": "http://schemas.openxmlformats.org/package/2006/relationships"}
    with zipfile.ZipFile(path) as z:
        assert "[Content_Types].xml" in z.namelist()
        rel = ET.fromstring(z.read("_rels/.rels")).find("r:Relationship", ns)
        assert rel.get("Type").endswith("/3dmanufacturing/2013/01/3dmodel")
        model = ET.fromstring(z.read(rel.get("Target").lstrip("/")))
    meshes = {}
    for ob in model.iterfind("m:resources/m:object", ns):
        verts = [[float(v.get(k)) for k in "xyz"] for v in ob.iterfind("m:mesh/m:vertices/m:vertex", ns)]
        tris = [[int(t.get(k)) for k in ("v1", "v2", "v3")]
                for t in ob.iterfind("m:mesh/m:triangles/m:triangle", ns)]
        meshes[ob.get("name")] = trimesh.Trimesh(verts, tris, process=False)
    built = {i.get("objectid") for i in model.iterfind("m:build/m:item", ns)}
    assert len(built) == len(meshes)
    return model.get("unit"), meshes


def test_3mf_export_reloads_in_millimetres_where_the_scene_shows_it(session):
    assert session.call("add_primitive", {"kind": "cube", "name": "box", "dimensions": [2, 3, 4],
                                          "location": [1, 0, 0]}).ok
    assert session.call("add_primitive", {"kind": "uv_sphere", "name": "ball", "dimensions": [1, 1, 1],
                                          "location": [0, 5, 0]}).ok
    r = session.call("export", {"format": "3mf", "path": "out/parts"})
    assert r.ok, r.error
    assert r.output["path"] == "out/parts.3mf" and sorted(r.output["objects"]) == ["ball", "box"]
    unit, meshes = _read_3mf(session.workspace / r.output["path"])
    assert unit == "millimeter" and sorted(meshes) == ["ball", "box"]
    box = meshes["box"]
    assert box.is_watertight and box.volume == pytest.approx(24e9, rel=1e-6)  # outward normals
    assert sorted(box.extents) == pytest.approx([2000, 3000, 4000], abs=1e-3)
    assert box.bounds.mean(axis=0) == pytest.approx([1000, 0, 0], abs=1e-3)
    assert meshes["ball"].bounds.mean(axis=0)[1] == pytest.approx(5000, abs=1)


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "studio.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_tools_run_writes_results_scene_montage_and_exports(tmp_path):
    seq = tmp_path / "seq.jsonl"
    calls = [
        {"tool": "add_primitive", "args": {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}},
        {"tool": "set_material", "args": {"name": "A", "color": "#00FF00"}},
        {"tool": "transform", "args": {"name": "nope", "location": [0, 0, 0]}},
        {"tool": "cadquery_script", "args": {"code": "import cadquery as cq\nresult = cq.Workplane().box(2, 2, 2)", "name": "P"}},
        {"tool": "export", "args": {"format": "step", "path": "parts/p.step", "objects": ["P"]}},
    ]
    seq.write_text("\n".join(json.dumps(c) for c in calls) + "\n")
    out = tmp_path / "out"
    p = run_cli("tools", "run", str(seq), "--out", str(out), "--keep-going")
    assert p.returncode == 0, p.stderr  # failures are data with --keep-going, each one line
    assert p.stderr.splitlines() == [
        f"error: {seq}:3: transform failed (validation): " + json.loads(
            (out / "results.jsonl").read_text().splitlines()[2])["error"]["message"]]
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["ok"] for r in results] == [True, True, False, True, True]
    assert results[2]["error"]["kind"] == "validation"
    assert all({"tool", "ok", "error", "duration_ms", "scene_hash", "output"} <= set(r) for r in results)
    scene = json.loads((out / "scene.json").read_text())
    assert {o["name"] for o in scene["objects"]} == {"A", "P"}
    assert (out / "final.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "parts" / "p.step").stat().st_size > 0


def test_tools_run_stops_at_the_first_failed_call_and_exits_1(tmp_path):
    seq = tmp_path / "seq.jsonl"
    calls = [{"tool": "transform", "args": {"name": "nope", "location": [0, 0, 0]}},
             {"tool": "add_primitive", "args": {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}}]
    seq.write_text("\n".join(json.dumps(c) for c in calls) + "\n")
    out = tmp_path / "out"
    p = run_cli("tools", "run", str(seq), "--out", str(out))
    assert p.returncode == 1 and "Traceback" not in p.stderr
    (line,) = p.stderr.splitlines()
    assert line.startswith(f"error: {seq}:1: transform failed (validation): ") and "nope" in line
    assert line.endswith("stopped after call 1 of 2 (--keep-going runs them all)")
    assert len((out / "results.jsonl").read_text().splitlines()) == 1  # the cube never ran
    assert json.loads(p.stdout) == {"calls": 2, "ran": 1, "failed": 1, "out": str(out)}


@pytest.mark.parametrize("content,needle", [("{not json}\n", "not JSON"), ('["a"]\n', "each line")])
def test_tools_run_rejects_unusable_input(tmp_path, content, needle):
    seq = tmp_path / "bad.jsonl"
    seq.write_text(content)
    p = run_cli("tools", "run", str(seq), "--out", str(tmp_path / "o"))
    assert p.returncode != 0 and needle in p.stderr and len(p.stderr.strip().splitlines()) == 1
    p = run_cli("tools", "run", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o"))
    assert p.returncode != 0 and "no such file" in p.stderr
