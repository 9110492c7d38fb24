"""The worker's `meshes` op that feeds the live viewport: compact buffers, only geometry the
viewer lacks, smooth normals split at creases, feature edges (CAD B-rep edges) as lines."""

from __future__ import annotations

import numpy as np
import pytest

from tools import ToolSession


def unpack(entry: dict, blob: bytes):
    nv, nt, ne = entry["nv"], entry["nt"], entry["ne"]
    data = np.frombuffer(blob, np.uint8)
    assert len(data) == nv * 24 + nt * 12 + ne * 8  # exactly the four arrays, nothing else
    pos = data[: nv * 12].view("f4").reshape(-1, 3)
    nrm = data[nv * 12: nv * 24].view("f4").reshape(-1, 3)
    tri = data[nv * 24: nv * 24 + nt * 12].view("u4").reshape(-1, 3)
    edges = data[nv * 24 + nt * 12:].view("u4").reshape(-1, 2)
    return pos, nrm, tri, edges


@pytest.fixture(scope="module")
def session():
    with ToolSession() as s:
        yield s


def test_meshes_send_only_what_changed(session):
    session.reset()
    assert session.call("add_primitive", {"kind": "cube", "name": "Box", "dimensions": [1, 2, 3],
                                          "location": [1, 0, 0]}).ok
    assert session.call("add_primitive", {"kind": "cylinder", "name": "Cyl", "dimensions": [1, 1, 2]}).ok
    out, blobs = session.meshes()
    by = {o["name"]: o for o in out["objects"]}
    assert set(by) == {"Box", "Cyl"} and len(blobs) == 2
    known = {n: o["key"] for n, o in by.items()}

    pos, nrm, tri, edges = unpack(by["Box"], blobs[by["Box"]["blob"]])
    assert by["Box"]["nt"] == 12 and len(edges) == 12  # a cube: 12 triangles, 12 edges
    assert np.allclose(np.abs(pos).max(0), [0.5, 1.0, 1.5])  # local coordinates; the move is in the matrix
    assert np.allclose(np.array(by["Box"]["matrix"]).reshape(4, 4)[:3, 3], [1, 0, 0])
    assert np.allclose(np.abs(nrm).max(1), 1.0)  # flat faces: axis-aligned normals, split at 90° edges

    pos, nrm, tri, edges = unpack(by["Cyl"], blobs[by["Cyl"]["blob"]])
    radial = np.abs(nrm[:, 2]) < 1e-3
    assert radial.sum() == 96  # 48 smooth side normals per rim, shared by the side's facets
    assert np.allclose(nrm[radial][:, :2] / np.linalg.norm(nrm[radial][:, :2], axis=1)[:, None],
                       pos[radial][:, :2] / np.linalg.norm(pos[radial][:, :2], axis=1)[:, None], atol=1e-5)
    assert len(edges) == 96  # the two rims only, no seam or facet lines

    # a move and a recolour send no geometry; the viewer's keys stay valid
    assert session.call("transform", {"name": "Box", "location": [3, 0, 0]}).ok
    assert session.call("set_material", {"name": "Cyl", "color": "#FF8000"}).ok
    out, blobs = session.meshes(known)
    by = {o["name"]: o for o in out["objects"]}
    assert blobs == [] and all(o["blob"] is None for o in by.values())
    assert np.allclose(np.array(by["Box"]["matrix"]).reshape(4, 4)[:3, 3], [3, 0, 0])
    assert by["Cyl"]["color"] == "#FF8000"

    # a geometry change and a deletion: one blob for the changed one, the deleted one absent
    assert session.call("transform", {"name": "Cyl", "scale": [2, 2, 1]}).ok  # matrix only
    assert session.call("delete", {"name": "Box"}).ok
    assert session.call("cad_box", {"name": "Plate", "length": 2, "width": 2, "height": 0.2}).ok
    out, blobs = session.meshes(known)
    by = {o["name"]: o for o in out["objects"]}
    assert set(by) == {"Cyl", "Plate"} and len(blobs) == 1 and by["Plate"]["blob"] == 0
    _, _, _, edges = unpack(by["Plate"], blobs[0])
    assert len(edges) == 12  # the B-rep box's 12 edges, though its tessellation repeats nodes


def test_closed_outward_surfaces_are_flagged_for_culling_and_open_ones_not(session):
    """The viewer culls back faces only where none can show: closed, consistently wound,
    facing out. A plane (open), and an imported cube whose faces turn inwards, are not flagged."""
    session.reset()
    for kind in ("cube", "cylinder", "uv_sphere", "torus", "plane"):
        dims = [1, 1, 0.25] if kind == "torus" else [1, 1, 1]  # x = y = 2(R + r), z = 2r
        assert session.call("add_primitive", {"kind": kind, "name": kind, "dimensions": dims}).ok
    assert session.call("cad_box", {"name": "Plate", "length": 40, "width": 30, "height": 5}).ok
    assert session.call("cad_hole", {"name": "Plate", "diameter": 6}).ok
    corners = [(x, y, z) for x in (0, 1) for y in (0, 1) for z in (0, 1)]
    quads = [(2, 4, 3, 1), (7, 8, 6, 5), (5, 6, 2, 1), (4, 8, 7, 3), (3, 7, 5, 1), (6, 8, 4, 2)]  # outward
    obj = "".join(f"v {x} {y} {z}\n" for x, y, z in corners)
    (session.workspace / "out.obj").write_text("o Out\n" + obj + "".join(f"f {a} {b} {c} {d}\n" for a, b, c, d in quads))
    (session.workspace / "in.obj").write_text("o In\n" + obj + "".join(f"f {d} {c} {b} {a}\n" for a, b, c, d in quads))
    assert session.call("import_file", {"path": "out.obj"}).ok and session.call("import_file", {"path": "in.obj"}).ok
    out, _ = session.meshes()
    closed = {o["name"]: o["closed"] for o in out["objects"]}
    assert closed == {"cube": True, "cylinder": True, "uv_sphere": True, "torus": True, "plane": False,
                      "Plate": True, "Out": True, "In": False}
