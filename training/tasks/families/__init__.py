"""Every task family, in one table: `FAMILIES` is built from `TABLE` and nothing else.

A family is one module under `families/<domain>/` that declares `FAMILY = Family(...)`
(training/tasks/spec.py). To add one: write its module and add its one line to `MODULES`
(docs/TASKS.md, "Adding a family"); a line naming no module is an ImportError at import.
The order is the order families were added; `split_ids`, eval and `tasks list` follow it.
"""

from __future__ import annotations

import importlib

from training.tasks import shapes
from training.tasks.config import BENCHMARK_WEIGHTS
from training.tasks.families.reconstruction.drawing_reconstruction import drawing_svg
from training.tasks.spec import Family

# One line a family: "<domain>.<module>", each module declaring `FAMILY = Family(...)`.
MODULES: tuple[str, ...] = (
    "scenes.primitive_placement",
    "edits.scene_editing",
    "scenes.materials",
    "reconstruction.render_reconstruction",
    "assemblies.fasteners",
    "assemblies.hinges",
    "assemblies.face_mates",
    "assemblies.clearance_fits",
    "edits.dimension_edits",
    "edits.feature_edits",
    "edits.mirror_pattern_edits",
    "scenes.composition",
    "parts.booleans",
    "parts.cad_parts",
    "reconstruction.mesh_reconstruction",
    "deliverables.deliverables",
    "parts.turned_parts",
    "parts.sweeps_lofts",
    "parts.enclosures",
    "parts.brackets",
    "parts.engraved_text",
    "parts.feature_patterns",
    "recovery.recovery",
    "repair.overlap_repair",
    "repair.mesh_repair",
    "repair.unit_repair",
    "repair.boolean_repair",
    "targets.volume_targets",
    "targets.mass_targets",
    "targets.print_walls",
    "scenes.rooms",
    "scenes.stairs_shelving",
    "scenes.lighting_camera",
    "reconstruction.drawing_reconstruction",
    "deliverables.print_deliverables",
    "deliverables.format_deliverables",
    "scenes.requests",
)
TABLE: tuple[Family, ...] = tuple(
    importlib.import_module(f"{__name__}.{m}").FAMILY for m in MODULES)


def by_name(table: tuple[Family, ...]) -> dict[str, Family]:
    """The registry: each family by its name; a name declared twice is an error."""
    out: dict[str, Family] = {}
    for f in table:
        if f.name in out:
            raise ValueError(f"task family {f.name!r} is declared twice")
        out[f.name] = f
    return out


FAMILIES: dict[str, Family] = by_name(TABLE)
# Each family's reward weights, and the external benchmark cases' (training/tasks/benchmark.py).
REWARD_WEIGHTS: dict[str, dict[str, float]] = {
    **{f.name: f.weights for f in TABLE}, "benchmark": BENCHMARK_WEIGHTS,
}
# Workspace files a task makes on demand at setup, by kind: fn(script) -> bytes.
FILE_MAKERS = {
    "reference_stl": shapes.reference_stl,
    "drawing_svg": drawing_svg,
}
