"""What a checker sees of a finished session: lazy, cached views of its final state.

The scene comes from `get_scene`; meshes from one GLB export of the scene and exact solids
from STEP exports, both written under a `_check_*` folder in the workspace that
`evaluate_task` removes afterwards.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from tools import Session


class EvalContext:
    """Lazy, cached views of the final state of one session."""

    def __init__(self, session: Session, calls: list[dict[str, Any]]):
        self.session = session
        self.calls = calls
        self.workspace = Path(session.workspace)
        self._scene: dict[str, dict] | None = None
        self._meshes: dict[str, Any] | None = None
        self._solids: dict[str, Any] = {}
        self.check_dir = f"_check_{uuid.uuid4().hex[:8]}"

    @property
    def objects(self) -> dict[str, dict]:
        if self._scene is None:
            self._scene = {o["name"]: o for o in self.session.scene().get("objects", [])}
        return self._scene

    def obj(self, name: str) -> dict | None:
        return self.objects.get(name)

    def meshes(self) -> dict[str, Any]:
        """{object name: world-space trimesh} from one GLB export of the whole scene."""
        if self._meshes is None:
            from training.rewards.geometry import load_scene_meshes

            self._meshes = {}
            if self.objects:
                rel = f"{self.check_dir}/scene.glb"
                r = self.session.call("export", {"format": "glb", "path": rel})
                if r.ok:
                    self._meshes = _by_object_name(
                        load_scene_meshes(self.workspace / rel), set(self.objects)
                    )
        return self._meshes

    def solid(self, name: str) -> Any | None:
        """The CAD part's exact B-rep in world space (via STEP export), or None."""
        if name not in self._solids:
            self._solids[name] = None
            obj = self.obj(name)
            if obj is not None and obj.get("source") == "cad":
                rel = f"{self.check_dir}/{name}.step"
                r = self.session.call("export", {"format": "step", "path": rel, "objects": [name]})
                if r.ok:
                    from training.rewards.geometry import ShapeLoadError, load_solid

                    try:
                        self._solids[name] = load_solid(self.workspace / rel)
                    except ShapeLoadError:
                        self._solids[name] = None
        return self._solids[name]


def _by_object_name(meshes: dict[str, Any], names: set[str]) -> dict[str, Any]:
    # glTF node names are the Blender object names; exporters may suffix duplicates.
    out: dict[str, Any] = {}
    for node, mesh in meshes.items():
        key = node if node in names else next((n for n in names if node.startswith(n)), node)
        out[key] = mesh if key not in out else _concat(out[key], mesh)
    return out


def _concat(a, b):
    import trimesh

    return trimesh.util.concatenate([a, b])
