"""Trajectory store benchmark: recording overhead per step (256x256 PNG frame), export
throughput over 1 000 episodes, and store size per step, each against a baseline measured in
the same run.

    .venv/bin/python benchmarks/bench_store.py [--episodes 1000] [--steps 4] [--record-steps 200]
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.store import Store  # noqa: E402
from agents.store.export import export_parquet  # noqa: E402


def unique(png: bytes, n: int) -> bytes:
    """The same picture with a tEXt chunk making its bytes unique (no Parquet dictionary dedup)."""
    import struct
    import zlib

    data = b"Comment\x00" + str(n).encode()
    chunk = struct.pack(">I", len(data)) + b"tEXt" + data + struct.pack(">I", zlib.crc32(b"tEXt" + data))
    return png[:33] + chunk + png[33:]  # after the signature and IHDR


def render_like_png(seed: int, size: int = 256) -> bytes:
    """A PNG about as compressible as a Workbench montage: shapes on a gradient, a little noise."""
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    img = Image.linear_gradient("L").resize((size, size)).convert("RGB")
    draw = ImageDraw.Draw(img)
    for _ in range(12):
        x, y = rng.randrange(size), rng.randrange(size)
        r = rng.randrange(8, size // 4)
        draw.ellipse((x - r, y - r, x + r, y + r), fill=tuple(rng.randrange(256) for _ in range(3)))
    noise = Image.effect_noise((size, size), 12).convert("RGB")
    img = Image.blend(img, noise, 0.08)
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def bench_recording(root: Path, frames: list[bytes], n: int) -> dict:
    # baseline: the frame written to a file with nothing else (no fsync), the floor of any store
    plain = root / "plain"
    plain.mkdir()
    t = time.perf_counter()
    for i in range(n):
        (plain / f"{i}.png").write_bytes(frames[i % len(frames)])
    base = (time.perf_counter() - t) / n
    # baseline 2: the same with fsync, i.e. the durability we pay for
    t = time.perf_counter()
    for i in range(n):
        with open(plain / f"s{i}.png", "wb") as f:
            f.write(frames[i % len(frames)])
            f.flush()
            os.fsync(f.fileno())
    synced = (time.perf_counter() - t) / n
    per_step = {}
    for durable in (True, False):
        with Store(root / f"rec-{durable}", durable=durable) as store:
            rec = store.begin_episode(source="rollout", prompt="bench")
            t = time.perf_counter()
            for i in range(n):
                rec.add_step(tool="add_primitive", args={"kind": "cube", "i": i},
                             result={"name": f"C{i}"}, frame=frames[i % len(frames)],
                             scene_hash=f"{i:032x}", model_message="step", tokens_in=900,
                             tokens_out=40, latency_ms=120.0)
            per_step[durable] = (time.perf_counter() - t) / n
            rec.finish(reward=1.0, success=True)
    return {"per_step_ms": per_step[True] * 1e3, "fast_step_ms": per_step[False] * 1e3,
            "plain_write_ms": base * 1e3, "fsync_write_ms": synced * 1e3}


def bench_export(root: Path, frames: list[bytes], episodes: int, steps: int) -> dict:
    data = root / "store"
    t = time.perf_counter()
    with Store(data) as store:
        for e in range(episodes):
            rec = store.begin_episode(task_id=f"bench:1:{e}", source="oracle", prompt="bench",
                                      tools=[{"name": "add_primitive", "parameters": {}}],
                                      initial_frame=unique(frames[e % len(frames)], e))
            for k in range(steps):
                rec.add_step(tool="add_primitive", args={"k": k}, result={"ok": True},
                             frame=unique(frames[(e + k) % len(frames)], e * 1000 + k + 1),
                             scene_hash=f"{k}")
            rec.finish(reward=1.0, success=True)
    record_s = time.perf_counter() - t
    index = sum(p.stat().st_size for p in data.glob("index.sqlite3*"))
    total = folder_bytes(data)
    frame_bytes = sum(p.stat().st_size for p in data.rglob("*.png"))
    n_steps = episodes * steps
    import pyarrow.parquet  # noqa: F401  (imports, ~2 s cold, are not export work)

    with Store(data) as store:
        t = time.perf_counter()
        report = export_parquet(store, root / "out")
        export_s = time.perf_counter() - t
    # baseline: the same PNG bytes read from disk and written as one flat Parquet column
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = time.perf_counter()
    blobs = [p.read_bytes() for p in sorted(data.rglob("*.png"))]
    pq.write_table(pa.table({"png": blobs}), root / "raw.parquet")
    with open(root / "raw.parquet", "rb") as f:
        os.fsync(f.fileno())  # the export makes its files durable too
    raw_s = time.perf_counter() - t
    return {"episodes": report.episodes, "export_s": export_s, "raw_s": raw_s,
            "record_s": record_s, "store_bytes": total, "index_bytes": index,
            "frame_bytes": frame_bytes, "steps": n_steps, "frames": episodes * (steps + 1),
            "export_bytes": folder_bytes(root / "out")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--record-steps", type=int, default=200)
    args = ap.parse_args()
    frames = [render_like_png(i) for i in range(16)]
    mean_png = sum(map(len, frames)) / len(frames)
    root = Path(tempfile.mkdtemp(prefix="mw-store-bench-"))
    try:
        r = bench_recording(root, frames, args.record_steps)
        print(f"frame: 256x256 PNG, mean {mean_png / 1024:.1f} KiB")
        print(f"recording overhead per step (with frame): {r['per_step_ms']:.2f} ms"
              f"  | baseline plain write {r['plain_write_ms']:.3f} ms (x{r['per_step_ms'] / r['plain_write_ms']:.1f})"
              f"  | baseline write+fsync {r['fsync_write_ms']:.2f} ms (x{r['per_step_ms'] / r['fsync_write_ms']:.1f})")
        print(f"  with durable=False (no fsync; survives kill -9, not power loss): "
              f"{r['fast_step_ms']:.2f} ms (x{r['fast_step_ms'] / r['plain_write_ms']:.1f} plain write)")
        e = bench_export(root, frames, args.episodes, args.steps)
        print(f"recorded {e['episodes']} episodes x {args.steps} steps in {e['record_s']:.1f} s")
        print(f"export throughput: {e['episodes'] / e['export_s']:.0f} episodes/s "
              f"({e['export_s']:.2f} s for {e['episodes']})"
              f"  | baseline raw PNGs->one Parquet column {e['raw_s']:.2f} s (x{e['export_s'] / e['raw_s']:.1f})")
        per_step = (e["store_bytes"]) / e["steps"]
        print(f"store size per step: {per_step / 1024:.1f} KiB (index {e['index_bytes'] / e['steps']:.0f} B/step)"
              f"  | baseline the PNG itself {mean_png / 1024:.1f} KiB (x{per_step / mean_png:.2f};"
              f" {e['frames'] / e['steps']:.2f} frames per step incl. the initial frame)")
        print(f"export size per step: {e['export_bytes'] / e['steps'] / 1024:.1f} KiB"
              f" (frames twice: conversation images + step table)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
