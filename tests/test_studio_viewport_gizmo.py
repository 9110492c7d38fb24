"""The gizmo's drag math without a window: a pointer moved along an arrow as drawn is that
distance along the world axis (measured at the gizmo's origin), a sweep around a ring is that angle about it (right-handed,
whichever way the axis faces), a scale box dragged out is a factor along the object's own axis,
snapping rounds, and a dragged rotation composes with the
object's own Euler angles as Blender reads them."""

from __future__ import annotations

import numpy as np
import pytest

from studio.models.orbit import OrbitCamera
from studio.viewport.camera import ViewMath, grid_step
from studio.viewport.gizmo import (
    MIN_SCALE,
    SCALE_AT,
    axis_rotation,
    drag_amount,
    dragged_model,
    euler_matrix,
    local_axis,
    matrix_euler,
    rotated_euler,
)

ORIGIN = np.array([1.0, -0.5, 0.25])


def view(azimuth: float = 30.0, elevation: float = 25.0) -> ViewMath:
    camera = OrbitCamera(azimuth_deg=azimuth, elevation_deg=elevation, distance=6.0, target=list(ORIGIN))
    return ViewMath(camera, 1280, 800)


@pytest.mark.parametrize("handle", [0, 1, 2])
def test_an_arrow_drag_is_the_distance_along_its_axis(handle):
    vm = view()
    along = np.zeros(3)
    along[handle] = 0.7
    start = vm.to_screen(ORIGIN) + [40.0, -25.0]  # wherever on the arrow it was grabbed
    axis_px = vm.to_screen(ORIGIN + along / 0.7) - vm.to_screen(ORIGIN)  # a unit, as drawn
    across = np.array([-axis_px[1], axis_px[0]]) * 0.3  # sideways slop does not count
    now = start + 0.7 * axis_px + across
    assert drag_amount(vm, ORIGIN, handle, start, now, snap=False) == pytest.approx(0.7, abs=1e-6)
    step = grid_step(vm.pixels_per_unit(ORIGIN))
    snapped = drag_amount(vm, ORIGIN, handle, start, now + [3.0, 2.0], snap=True)
    assert snapped / step == pytest.approx(round(snapped / step)) and abs(snapped - 0.7) <= step
    moved = dragged_model(np.identity(4), handle, 0.7)
    assert np.allclose(moved[:3, 3], along) and np.allclose(moved[:3, :3], np.identity(3))


@pytest.mark.parametrize("elevation", [89.0, -89.0])
def test_a_ring_sweep_is_a_right_handed_angle_whichever_side_the_camera_is(elevation):
    vm = view(azimuth=-90.0, elevation=elevation)  # looking down (or up) the z axis
    r = 0.5
    start = vm.to_screen(ORIGIN + [r, 0, 0])
    now = vm.to_screen(ORIGIN + [0, r, 0])  # x towards y: +90° about +z
    assert drag_amount(vm, ORIGIN, 5, start, now, snap=False) == pytest.approx(90.0, abs=1.0)
    a_bit = vm.to_screen(ORIGIN + r * np.array([np.cos(0.35), np.sin(0.35), 0]))  # ~20°
    assert drag_amount(vm, ORIGIN, 5, start, a_bit, snap=True) == 15.0
    turned = dragged_model(np.identity(4), 5, 90.0)
    assert np.allclose(turned[:3, :3] @ [1, 0, 0], [0, 1, 0])


def test_a_dragged_rotation_composes_with_the_objects_own_euler_angles():
    old = [10.0, 20.0, 30.0]
    assert matrix_euler(euler_matrix(old)) == pytest.approx(old)
    for axis in range(3):
        new = rotated_euler(old, axis, 15.0)
        assert np.allclose(euler_matrix(new), axis_rotation(axis, 15.0) @ euler_matrix(old), atol=1e-5)
    assert rotated_euler([0.0, 0.0, 30.0], 2, 15.0) == pytest.approx([0.0, 0.0, 45.0])


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_a_scale_box_drag_is_a_factor_along_the_objects_own_axis(axis):
    vm = view()
    base = np.identity(4)
    base[:3, :3] = euler_matrix([0.0, 0.0, 30.0])  # turned: the box runs along the object's axis
    base[:3, 3] = ORIGIN
    length = 0.8
    direction = local_axis(base, axis)
    at = SCALE_AT * length
    start = vm.to_screen(ORIGIN + direction * at)
    axis_px = vm.to_screen(ORIGIN + direction) - vm.to_screen(ORIGIN)
    now = start + 0.5 * at * axis_px  # the box dragged half its distance further out
    assert drag_amount(vm, ORIGIN, 6 + axis, start, now, False, base, length) == pytest.approx(1.5, abs=1e-5)
    assert drag_amount(vm, ORIGIN, 6 + axis, start, now + [2.0, 1.0], True, base, length) == pytest.approx(1.5)
    through = start - 3.0 * at * axis_px  # dragged past the origin: never zero or mirrored
    assert drag_amount(vm, ORIGIN, 6 + axis, start, through, False, base, length) == MIN_SCALE
    scaled = dragged_model(base, 6 + axis, 1.5)
    assert np.allclose(scaled[:3, axis], base[:3, axis] * 1.5)
    others = [k for k in range(3) if k != axis]
    assert np.allclose(scaled[:3, others], base[:3, others]) and np.allclose(scaled[:3, 3], ORIGIN)
