"""Matrices for the live viewport from the shared orbit camera, and screen <-> world helpers.

Column vectors, matrices as row-major numpy arrays (transpose before handing to GL)."""

from __future__ import annotations

import math

import numpy as np

from studio.models.orbit import OrbitCamera

# numpad-style views: (azimuth, elevation) of the camera about the target
VIEWS = {"front": (-90.0, 0.0), "back": (90.0, 0.0), "right": (0.0, 0.0), "left": (180.0, 0.0),
         "top": (-90.0, 89.0), "bottom": (-90.0, -89.0), "iso": (45.0, 35.0)}


def look_at(eye, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    eye, target, up = (np.asarray(v, float) for v in (eye, target, up))
    f = target - eye
    f /= np.linalg.norm(f)
    s = np.cross(f, up)
    if np.linalg.norm(s) < 1e-9:
        s = np.cross(f, (0.0, 1.0, 0.0))
    s /= np.linalg.norm(s)
    u = np.cross(s, f)
    m = np.identity(4)
    m[0, :3], m[1, :3], m[2, :3] = s, u, -f
    m[:3, 3] = -m[:3, :3] @ eye
    return m


def perspective(fov_y: float, aspect: float, near: float, far: float) -> np.ndarray:
    t = 1.0 / math.tan(fov_y / 2)
    m = np.zeros((4, 4))
    m[0, 0], m[1, 1] = t / aspect, t
    m[2, 2], m[2, 3] = (far + near) / (near - far), 2 * far * near / (near - far)
    m[3, 2] = -1.0
    return m


def orthographic(half_height: float, aspect: float, near: float, far: float) -> np.ndarray:
    m = np.identity(4)
    m[0, 0], m[1, 1] = 1.0 / (half_height * aspect), 1.0 / half_height
    m[2, 2], m[2, 3] = -2.0 / (far - near), -(far + near) / (far - near)
    return m


class ViewMath:
    """The camera's view and projection for a viewport of `width` x `height` pixels.

    `ortho`: a parallel projection (the numpad views, as in Blender and the worker's fixed
    views) that shows at the target what the perspective one would, so F and the wheel zoom
    it the same way."""

    def __init__(self, camera: OrbitCamera, width: int, height: int, ortho: bool = False) -> None:
        self.width, self.height = max(1, width), max(1, height)
        aspect = self.width / self.height
        # Blender's sensor fit "auto": the 36 mm sensor spans the larger side
        half = 18.0 / camera.lens_mm
        fov_y = 2 * math.atan(half / aspect) if aspect >= 1 else 2 * math.atan(half)
        self.eye = np.array(camera.location())
        self.target = np.array(camera.target, float)
        d = max(camera.distance, 1e-3)
        self.view = look_at(self.eye, self.target)
        self.ortho = ortho
        self.half_height = d * math.tan(fov_y / 2)  # at the target: what ortho shows
        self.proj = (orthographic(self.half_height, aspect, -d * 100.0, d * 100.0) if ortho
                     else perspective(fov_y, aspect, d / 1000.0, d * 100.0))
        self.view_proj = self.proj @ self.view
        self.distance = d
        self.fov_y = fov_y

    def to_screen(self, point) -> np.ndarray:
        """Pixel position (x right, y down) of a world point."""
        p = self.view_proj @ np.append(np.asarray(point, float), 1.0)
        w = p[3] if abs(p[3]) > 1e-12 else 1e-12
        return np.array([(p[0] / w + 1) / 2 * self.width, (1 - p[1] / w) / 2 * self.height])

    def pixels_per_unit(self, point) -> float:
        """How many pixels one world unit spans at `point`'s depth."""
        if self.ortho:
            return self.height / (2 * self.half_height)
        depth = float(np.linalg.norm(np.asarray(point, float) - self.eye))
        return self.height / (2 * math.tan(self.fov_y / 2) * max(depth, 1e-9))


def grid_step(pixels_per_unit: float, min_px: float = 12.0) -> float:
    """The smallest 1-2-5 x 10^k spacing whose cells are at least `min_px` pixels wide."""
    unit = min_px / max(pixels_per_unit, 1e-12)
    k = math.floor(math.log10(unit))
    for m in (1, 2, 5, 10):
        step = m * 10.0 ** k
        if step >= unit:
            return step
    return 10.0 ** (k + 1)
