"""Constraint kinds on cameras and lights: a light's kind, energy, place and aim, and a
subject framed by a camera.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from training.tasks.checks.measure import (
    Measured,
    missing_object,
    rotation_of,
)
from training.tasks.context import EvalContext


def _forward(o: dict) -> np.ndarray:
    """Where a light or camera points: its local -Z in world space."""
    return rotation_of(o["rotation_deg"]) @ np.array([0.0, 0.0, -1.0])


def c_light(
    ctx: EvalContext, object: str, type: str, energy, aim=None, tol_deg: float = 5.0,
    location=None, tol: float = 0.1,
) -> Measured:
    """A light of a kind, with energy in [lo, hi], optionally at a place and aimed at a point."""
    o = ctx.obj(object)
    if o is None:
        return missing_object(object)
    light = o.get("light")
    if not light:
        return False, f"{object} is not a light"
    ok = light["kind"] == type and energy[0] <= light["energy"] <= energy[1]
    out: dict[str, Any] = {"kind": light["kind"], "energy": light["energy"]}
    loc = np.asarray(o["location"], float)
    if location is not None:
        off = float(np.max(np.abs(loc - np.asarray(location, float))))
        ok &= off <= tol
        out["offset"] = round(off, 4)
    if aim is not None:
        want = np.asarray(aim, float) - loc
        cosang = float(np.dot(_forward(o), want) / max(np.linalg.norm(want), 1e-9))
        err = math.degrees(math.acos(max(-1.0, min(1.0, cosang))))
        ok &= err <= tol_deg
        out["aim_error_deg"] = round(err, 3)
    return bool(ok), out


def c_framed(
    ctx: EvalContext, camera: str, objects: list[str], fill, view=None, tol_deg: float = 10.0,
    location=None, tol: float = 0.1,
) -> Measured:
    """Every corner of the objects' boxes projects inside the camera's square frame, the
    projection spans a share of the frame in [lo, hi] (its larger side), and optionally the
    camera looks from `view` (a direction from the subjects towards the camera)."""
    cam = ctx.obj(camera)
    found = [ctx.obj(n) for n in objects]
    if cam is None or not cam.get("camera"):
        return False, f"no camera {camera}"
    if any(o is None for o in found):
        return False, "missing objects"
    r = rotation_of(cam["rotation_deg"])
    right, up, fwd = r[:, 0], r[:, 1], -r[:, 2]
    half = cam["camera"]["sensor_mm"] / 2 / cam["camera"]["lens_mm"]  # tan of the half view
    pos = np.asarray(cam["location"], float)
    pts = []
    for o in found:
        lo, hi = np.asarray(o["bbox_min"], float), np.asarray(o["bbox_max"], float)
        for k in range(8):
            p = np.where([k & 1, k & 2, k & 4], hi, lo) - pos
            depth = float(np.dot(p, fwd))
            if depth <= 1e-6:
                return False, "behind the camera"
            pts.append((np.dot(p, right) / depth / half, np.dot(p, up) / depth / half))
    xy = np.array(pts)
    inside = bool(np.all(np.abs(xy) <= 1.0))
    share = float(max(np.ptp(xy[:, 0]), np.ptp(xy[:, 1])) / 2)
    ok = inside and fill[0] <= share <= fill[1]
    out: dict[str, Any] = {"inside": inside, "fill": round(share, 3)}
    if view is not None:
        lo = np.min([o["bbox_min"] for o in found], axis=0)
        hi = np.max([o["bbox_max"] for o in found], axis=0)
        d = pos - (lo + hi) / 2
        v = np.asarray(view, float)
        cosang = float(np.dot(d, v) / max(np.linalg.norm(d) * np.linalg.norm(v), 1e-9))
        err = math.degrees(math.acos(max(-1.0, min(1.0, cosang))))
        ok &= err <= tol_deg
        out["view_error_deg"] = round(err, 3)
    if location is not None:
        off = float(np.max(np.abs(pos - np.asarray(location, float))))
        ok &= off <= tol
        out["offset"] = round(off, 4)
    return bool(ok), out
