"""The live viewport's transform gizmo as geometry: the handles' shapes (three arrows to move,
three rings to rotate, three boxes to scale), where they sit, what a pointer drag on one means
(a distance along its axis, an angle about it, or a scale factor along the object's own axis),
and Blender's XYZ Euler angles for composing a dragged rotation with the object's own. No Qt,
no GL: `gl.py` draws the handles, `live.py` turns events into these calls."""

from __future__ import annotations

import math

import numpy as np

from studio.viewport.camera import ViewMath, grid_step

GIZMO_PX = 90  # arrow length on screen
RING_RADIUS = 0.62  # of the arrow length
HANDLES = 9  # handle h: 0-2 move along x, y, z; 3-5 rotate about x, y, z; 6-8 scale along the
# object's own x, y, z (Blender's `scale` is in the object's axes, so these turn with it)
SNAP_DEG = 15.0
SCALE_AT = 1.15  # the scale boxes sit beyond the arrow tips, this far along (of the arrow length)
SNAP_SCALE = 0.1  # Ctrl rounds a dragged scale factor to tenths
MIN_SCALE = 0.01  # a drag through the origin stops here: no zero or mirrored scale


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


def local_axis(basis: np.ndarray | None, axis: int) -> np.ndarray:
    """The object's own axis `axis` in world space (unit length), from its 4x4 model matrix."""
    if basis is None:
        return axis_vector(axis)
    v = np.asarray(basis, float)[:3, axis]
    n = float(np.linalg.norm(v))
    return v / n if n > 1e-12 else axis_vector(axis)


def axis_offset(vm: ViewMath, origin: np.ndarray, handle: int, start: np.ndarray, now: np.ndarray,
                snap: bool, direction: np.ndarray | None = None) -> float:
    """World distance along the handle's axis (or `direction`) for a pointer move from `start`
    to `now` (device pixels): the move projected on the axis as drawn; `snap` rounds to the grid."""
    d = axis_vector(handle) if direction is None else direction
    a, b = vm.to_screen(origin), vm.to_screen(origin + d)
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


def scale_factor(vm: ViewMath, origin: np.ndarray, handle: int, start: np.ndarray, now: np.ndarray,
                 snap: bool, base: np.ndarray | None, length: float) -> float:
    """The factor a drag on scale box `handle` means: the box's distance from the origin along
    the object's axis, after the move, over before (`length`: the gizmo's arrow length in world
    units); `snap` rounds to tenths. Never below MIN_SCALE."""
    along = axis_offset(vm, origin, handle, start, now, False, local_axis(base, handle % 3))
    at = SCALE_AT * length
    factor = (at + along) / at
    if snap:
        factor = round(factor / SNAP_SCALE) * SNAP_SCALE
    return max(MIN_SCALE, round(factor, 6))


def no_change(handle: int) -> float:
    """The amount of a drag that changes nothing: no distance, no angle, a factor of 1."""
    return 1.0 if handle >= 6 else 0.0


def drag_amount(vm: ViewMath, origin: np.ndarray, handle: int, start: np.ndarray, now: np.ndarray,
                snap: bool, base: np.ndarray | None = None, length: float = 1.0) -> float:
    """What a drag on `handle` means: a distance (arrows), an angle in degrees (rings) or a
    scale factor (boxes; `base` is the object's model matrix, `length` the arrow length)."""
    if handle >= 6:
        return scale_factor(vm, origin, handle, start, now, snap, base, length)
    measure = axis_offset if handle < 3 else ring_angle
    return measure(vm, origin, handle, start, now, snap)


def dragged_model(base: np.ndarray, handle: int, amount: float) -> np.ndarray:
    """The 4x4 model matrix `base` moved (arrows), turned about the world axis (rings) or
    scaled along its own axis (boxes)."""
    model = base.copy()
    if handle < 3:
        model[:3, 3] += axis_vector(handle) * amount
    elif handle < 6:
        model[:3, :3] = axis_rotation(handle % 3, amount) @ model[:3, :3]
    else:
        model[:3, handle % 3] *= amount
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


def scale_handle_matrix(axis: int, origin, length: float, basis: np.ndarray | None) -> np.ndarray:
    """Model matrix for scale box `axis`: like `handle_matrix`, but along the object's own axis
    (`basis`, its model matrix), the box's +X running along it."""
    m = np.identity(4)
    x = local_axis(basis, axis)
    helper = np.array([0.0, 0.0, 1.0]) if abs(x[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    y = np.cross(helper, x)
    y /= np.linalg.norm(y)
    m[:3, :3] = np.stack([x, y, np.cross(x, y)], 1) * length
    m[:3, 3] = origin
    return m


def box_mesh(size: float = 0.06) -> tuple[np.ndarray, np.ndarray]:
    """A small cube centred at SCALE_AT on +X, as positions and triangle indices."""
    c = np.array([SCALE_AT, 0.0, 0.0])
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float) * size + c
    faces = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tris = [[a, b, cc] for a, b, cc, _ in faces] + [[a, cc, d] for a, _, cc, d in faces]
    return corners.astype("f4"), np.array(tris, "u4")


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
