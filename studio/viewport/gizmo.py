"""The live viewport's transform gizmo as geometry: the handles' shapes (three arrows to move,
three rings to rotate), where they sit, what a pointer drag on one means (a distance along its
axis or an angle about it), and Blender's XYZ Euler angles for composing a dragged rotation
with the object's own. No Qt, no GL: `gl.py` draws the handles, `live.py` turns events into
these calls."""

from __future__ import annotations

import math

import numpy as np

from studio.viewport.camera import ViewMath, grid_step

GIZMO_PX = 90  # arrow length on screen
RING_RADIUS = 0.62  # of the arrow length
HANDLES = 6  # handle h: 0-2 move along x, y, z; 3-5 rotate about x, y, z
SNAP_DEG = 15.0


def axis_vector(handle: int) -> np.ndarray:
    v = np.zeros(3)
    v[handle % 3] = 1.0
    return v


def axis_rotation(axis: int, degrees: float) -> np.ndarray:
    c, s = math.cos(math.radians(degrees)), math.sin(math.radians(degrees))
    i, j = [(1, 2), (2, 0), (0, 1)][axis]
    r = np.identity(3)
    r[i, i], r[i, j], r[j, i], r[j, j] = c, -s, s, c
    return r


def euler_matrix(deg) -> np.ndarray:
    """Blender's XYZ Euler (degrees) as a matrix: Rz @ Ry @ Rx."""
    return axis_rotation(2, deg[2]) @ axis_rotation(1, deg[1]) @ axis_rotation(0, deg[0])


def matrix_euler(r: np.ndarray) -> list[float]:
    y = math.asin(max(-1.0, min(1.0, -r[2, 0])))
    if abs(r[2, 0]) < 0.999999:
        x, z = math.atan2(r[2, 1], r[2, 2]), math.atan2(r[1, 0], r[0, 0])
    else:  # gimbal lock: put it all in x
        x, z = math.atan2(-r[1, 2], r[1, 1]), 0.0
    return [math.degrees(x), math.degrees(y), math.degrees(z)]


def rotated_euler(old_deg, axis: int, degrees: float) -> list[float]:
    """The Euler angles after turning by `degrees` about the WORLD axis `axis`."""
    return [round(a, 4) + 0.0 for a in matrix_euler(axis_rotation(axis, degrees) @ euler_matrix(old_deg))]


def axis_offset(vm: ViewMath, origin: np.ndarray, handle: int, start: np.ndarray, now: np.ndarray,
                snap: bool) -> float:
    """World distance along the handle's axis for a pointer move from `start` to `now`
    (device pixels): the move projected on the axis as drawn; `snap` rounds to the grid."""
    a, b = vm.to_screen(origin), vm.to_screen(origin + axis_vector(handle))
    axis_px = b - a
    t = float((now - start) @ axis_px / max(axis_px @ axis_px, 1e-9))
    if snap:
        step = grid_step(vm.pixels_per_unit(origin))
        t = round(t / step) * step
    return t


def ring_angle(vm: ViewMath, origin: np.ndarray, handle: int, start: np.ndarray, now: np.ndarray,
               snap: bool) -> float:
    """Degrees about the handle's axis for a pointer move from `start` to `now` (device
    pixels): the angle swept around the origin on screen, signed by which way the axis faces
    the camera; `snap` rounds to 15°."""
    o = vm.to_screen(origin)
    a0 = math.atan2(start[1] - o[1], start[0] - o[0])
    a1 = math.atan2(now[1] - o[1], now[0] - o[0])
    sweep = -math.degrees(math.remainder(a1 - a0, 2 * math.pi))  # screen y points down
    facing = float(axis_vector(handle) @ (vm.eye - origin)) >= 0
    angle = sweep if facing else -sweep
    return round(angle / SNAP_DEG) * SNAP_DEG if snap else angle


def drag_amount(vm: ViewMath, origin: np.ndarray, handle: int, start: np.ndarray, now: np.ndarray,
                snap: bool) -> float:
    """What a drag on `handle` means: a distance (arrows) or an angle in degrees (rings)."""
    measure = axis_offset if handle < 3 else ring_angle
    return measure(vm, origin, handle, start, now, snap)


def dragged_model(base: np.ndarray, handle: int, amount: float) -> np.ndarray:
    """The 4x4 model matrix `base` moved (arrows) or turned about the world axis (rings)."""
    model = base.copy()
    if handle < 3:
        model[:3, 3] += axis_vector(handle) * amount
    else:
        model[:3, :3] = axis_rotation(handle % 3, amount) @ model[:3, :3]
    return model


def handle_matrix(axis: int, origin, length: float) -> np.ndarray:
    """Model matrix taking the +X arrow (or ring) onto world axis `axis` at `origin`,
    `length` long."""
    m = np.identity(4)
    if axis == 1:
        m[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]
    elif axis == 2:
        m[:3, :3] = [[0, 0, -1], [0, 1, 0], [1, 0, 0]]
    m[:3, :3] *= length
    m[:3, 3] = origin
    return m


def arrow_mesh(segments: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """An arrow along +X from 0 to 1 (shaft and cone), as positions and triangle indices."""
    a = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    ring = np.stack([np.zeros_like(a), np.cos(a), np.sin(a)], 1)
    shaft0, shaft1 = ring * 0.018 + [0.0, 0, 0], ring * 0.018 + [0.78, 0, 0]
    cone = ring * 0.07 + [0.78, 0, 0]
    pos = np.vstack([shaft0, shaft1, cone, [[1.0, 0, 0]], [[0.78, 0, 0]]])
    tip, base = 3 * segments, 3 * segments + 1
    tris = []
    for i in range(segments):
        j = (i + 1) % segments
        tris += [[i, j, segments + j], [i, segments + j, segments + i]]
        tris += [[2 * segments + i, 2 * segments + j, tip], [2 * segments + j, 2 * segments + i, base]]
    return pos.astype("f4"), np.array(tris, "u4")


def ring_mesh(segments: int = 64, sides: int = 6, tube: float = 0.016) -> tuple[np.ndarray, np.ndarray]:
    """A thin ring around +X (in the YZ plane), radius RING_RADIUS, as positions and triangles."""
    u = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    v = np.linspace(0, 2 * np.pi, sides, endpoint=False)
    uu, vv = np.meshgrid(u, v, indexing="ij")
    r = RING_RADIUS + tube * np.cos(vv)
    pos = np.stack([tube * np.sin(vv), r * np.cos(uu), r * np.sin(uu)], -1).reshape(-1, 3)
    tris = []
    for i in range(segments):
        for j in range(sides):
            a, b = i * sides + j, ((i + 1) % segments) * sides + j
            c, d = ((i + 1) % segments) * sides + (j + 1) % sides, i * sides + (j + 1) % sides
            tris += [[a, b, c], [a, c, d]]
    return pos.astype("f4"), np.array(tris, "u4")
