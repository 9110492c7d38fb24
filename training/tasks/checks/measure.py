"""What every constraint kind shares: a kind's verdict (`Measured`: ok and what was measured),
an object's centre and turn, its colour as hex, and how a missing object is reported.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

Measured = tuple[bool, Any]


def centre(o: dict) -> np.ndarray:
    return (np.asarray(o["bbox_min"], float) + np.asarray(o["bbox_max"], float)) / 2


def rotation_of(deg) -> np.ndarray:
    rx, ry, rz = (math.radians(v) for v in deg)
    cx, sx, cy, sy, cz, sz = (
        math.cos(rx),
        math.sin(rx),
        math.cos(ry),
        math.sin(ry),
        math.cos(rz),
        math.sin(rz),
    )
    mx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    my = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    mz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return mz @ my @ mx


def rotation_error_deg(a, b) -> float:
    r = rotation_of(a).T @ rotation_of(b)
    return math.degrees(math.acos(max(-1.0, min(1.0, (np.trace(r) - 1) / 2))))


def hex_of(c: str) -> np.ndarray:
    c = c.lstrip("#")
    return np.array([int(c[i : i + 2], 16) for i in (0, 2, 4)], float)


def missing_object(name: str) -> Measured:
    return False, f"{name} missing"
