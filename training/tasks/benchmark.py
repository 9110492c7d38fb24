"""External benchmark folders: cases of a ground-truth mesh, prompts and a reference script.

Layout: `DIR/<case>/` holds exactly one ground-truth mesh (`.stl` or `.obj`), one or more
`.txt` prompts and optionally a reference CadQuery `.py`. Each case becomes a `Task` (family
`benchmark`) whose checker exports the final scene as STL and compares it with the
ground truth under the normalised protocol (chamfer x10^3, voxel IoU), so any policy can be
scored on it like on a generated task. Malformed cases are reported and skipped, never raised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from training.tasks.base import Task
from training.tasks.spec import TaskError, TaskSpec, call

BENCHMARK_FAMILY = "benchmark"
PART_NAME = "Part"
SUCCESS_IOU = 0.9


@dataclass
class BenchmarkCase:
    name: str
    folder: Path
    mesh: Path
    prompts: list[str]
    reference: str | None = None

    def task(self, prompt_index: int = 0) -> Task:
        prompt = self.prompts[prompt_index % len(self.prompts)]
        oracle = (
            [call("cadquery_script", name=PART_NAME, code=self.reference)] if self.reference else []
        )
        spec = TaskSpec(
            prompt=f"{prompt}\n(Build the result as a CAD part named '{PART_NAME}'.)",
            parameters={
                "benchmark": str(self.folder.parent),
                "case": self.name,
                "mesh": self.mesh.name,
            },
            oracle=oracle,
            constraints=[],
            geometry={"kind": "mesh_file", "path": str(self.mesh)},
            geometry_min=SUCCESS_IOU,
            budget=20,
        )
        return Task(
            id=f"{BENCHMARK_FAMILY}:{self.folder.parent.name}/{self.name}",
            family=BENCHMARK_FAMILY,
            level=0,
            seed=0,
            spec=spec,
        )


@dataclass
class Benchmark:
    folder: Path
    cases: dict[str, BenchmarkCase] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def case(self, name: str) -> BenchmarkCase:
        if name not in self.cases:
            why = next((s["reason"] for s in self.skipped if s["case"] == name), None)
            raise TaskError(
                f"case {name!r} in {self.folder}: "
                + (f"skipped ({why})" if why else f"not found; cases: {sorted(self.cases)}")
            )
        return self.cases[name]


def _read_case(folder: Path) -> BenchmarkCase:
    from training.rewards.geometry import ShapeLoadError, load_mesh

    meshes = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".stl", ".obj"))
    if not meshes:
        raise ValueError("no ground-truth mesh (.stl or .obj)")
    if len(meshes) > 1:
        raise ValueError(f"more than one ground-truth mesh: {[m.name for m in meshes]}")
    try:
        load_mesh(meshes[0])
    except ShapeLoadError as exc:
        raise ValueError(f"ground-truth mesh unreadable: {exc}") from None
    prompts = []
    for p in sorted(folder.glob("*.txt")):
        text = p.read_text(encoding="utf-8", errors="replace").strip()
        if text:
            prompts.append(text)
    if not prompts:
        raise ValueError("no non-empty .txt prompt")
    scripts = sorted(folder.glob("*.py"))
    if len(scripts) > 1:
        raise ValueError(f"more than one reference script: {[s.name for s in scripts]}")
    reference = scripts[0].read_text(encoding="utf-8", errors="replace") if scripts else None
    return BenchmarkCase(folder.name, folder, meshes[0], prompts, reference)


def load_benchmark(folder: str | Path) -> Benchmark:
    """Read every case folder; malformed ones land in `skipped` with the reason."""
    folder = Path(folder)
    if not folder.is_dir():
        raise TaskError(f"benchmark folder {folder} does not exist")
    bench = Benchmark(folder)
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        try:
            bench.cases[sub.name] = _read_case(sub)
        except (ValueError, OSError) as exc:
            bench.skipped.append({"case": sub.name, "reason": str(exc)})
    return bench
