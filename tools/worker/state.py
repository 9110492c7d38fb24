"""Undo points, named snapshots and the scene hash, all on disk in the session's scratch dir.

A commit is a folder holding the Blender main file and a manifest of CAD parts (B-rep files
in a content-addressed pool). Commits survive a worker crash: a fresh worker started on the
same scratch dir loads the latest one, which is exactly the state before the failed call.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct

import bpy
import numpy as np

from tools.errors import ErrorKind, ToolError
from tools.worker.cad import PartStore

MAX_UNDO = 64
_STASH_KEY = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")


class SceneState:
    def __init__(self, root: str, parts: PartStore):
        self.root = root
        self.parts = parts
        self.commits_dir = os.path.join(root, "commits")
        self.snap_dir = os.path.join(root, "snapshots")
        self.brep_dir = os.path.join(root, "breps")
        self.stash_dir = os.path.join(root, "stash")
        self.commits: list[str] = []
        self._seq = 0

    @property
    def depth(self) -> int:
        return max(0, len(self.commits) - 1)

    # -- lifecycle -----------------------------------------------------------------------------
    def reset(self) -> None:
        """Empty scene; undo history, snapshots and stashed states are all dropped."""
        shutil.rmtree(self.root, ignore_errors=True)
        self._fresh()

    def _fresh(self) -> None:
        bpy.ops.wm.read_factory_settings(use_empty=True)
        from tools.worker import safety

        safety.harden_blender()
        self.parts.clear()
        for d in (self.commits_dir, self.snap_dir, self.brep_dir):
            os.makedirs(d, exist_ok=True)
        self.commits, self._seq = [], 0
        self.commit()

    def switch(self, park: str | None, take: str | None, fork: bool = False) -> dict:
        """Swap whole session states on this worker (for RL rollouts that share it).

        The live state (scene, undo history, snapshots) is parked under `park` (or dropped),
        then the state stashed under `take` becomes live: moved, or copied when `fork` (a
        start state several rollouts begin from); `take=None` starts an empty scene. Each
        state keeps its own undo history and snapshots, so a rollout never undoes into, or
        restores, another's. A missing `take` is refused before anything changes.
        """
        for key in (park, take):
            if key is not None and not _STASH_KEY.match(key):
                raise ToolError(ErrorKind.VALIDATION, f"bad stash key {key!r}")
        src = os.path.join(self.stash_dir, take) if take is not None else None
        if src is not None and not os.path.isdir(os.path.join(src, "commits")):
            raise ToolError(ErrorKind.VALIDATION, f"no stashed state {take!r}")
        if park is not None:
            dst = os.path.join(self.stash_dir, park)
            shutil.rmtree(dst, ignore_errors=True)
            os.makedirs(dst)
            os.rename(self.commits_dir, os.path.join(dst, "commits"))
            os.rename(self.snap_dir, os.path.join(dst, "snapshots"))
        else:
            shutil.rmtree(self.commits_dir, ignore_errors=True)
            shutil.rmtree(self.snap_dir, ignore_errors=True)
        if src is None:
            self._fresh()
            return {"switched": None}
        move = shutil.copytree if fork else os.rename
        move(os.path.join(src, "snapshots"), self.snap_dir)
        move(os.path.join(src, "commits"), self.commits_dir)
        if not fork:
            shutil.rmtree(src, ignore_errors=True)
        self.load_latest()
        return {"switched": take}

    def commit(self) -> None:
        """Write the next undo point; it appears under its final name only once complete,
        so a worker killed mid-commit leaves the previous commit as the latest."""
        self._seq += 1
        path = os.path.join(self.commits_dir, f"{self._seq:06d}")
        tmp = path + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        self._write(tmp)
        os.rename(tmp, path)
        self.commits.append(path)
        while len(self.commits) > MAX_UNDO + 1:
            shutil.rmtree(self.commits.pop(0), ignore_errors=True)

    def rollback(self) -> None:
        """Return to the last commit (after a failed mutating call)."""
        self._read(self.commits[-1])

    def undo(self, steps: int) -> dict:
        if self.depth == 0:
            raise ToolError(ErrorKind.VALIDATION, "nothing to undo")
        steps = min(steps, self.depth)
        for _ in range(steps):
            shutil.rmtree(self.commits.pop(), ignore_errors=True)
        self._read(self.commits[-1])
        return {"undone": steps, "remaining": self.depth}

    def snapshot(self, name: str) -> dict:
        dst = os.path.join(self.snap_dir, name)
        tmp = dst + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        self._write(tmp)
        shutil.rmtree(dst, ignore_errors=True)
        os.rename(tmp, dst)
        return {"snapshot": name, "scene_hash": self.scene_hash()}

    def restore(self, name: str) -> dict:
        src = os.path.join(self.snap_dir, name)
        if not os.path.isdir(src):
            known = sorted(os.listdir(self.snap_dir))
            raise ToolError(ErrorKind.VALIDATION, f"no snapshot {name!r}; snapshots: {known or 'none'}")
        self._read(src)
        self.commit()
        return {"restored": name, "scene_hash": self.scene_hash()}

    def load_latest(self) -> None:
        """After a crash: adopt the commits on disk and load the newest."""
        names = sorted(n for n in os.listdir(self.commits_dir)
                       if n.isdigit() and os.path.isfile(os.path.join(self.commits_dir, n, "parts.json"))) \
            if os.path.isdir(self.commits_dir) else []
        if not names:  # e.g. killed half-way through a switch: start empty, keep the stashes
            self._fresh()
            return
        self.commits = [os.path.join(self.commits_dir, n) for n in names]
        self._seq = int(names[-1])
        self._read(self.commits[-1])

    # -- files ----------------------------------------------------------------------------------
    def _write(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)
        bpy.ops.wm.save_as_mainfile(filepath=os.path.join(path, "scene.blend"), copy=True,
                                    compress=False, check_existing=False)
        manifest = {name: self.parts.save(name, self.brep_dir) for name in self.parts.names()}
        with open(os.path.join(path, "parts.json"), "w") as f:
            json.dump(manifest, f, sort_keys=True)

    def _read(self, path: str) -> None:
        blend = os.path.join(path, "scene.blend")
        bpy.ops.wm.open_mainfile(filepath=blend, load_ui=False, use_scripts=False)
        with open(os.path.join(path, "parts.json")) as f:
            manifest = json.load(f)
        self.parts.load_manifest(manifest, self.brep_dir)

    # -- hash ------------------------------------------------------------------------------------
    def scene_hash(self) -> str:
        """A deterministic digest of names, transforms, mesh data, materials and CAD parts."""
        h = hashlib.sha256()
        for ob in sorted(bpy.data.objects, key=lambda o: o.name):
            if ob.get("mw_helper"):
                continue
            h.update(ob.name.encode() + b"\0" + ob.type.encode())
            h.update((ob.parent.name if ob.parent else "").encode())
            h.update(np.array(ob.matrix_world, dtype=np.float64).round(9).tobytes())
            h.update(str(ob.get("mw_source", "blender")).encode() + (b"H" if ob.hide_render else b"V"))
            if ob.type == "MESH":
                me = ob.data
                co = np.empty(len(me.vertices) * 3, dtype=np.float32)
                me.vertices.foreach_get("co", co)
                h.update(co.tobytes())
                h.update(canonical_faces(me).tobytes())
                for mod in ob.modifiers:
                    h.update(mod.type.encode())
            for slot in ob.material_slots:
                mat = slot.material
                if mat is not None:
                    h.update(mat.name.encode())
                    h.update(struct.pack("<6d", *mat.diffuse_color[:4], mat.metallic, mat.roughness))
            if ob.type == "LIGHT":
                h.update(struct.pack("<4d", ob.data.energy, *ob.data.color))
        h.update(self.parts.digest().encode())
        return h.hexdigest()[:32]


def canonical_faces(me) -> np.ndarray:
    """Faces as vertex-index rows, each rotated to start at its smallest index (winding kept),
    rows sorted: Blender's primitive builders emit the same faces in a per-process order."""
    n = len(me.polygons)
    if n == 0:
        return np.zeros((0,), dtype=np.int32)
    loops = np.empty(len(me.loops), dtype=np.int32)
    me.loops.foreach_get("vertex_index", loops)
    starts = np.empty(n, dtype=np.int64)
    totals = np.empty(n, dtype=np.int64)
    me.polygons.foreach_get("loop_start", starts)
    me.polygons.foreach_get("loop_total", totals)
    seg = np.cumsum(totals) - totals  # where each polygon's run starts in `vals`
    poly = np.repeat(np.arange(n), totals)
    pos = np.arange(int(totals.sum())) - seg[poly]
    vals = loops[starts[poly] + pos]
    mins = np.minimum.reduceat(vals, seg)
    hit = np.nonzero(vals == mins[poly])[0]
    first = np.full(n, np.iinfo(np.int64).max)
    np.minimum.at(first, poly[hit], pos[hit])
    rows = np.full((n, int(totals.max())), -1, dtype=np.int32)
    rows[poly, (pos - first[poly]) % totals[poly]] = vals
    return rows[np.lexsort(rows.T[::-1])]
