"""Exact B-rep IoU through CadQuery booleans, and STEP loading."""

from __future__ import annotations

import cadquery as cq
import pytest

from training.rewards import geometry as g


def test_exact_iou_of_known_solids(tmp_path):
    a = cq.Workplane("XY").box(2, 1, 1).val()
    shifted = a.translate(cq.Vector(1, 0, 0))
    assert g.brep_iou(a, a) == pytest.approx(1.0)
    assert g.brep_iou(a, shifted) == pytest.approx(1 / 3)
    assert g.brep_iou(a, shifted, align_centres=True) == pytest.approx(1.0)
    far = a.translate(cq.Vector(10, 0, 0))
    assert g.brep_iou(a, far) == 0.0


def test_a_part_a_nanometre_off_its_reference_is_the_same_part():
    """Blender keeps a part's placement in float32: 0.2 m came back 3e-6 mm off. The exact
    boolean of `feature_edits:5:2`'s plate and its reference, faces that far apart, came out
    empty (IoU 0.0 for the oracle's own part). A fuzzy value that follows the coordinates'
    size makes them one part, and a real 0.3 mm shift still shows."""
    from training.tasks import get_task
    from training.tasks.shapes import build_reference

    task = get_task("feature_edits:5:2")
    (script,) = [c["script"] for c in task.spec.constraints
                 if c["kind"] == "part_at" and c["object"] == "Plate"]  # fmt: skip
    part = build_reference(script)
    ref = part.translate(cq.Vector(200, 0, 0))
    noisy = part.translate(cq.Vector(200.000001, 0, 0))
    assert g.solid_volume(ref.intersect(noisy)) == 0.0  # the exact boolean's failure, as found
    assert g.brep_iou(ref, noisy) == pytest.approx(1.0, abs=1e-9)
    moved = g.brep_iou(ref, part.translate(cq.Vector(200.3, 0, 0)))
    assert 0.9 < moved < 0.9995  # below part_at's threshold
    assert 1e-5 <= g.fuzzy_value(ref, noisy) <= 1e-3


def test_a_missing_hole_shows_in_exact_iou_and_volume():
    plate = cq.Workplane("XY").box(40, 30, 5)
    holed = plate.faces(">Z").workplane().hole(10).val()
    iou = g.brep_iou(plate.val(), holed)
    expected = (40 * 30 * 5 - 3.14159265 * 25 * 5) / (40 * 30 * 5)
    assert iou == pytest.approx(expected, rel=1e-4)


def test_step_files_compare_with_all_metrics(tmp_path):
    a = cq.Workplane("XY").box(20, 10, 5)
    b = cq.Workplane("XY").box(20, 10, 5).translate((100, 0, 0))
    c = cq.Workplane("XY").cylinder(5, 5)
    for name, part in (("a", a), ("b", b), ("c", c)):
        cq.exporters.export(part, str(tmp_path / f"{name}.step"))
    same = g.compare_files(tmp_path / "a.step", tmp_path / "b.step")
    assert same.brep_iou == pytest.approx(1.0)
    assert same.voxel_iou == pytest.approx(1.0, abs=1e-6)
    assert same.chamfer_x1e3 < 1e-6
    assert same.volume_a == pytest.approx(1000.0)
    other = g.compare_files(tmp_path / "a.step", tmp_path / "c.step")
    assert other.brep_iou < 0.6 and other.chamfer_x1e3 > 5


def test_tessellated_step_matches_its_stl_export(tmp_path):
    part = cq.Workplane("XY").box(30, 20, 4).faces(">Z").workplane().hole(6)
    cq.exporters.export(part, str(tmp_path / "p.step"))
    cq.exporters.export(part, str(tmp_path / "p.stl"))
    result = g.compare_files(tmp_path / "p.step", tmp_path / "p.stl")
    assert result.voxel_iou > 0.97
    assert result.chamfer_x1e3 < 1.0
    assert result.volume_a == pytest.approx(result.volume_b, rel=0.01)


def test_a_step_file_without_solids_is_refused(tmp_path):
    bad = tmp_path / "bad.step"
    bad.write_text("ISO-10303-21;\nEND-ISO-10303-21;\n")
    with pytest.raises(g.ShapeLoadError):
        g.load_solid(bad)
