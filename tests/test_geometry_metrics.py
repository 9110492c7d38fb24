"""Geometry metrics on shapes with known answers, and the invariances they promise."""

from __future__ import annotations

import math

import numpy as np
import pytest
import trimesh
from hypothesis import given, settings
from hypothesis import strategies as st

from training.rewards import geometry as g


def box(size=(1.0, 1.0, 1.0), at=(0.0, 0.0, 0.0)) -> trimesh.Trimesh:
    m = trimesh.creation.box(extents=size)
    m.apply_translation(at)
    return m


def test_unit_cube_against_itself_is_perfect():
    a = box()
    assert g.chamfer_distance(a, a) == 0.0
    assert g.voxel_iou(a, a) == 1.0


def test_shifted_and_scaled_copies_are_identical_after_normalisation():
    a = box()
    b = box(at=(3.0, -2.0, 7.5))
    c = a.copy()
    c.apply_scale(4.0)
    for other in (b, c):
        assert g.chamfer_distance(a, other) == pytest.approx(0.0, abs=1e-9)
        assert g.voxel_iou(a, other) == pytest.approx(1.0)


def test_without_normalisation_a_shift_is_seen():
    a, b = box(), box(at=(0.5, 0.0, 0.0))
    assert g.voxel_iou(a, b, normalised=False) == pytest.approx(1 / 3, abs=0.02)
    assert g.chamfer_distance(a, b, normalised=False) > 10.0


def test_half_overlapping_boxes_have_iou_one_third():
    a, b = box(size=(2, 1, 1)), box(size=(2, 1, 1), at=(1.0, 0, 0))
    assert g.voxel_iou(a, b, normalised=False, resolution=96) == pytest.approx(1 / 3, abs=0.015)


def test_two_disjoint_boxes_have_zero_iou_and_large_chamfer():
    a, b = box(), box(at=(5.0, 0, 0))
    assert g.voxel_iou(a, b, normalised=False) == 0.0
    # Nearest distances are at least 4 (gap) so the mean squared sum is >= 2 * 16.
    assert g.chamfer_distance(a, b, normalised=False) > 2 * 16 * 1e3


def test_sphere_fills_pi_over_six_of_its_box():
    sphere = trimesh.creation.icosphere(subdivisions=4, radius=1.0)
    iou = g.voxel_iou(sphere, box(size=(2, 2, 2)), normalised=False, resolution=96)
    assert iou == pytest.approx(math.pi / 6, abs=0.02)


def test_overlapping_parts_count_once_in_voxel_occupancy():
    # Two closed boxes overlapping by half: the union is a 1.5 x 1 x 1 box.
    parts = trimesh.util.concatenate([box(), box(at=(0.5, 0, 0))])
    union = box(size=(1.5, 1, 1), at=(0.25, 0, 0))
    assert g.voxel_iou(parts, union, normalised=False) == pytest.approx(1.0)


def test_inverted_mesh_still_occupies_its_volume():
    a = box()
    inv = a.copy()
    inv.invert()
    assert g.voxel_iou(a, inv) == pytest.approx(1.0)


def test_differently_triangulated_same_shape_sits_at_the_sampling_floor():
    coarse = trimesh.creation.cylinder(radius=0.5, height=1.0, sections=256)
    fine = trimesh.creation.cylinder(radius=0.5, height=1.0, sections=257)
    cd = g.chamfer_distance(coarse, fine)
    assert 0.0 < cd < 1.0
    # A clearly different shape is an order of magnitude further away.
    assert g.chamfer_distance(coarse, box(size=(1, 1, 0.3))) > 10 * cd


def test_area_uniform_sampling_puts_points_in_proportion_to_area():
    m = box(size=(4.0, 1.0, 1.0))
    pts = g.sample_surface(m, n=20000, seed=3)
    end_caps = np.count_nonzero(np.isclose(np.abs(pts[:, 0]), 2.0))
    # End caps are 2 of the 18 square units of area.
    assert end_caps / len(pts) == pytest.approx(2 / 18, abs=0.01)
    assert np.array_equal(pts, g.sample_surface(m, n=20000, seed=3))


def test_sampling_an_empty_surface_is_refused():
    flat = trimesh.Trimesh(vertices=[[0, 0, 0], [1, 0, 0], [2, 0, 0]], faces=[[0, 1, 2]])
    with pytest.raises(ValueError, match="zero surface area"):
        g.sample_surface(flat)


@settings(max_examples=25, deadline=None)
@given(
    shift=st.tuples(*[st.floats(-50, 50)] * 3),
    scale=st.floats(0.01, 100.0),
    size=st.tuples(*[st.floats(0.2, 3.0)] * 3),
)
def test_metrics_are_invariant_to_translation_and_uniform_scale(shift, scale, size):
    a = box(size=size)
    b = a.copy()
    b.apply_scale(scale)
    b.apply_translation(shift)
    assert g.chamfer_distance(a, b) == pytest.approx(0.0, abs=1e-6)
    assert g.voxel_iou(a, b) == pytest.approx(1.0, abs=1e-9)


def test_files_round_trip_and_compare(tmp_path):
    a, b = box(size=(2, 1, 1)), box(size=(2, 1, 0.5))
    a.export(tmp_path / "a.stl")
    b.export(tmp_path / "b.obj")
    same = g.compare_files(tmp_path / "a.stl", tmp_path / "a.stl")
    assert same.chamfer_x1e3 == 0.0 and same.voxel_iou == 1.0 and same.brep_iou is None
    diff = g.compare_files(tmp_path / "a.stl", tmp_path / "b.obj")
    assert diff.voxel_iou < 0.75 and diff.chamfer_x1e3 > 1.0
    assert diff.volume_a == pytest.approx(2.0) and diff.volume_b == pytest.approx(1.0)


def test_unreadable_files_raise_a_typed_error(tmp_path):
    bad = tmp_path / "junk.stl"
    bad.write_bytes(b"not a mesh at all")
    with pytest.raises(g.ShapeLoadError):
        g.load_mesh(bad)
    with pytest.raises(g.ShapeLoadError, match="no such file"):
        g.load_mesh(tmp_path / "missing.obj")
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(g.ShapeLoadError, match="unsupported"):
        g.load_mesh(tmp_path / "x.txt")
