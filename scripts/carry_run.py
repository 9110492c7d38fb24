#!/usr/bin/env python3
"""Carry a pipeline run's resumable state to another machine (or a later session) and back.

    python scripts/carry_run.py pack runs/curriculum carry/curriculum
    python scripts/carry_run.py unpack carry/curriculum runs/curriculum
    modelwright train pipeline --config ... --out runs/curriculum --resume

`pack` copies what `--resume` needs to skip the finished stages and go on: the stage files
(`.NAME.json`, `.NAME.partial.json`), the eval journals and reports, and the adapters a later
stage reads (the chosen SFT checkpoint, GRPO's adapter), each file's sha256 in MANIFEST.json.
It leaves out what is rebuilt or no longer read: the demonstrations (Parquet), merged GGUF
variants, optimizer state, unchosen checkpoints and anything over `--max-mb`. So carry a run
at a stage boundary: a stage stopped part-way starts over (an eval stage keeps its journalled
episodes). `unpack` checks every hash before it writes. Stdlib only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path

SKIP_SUFFIXES = {".parquet", ".gguf", ".pt", ".pth", ".bin", ".tmp"}
SKIP_DIRS = {"variants", "demos", "runs", "__pycache__"}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def chosen_checkpoint(run: Path) -> str | None:
    """The SFT checkpoint the checkpoint choice picked (relative to the run), if it ran."""
    try:
        chosen = json.loads((run / ".select_sft.json").read_text())["result"]["chosen"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    adapter = chosen.get("adapter")
    return Path(adapter).name if adapter else None


def wanted(run: Path, path: Path, max_bytes: int, chosen: str | None) -> bool:
    rel = path.relative_to(run)
    if any(p in SKIP_DIRS for p in rel.parts[:-1]) or path.suffix in SKIP_SUFFIXES:
        return False
    if path.stat().st_size > max_bytes:
        return False
    if rel.parts[0] == "sft" and len(rel.parts) > 2:
        # the chosen checkpoint only; with no choice made yet, the final adapter only
        keep = chosen if chosen else "adapter"
        return rel.parts[1] == keep
    if rel.parts[0] == "grpo" and len(rel.parts) > 2:
        return rel.parts[1] == "adapter"
    return True


def pack(run: Path, dest: Path, max_mb: float) -> int:
    if not (run / ".demos.json").is_file():
        print(f"error: {run} is not a pipeline run folder (no .demos.json)", file=sys.stderr)
        return 2
    chosen = chosen_checkpoint(run)
    if dest.exists():
        shutil.rmtree(dest)
    manifest: dict[str, str] = {}
    for path in sorted(p for p in run.rglob("*") if p.is_file()):
        if not wanted(run, path, int(max_mb * 2**20), chosen):
            continue
        rel = path.relative_to(run)
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest / rel)
        manifest[str(rel)] = sha256(path)
    (dest / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    size = sum((dest / r).stat().st_size for r in manifest)
    print(f"packed {len(manifest)} files ({size / 2**20:.1f} MB) of {run} into {dest}")
    return 0


def unpack(src: Path, run: Path) -> int:
    try:
        manifest = json.loads((src / "MANIFEST.json").read_text())
    except (OSError, ValueError) as exc:
        print(f"error: {src}/MANIFEST.json cannot be read ({exc})", file=sys.stderr)
        return 2
    bad = [r for r, h in manifest.items() if not (src / r).is_file() or sha256(src / r) != h]
    if bad:
        print(f"error: {len(bad)} carried files missing or changed, e.g. {bad[0]}", file=sys.stderr)
        return 2
    for rel in manifest:
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, run / rel)
    print(f"unpacked {len(manifest)} files into {run}; go on with --resume")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("run", type=Path)
    p.add_argument("dest", type=Path)
    p.add_argument("--max-mb", type=float, default=32.0)
    u = sub.add_parser("unpack")
    u.add_argument("src", type=Path)
    u.add_argument("run", type=Path)
    a = ap.parse_args(argv)
    return pack(a.run, a.dest, a.max_mb) if a.cmd == "pack" else unpack(a.src, a.run)


if __name__ == "__main__":
    raise SystemExit(main())
