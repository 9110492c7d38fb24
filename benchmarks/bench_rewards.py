"""Reward-evaluation speed: chamfer distance (8192 samples) + voxel IoU per pair of parts.

Ours (training.rewards.geometry: own area-uniform sampler, winding-number voxeliser) next to a
plain trimesh + scipy baseline measured in the same run (trimesh.sample.sample_surface,
cKDTree, trimesh's voxelized().fill()). Also reports exact B-rep IoU time for reference.

    .venv/bin/python benchmarks/bench_rewards.py [--pairs N] [--repeats R]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

# Run as a script, this folder comes first on sys.path, and benchmarks/bench_training.py would
# shadow the `training` package: put the project root first.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import trimesh  # noqa: E402
from scipy.spatial import cKDTree  # noqa: E402

from training.rewards import geometry as g  # noqa: E402
from training.tasks.recipes import parts as P  # noqa: E402
from training.tasks.shapes import build_reference  # noqa: E402

TARGET_MS = 30.0


def load_note() -> str:
    import os

    load1 = os.getloadavg()[0]
    return f"load average {load1:.1f} on {os.cpu_count()} cores"


def baseline_metrics(a: trimesh.Trimesh, b: trimesh.Trimesh, n: int = g.SAMPLES, res: int = 64):
    """The plain way: trimesh sampling, scipy KD-trees, trimesh voxelisation with fill."""
    a, b = g.normalise(a), g.normalise(b)
    pa, _ = trimesh.sample.sample_surface(a, n, seed=0)
    pb, _ = trimesh.sample.sample_surface(b, n, seed=0)
    da, _ = cKDTree(pb).query(pa)
    db, _ = cKDTree(pa).query(pb)
    cd = 1e3 * float(np.mean(da**2) + np.mean(db**2))
    pitch = 1.0 / res
    va = {tuple(p) for p in np.round(a.voxelized(pitch).fill().points / pitch).astype(int)}
    vb = {tuple(p) for p in np.round(b.voxelized(pitch).fill().points / pitch).astype(int)}
    return cd, len(va & vb) / max(1, len(va | vb))


def ours_metrics(a: trimesh.Trimesh, b: trimesh.Trimesh):
    return g.chamfer_distance(a, b), g.voxel_iou(a, b)


def typical_pairs(n_pairs: int) -> list[tuple[str, trimesh.Trimesh, trimesh.Trimesh]]:
    makers = [P.plate, P.shaft, P.flange, P.bracket, P.shelled_box, P.mounting_plate]
    rng = random.Random(0)
    pairs = []
    for i in range(n_pairs):
        make = makers[i % len(makers)]
        a = build_reference(make(random.Random(rng.random())).script)
        b = build_reference(make(random.Random(rng.random())).script)
        pairs.append(
            (make.__name__, g.mesh_from_solid(a, 2e-3, 0.3), g.mesh_from_solid(b, 2e-3, 0.3))
        )
    return pairs


def timed(fn, *args, repeats: int) -> tuple[float, object]:
    best, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn(*args)
        best.append((time.perf_counter() - t0) * 1e3)
    return min(best), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument(
        "--repeats", type=int, default=5, help="best of R for ours (baseline: once, it is slow)"
    )
    args = ap.parse_args()
    pairs = typical_pairs(args.pairs)
    ours_ms, base_ms, iou_gap = [], [], []
    print(
        f"{'part':<16} {'tris':>6} {'ours ms':>8} {'base ms':>8}  {'CD ours/base':>14}  {'IoU ours/base':>14}"
    )
    for name, a, b in pairs:
        t_ours, (cd, iou) = timed(ours_metrics, a, b, repeats=args.repeats)
        t_base, (cd_b, iou_b) = timed(baseline_metrics, a, b, repeats=1)
        ours_ms.append(t_ours)
        base_ms.append(t_base)
        iou_gap.append(abs(iou - iou_b))
        print(
            f"{name:<16} {len(a.faces) + len(b.faces):>6} {t_ours:>8.1f} {t_base:>8.1f}  "
            f"{cd:>6.3f}/{cd_b:<7.3f}  {iou:>6.3f}/{iou_b:<7.3f}"
        )
    med_o, med_b = statistics.median(ours_ms), statistics.median(base_ms)
    print()
    print(load_note())
    print(
        f"median per pair: ours {med_o:.1f} ms, baseline {med_b:.1f} ms, speed-up x{med_b / med_o:.2f}"
    )
    print(
        f"target <= {TARGET_MS:.0f} ms: {'met' if med_o <= TARGET_MS else 'NOT met'}; "
        f"no slower than baseline: {'yes' if med_o <= med_b else 'NO'}"
    )
    print(f"mean |IoU ours - IoU baseline| = {statistics.mean(iou_gap):.3f} (different voxelisers)")
    # Exact B-rep IoU for reference (what CAD tasks use for success).
    a = build_reference(P.flange(random.Random(1)).script)
    b = build_reference(P.flange(random.Random(2)).script)
    t_brep, iou = timed(g.brep_iou, a, b, True, repeats=args.repeats)
    print(f"exact B-rep IoU (two flanges): {t_brep:.1f} ms, IoU {iou:.4f}")


if __name__ == "__main__":
    main()
