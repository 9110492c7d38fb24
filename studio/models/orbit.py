"""The viewport's orbit camera: azimuth/elevation/distance about a target, as render arguments."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

MIN_DISTANCE, MAX_DISTANCE = 0.01, 500.0  # 1 cm: a 6 mm CAD part still fills the view


@dataclass
class OrbitCamera:
    azimuth_deg: float = 45.0  # around +Z, from +X towards +Y
    elevation_deg: float = 30.0
    distance: float = 8.0
    target: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    lens_mm: float = 50.0

    def location(self) -> list[float]:
        az, el = math.radians(self.azimuth_deg), math.radians(self.elevation_deg)
        d = self.distance
        return [self.target[0] + d * math.cos(el) * math.cos(az),
                self.target[1] + d * math.cos(el) * math.sin(az),
                self.target[2] + d * math.sin(el)]

    def orbit(self, dx_px: float, dy_px: float, deg_per_px: float = 0.4) -> None:
        self.azimuth_deg = (self.azimuth_deg - dx_px * deg_per_px) % 360.0
        self.elevation_deg = max(-89.0, min(89.0, self.elevation_deg + dy_px * deg_per_px))

    def zoom(self, steps: float) -> None:
        """Positive steps move closer; each step is 15 %."""
        self.distance = max(MIN_DISTANCE, min(MAX_DISTANCE, self.distance * (0.85 ** steps)))

    def pan(self, dx_px: float, dy_px: float, viewport_px: int) -> None:
        """Move the target in the view plane so the scene follows the pointer."""
        az, el = math.radians(self.azimuth_deg), math.radians(self.elevation_deg)
        right = [-math.sin(az), math.cos(az), 0.0]
        up = [-math.sin(el) * math.cos(az), -math.sin(el) * math.sin(az), math.cos(el)]
        # the visible width at the target is about distance * sensor(36 mm) / lens
        scale = self.distance * 36.0 / self.lens_mm / max(1, viewport_px)
        for i in range(3):
            self.target[i] += (-dx_px * right[i] + dy_px * up[i]) * scale

    def drag(self, dx_px: float, dy_px: float, pan: bool, viewport_px: int) -> None:
        """One pointer drag step in either viewport: pan (middle or shift) or orbit."""
        if pan:
            self.pan(dx_px, dy_px, viewport_px)
        else:
            self.orbit(dx_px, dy_px)

    def frame(self, bounds: tuple[list[float], list[float]] | None) -> None:
        """Aim at the middle of `bounds` from far enough to see all of it."""
        if bounds is None:
            return
        lo, hi = bounds
        self.target = [(a + b) / 2 for a, b in zip(lo, hi, strict=True)]
        radius = max(0.002, math.dist(lo, hi) / 2)
        self.distance = max(MIN_DISTANCE, min(MAX_DISTANCE, radius * self.lens_mm / 18.0 * 1.5))

    def render_args(self, size: int) -> dict:
        loc = [round(v, 5) for v in self.location()]
        return {"camera": {"location": loc, "target": [round(v, 5) for v in self.target],
                           "lens_mm": self.lens_mm}, "size": size}
