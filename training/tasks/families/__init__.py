"""Every task family, in one table: `FAMILIES` is built from `TABLE` and nothing else.

A family is one module under `families/<domain>/` that declares `FAMILY = Family(...)`
(training/tasks/spec.py). To add one: write its module, import it below and add its
`FAMILY` to `TABLE` (docs/TASKS.md, "Adding a family"). The order is the order families were
added; `split_ids`, eval and `tasks list` follow it.
"""

from __future__ import annotations

from training.tasks import shapes
from training.tasks.config import BENCHMARK_WEIGHTS
from training.tasks.families.assemblies import clearance_fits, face_mates, fasteners, hinges
from training.tasks.families.deliverables import (
    deliverables,
    format_deliverables,
    print_deliverables,
)
from training.tasks.families.edits import (
    dimension_edits,
    feature_edits,
    mirror_pattern_edits,
    scene_editing,
)
from training.tasks.families.parts import (
    booleans,
    brackets,
    cad_parts,
    enclosures,
    engraved_text,
    feature_patterns,
    sweeps_lofts,
    turned_parts,
)
from training.tasks.families.reconstruction import (
    drawing_reconstruction,
    mesh_reconstruction,
    render_reconstruction,
)
from training.tasks.families.recovery import recovery
from training.tasks.families.repair import boolean_repair, mesh_repair, overlap_repair, unit_repair
from training.tasks.families.scenes import (
    composition,
    lighting_camera,
    materials,
    primitive_placement,
    rooms,
    stairs_shelving,
)
from training.tasks.families.targets import mass_targets, print_walls, volume_targets
from training.tasks.spec import Family

TABLE: tuple[Family, ...] = (
    primitive_placement.FAMILY,
    scene_editing.FAMILY,
    materials.FAMILY,
    render_reconstruction.FAMILY,
    fasteners.FAMILY,
    hinges.FAMILY,
    face_mates.FAMILY,
    clearance_fits.FAMILY,
    dimension_edits.FAMILY,
    feature_edits.FAMILY,
    mirror_pattern_edits.FAMILY,
    composition.FAMILY,
    booleans.FAMILY,
    cad_parts.FAMILY,
    mesh_reconstruction.FAMILY,
    deliverables.FAMILY,
    turned_parts.FAMILY,
    sweeps_lofts.FAMILY,
    enclosures.FAMILY,
    brackets.FAMILY,
    engraved_text.FAMILY,
    feature_patterns.FAMILY,
    recovery.FAMILY,
    overlap_repair.FAMILY,
    mesh_repair.FAMILY,
    unit_repair.FAMILY,
    boolean_repair.FAMILY,
    volume_targets.FAMILY,
    mass_targets.FAMILY,
    print_walls.FAMILY,
    rooms.FAMILY,
    stairs_shelving.FAMILY,
    lighting_camera.FAMILY,
    drawing_reconstruction.FAMILY,
    print_deliverables.FAMILY,
    format_deliverables.FAMILY,
)


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
    "drawing_svg": drawing_reconstruction.drawing_svg,
}
