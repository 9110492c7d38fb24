"""Undo points, named snapshots and the scene hash, all on disk in the session's scratch dir.

A commit is a folder that appears under its final name only once complete. It is either a
checkpoint (the Blender main file) or, for a call that only edits Blender data, a journal
entry (the call itself, replayed on the checkpoint before it: writing a 10 000-object main
file costs hundreds of milliseconds, a journal entry well under one). Both hold the manifest
of CAD parts (B-rep files in a content-addressed pool). Commits survive a worker crash: a
fresh worker started on the same scratch dir loads the latest one, which is exactly the state
before the failed call.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Callable

import bpy

from tools.errors import ErrorKind, ToolError
from tools.worker import relations
from tools.worker.cad import PartStore
from tools.worker.scene_hash import SceneHasher, canonical_faces, full_scene_hash

__all__ = ["MAX_UNDO", "SceneState", "canonical_faces", "full_scene_hash"]

MAX_UNDO = 64
_STASH_KEY = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
# Calls that only edit Blender data through the data API, deterministically from their
# arguments: these may be journaled. CAD calls (their B-reps round-trip through files),
# scripts and imports (inputs outside the scene) are always checkpointed.
JOURNALED = frozenset({"add_primitive", "transform", "set_material", "delete", "duplicate",
                       "rename", "parent", "join", "modifier", "add_light", "add_camera", "set_visible"})
CHECKPOINT_EVERY = 16  # at most this many journal entries between checkpoints (bounds a reload)
JOURNAL_FROM_OBJECTS = 200  # smaller scenes are cheap to write whole: always checkpoint them
_KEEP_CHUNKS = 4  # commits whose per-object hash chunks stay in memory (undo, rollback)



# Set by the worker template (tools/worker/template.py) after it emptied the scene with the
# factory settings: the first reset of a worker forked from it finds that scene as it was made.
_FACTORY_FRESH = False


def factory_reset_for_forks() -> None:
    """In the template, before any fork: the empty scene a fresh worker's first reset needs."""
    global _FACTORY_FRESH
    bpy.ops.wm.read_factory_settings(use_empty=True)
    _FACTORY_FRESH = True


def started() -> None:
    """A worker's start is over (an empty scene made, or a session's commit loaded): every later
    reset reads the factory settings again."""
    global _FACTORY_FRESH
    _FACTORY_FRESH = False

class SceneState:
    def __init__(self, root: str, parts: PartStore,
                 replay: Callable[[str, dict], object] | None = None):
        self.root = root
        self.parts = parts
        self.replay = replay  # runs one journaled call (set by the runtime)
        self.hasher = SceneHasher(parts)
        self.journal_from_objects = JOURNAL_FROM_OBJECTS
        self.commits_dir = os.path.join(root, "commits")
        self.snap_dir = os.path.join(root, "snapshots")
        self.brep_dir = os.path.join(root, "breps")
        self.stash_dir = os.path.join(root, "stash")
        self.commits: list[str] = []
        self._seq = 0
        self._digest: str | None = None
        self._kept: dict[str, tuple] = {}
        self.last_changed: set[str] | None = set()  # objects the last commit touched (None: any)
        self._parts_digest = ""  # the CAD parts' digest at the last commit
        self.loads = 0  # commits made live again (undo, rollback, recovery)

    @property
    def depth(self) -> int:
        return min(MAX_UNDO, max(0, len(self.commits) - 1))

    # -- lifecycle -----------------------------------------------------------------------------
    def reset(self) -> None:
        """Empty scene; undo history, snapshots and stashed states are all dropped."""
        shutil.rmtree(self.root, ignore_errors=True)
        self._fresh()

    def _fresh(self) -> None:
        global _FACTORY_FRESH
        if _FACTORY_FRESH:  # forked from the template right after its own reset: nothing ran since
            _FACTORY_FRESH = False
        else:
            bpy.ops.wm.read_factory_settings(use_empty=True)
        relations.forget()
        from tools.worker import safety

        safety.harden_blender()
        self.parts.clear()
        for d in (self.commits_dir, self.snap_dir, self.brep_dir):
            os.makedirs(d, exist_ok=True)
        self.commits, self._seq = [], 0
        self._loaded(None)
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
        self._kept.clear()
        if src is None:
            self._fresh()
            return {"switched": None}
        move = shutil.copytree if fork else os.rename
        move(os.path.join(src, "snapshots"), self.snap_dir)
        move(os.path.join(src, "commits"), self.commits_dir)
        if not fork:
            shutil.rmtree(src, ignore_errors=True)
        try:
            self.load_latest()
        except Exception as e:  # a state that does not load (a corrupt project file): back out
            self._back_out(park)
            raise ToolError(ErrorKind.VALIDATION, f"the stashed state {take!r} does not load: "
                            f"{str(e).splitlines()[0][:200] if str(e) else type(e).__name__}") from None
        return {"switched": take}

    def _back_out(self, park: str | None) -> None:
        """After a `take` that failed to load: drop it, and make the parked state live again
        as it was (or an empty scene when none was parked), as if the switch never happened."""
        shutil.rmtree(self.commits_dir, ignore_errors=True)
        shutil.rmtree(self.snap_dir, ignore_errors=True)
        self._kept.clear()
        parked = os.path.join(self.stash_dir, park) if park is not None else None
        if parked is None or not os.path.isdir(os.path.join(parked, "commits")):
            self._fresh()
            return
        os.rename(os.path.join(parked, "snapshots"), self.snap_dir)
        os.rename(os.path.join(parked, "commits"), self.commits_dir)
        shutil.rmtree(parked, ignore_errors=True)
        self.load_latest()

    # -- commits --------------------------------------------------------------------------------
    def touching(self, tool: str, args: dict) -> set[str] | None:
        """Before a mutating call: the objects it may change (None: any)."""
        return self.hasher.touching(tool, args)

    def after_read(self) -> None:
        """After a call that changes nothing: a dependency-graph update it ran may still have
        moved objects that were waiting for one (see `SceneHasher`)."""
        if self.hasher.update(set()):
            self._digest = None

    def commit(self, tool: str | None = None, args: dict | None = None,
               touched: set[str] | None = None) -> None:
        """Write the next undo point after a successful call (`tool`, `args`) that changed at
        most the objects `touched` (None: anything); it appears under its final name only
        once complete, so a worker killed mid-commit leaves the previous commit the latest."""
        if touched is None:  # an import or a script may have brought parents, constraints...
            relations.forget()
        self.hasher.update(touched)
        self.last_changed = set(touched) if touched is not None else None
        self._digest = None
        self._seq += 1
        path = os.path.join(self.commits_dir, f"{self._seq:06d}")
        tmp = path + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        if self._journal_ok(tool):
            os.makedirs(tmp)
            with open(os.path.join(tmp, "call.json"), "w") as f:
                json.dump({"tool": tool, "args": args, "scene_hash": self.scene_hash()}, f)
            self._write_parts(tmp)
        else:
            self._write(tmp)
        os.rename(tmp, path)
        self.commits.append(path)
        self._parts_digest = self.parts.digest()
        self._keep_chunks(path)
        # The oldest kept commit must be a checkpoint: journal entries need the one before them.
        while len(self.commits) > MAX_UNDO + 1 and _is_checkpoint(self.commits[1]):
            shutil.rmtree(self.commits.pop(0), ignore_errors=True)

    def _journal_ok(self, tool: str | None) -> bool:
        if tool not in JOURNALED or self.replay is None or not self.commits:
            return False
        if len(bpy.data.objects) < self.journal_from_objects:
            return False
        since = 0
        for path in reversed(self.commits):
            if _is_checkpoint(path):
                break
            since += 1
        return since + 1 < CHECKPOINT_EVERY

    def journal_entries(self) -> int:
        """How many of the kept commits are journal entries (the rest are checkpoints)."""
        return sum(1 for path in self.commits if not _is_checkpoint(path))

    def _keep_chunks(self, path: str) -> None:
        self._kept[path] = self.hasher.state()
        for old in [p for p in self._kept if p not in self.commits[-_KEEP_CHUNKS:]]:
            del self._kept[old]

    def rollback(self, touched: set[str] | None = None, refused: bool = False) -> None:
        """Return to the last commit after a failed mutating call. A call `refused` (a
        validation error: raised before it changes anything) whose `touched` objects still
        read as committed, CAD parts included, needs no reload: at 10 000 objects a reload
        costs seconds, and a model's typo should not."""
        if refused and self.hasher.unchanged(touched) \
                and self.parts.digest() == self._parts_digest:
            return
        self._load(len(self.commits) - 1)

    def undo(self, steps: int) -> dict:
        if self.depth == 0:
            raise ToolError(ErrorKind.VALIDATION, "nothing to undo")
        steps = min(steps, self.depth)
        for _ in range(steps):
            shutil.rmtree(self.commits.pop(), ignore_errors=True)
        self._load(len(self.commits) - 1)
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
        self._loaded(None)
        self.commit()
        return {"restored": name, "scene_hash": self.scene_hash()}

    def head(self) -> int:
        """The sequence number of the live commit (every reply carries it: the supervisor
        restores a dead worker's session to the last one it was told of, see `load_latest`)."""
        return int(os.path.basename(self.commits[-1])) if self.commits else -1

    def load_latest(self, upto: int | None = None) -> None:
        """After a crash: adopt the commits on disk and load the newest, or the newest up to
        `upto`, the last commit the supervisor read a reply about. A commit made by a call
        whose reply never arrived (the worker was killed: a timeout, a bad reply) is dropped,
        so the scene is as before the call, as the caller was told."""
        names = sorted((n for n in os.listdir(self.commits_dir)
                        if n.isdigit() and os.path.isfile(os.path.join(self.commits_dir, n, "parts.json"))),
                       key=int) if os.path.isdir(self.commits_dir) else []
        if upto is not None:
            for n in [n for n in names if int(n) > upto]:
                shutil.rmtree(os.path.join(self.commits_dir, n), ignore_errors=True)
            names = [n for n in names if int(n) <= upto]
        paths = [os.path.join(self.commits_dir, n) for n in names]
        while paths and not _is_checkpoint(paths[0]):  # nothing to replay them on
            paths.pop(0)
        if not paths:  # e.g. killed half-way through a switch: start empty, keep the stashes
            self._fresh()
            return
        self.commits = paths
        self._seq = int(names[-1])
        self._kept.clear()
        self._load(len(self.commits) - 1)

    # -- files ----------------------------------------------------------------------------------
    def _load(self, index: int) -> None:
        """Make commit `index` live: its checkpoint, then the journal entries after it."""
        self.loads += 1
        base = index
        while not _is_checkpoint(self.commits[base]):
            base -= 1
        self._read(self.commits[base])
        entries = [self.commits[i] for i in range(base + 1, index + 1)]
        for path in entries:
            with open(os.path.join(path, "call.json")) as f:
                entry = json.load(f)
            self.replay(entry["tool"], entry["args"])  # type: ignore[misc]
        if entries:
            self._read_parts(self.commits[index])
        self._loaded(self._kept.get(self.commits[index]))
        self._parts_digest = self.parts.digest()
        if entries and self.scene_hash() != entry["scene_hash"]:
            print(f"modelwright worker: replaying {self.commits[index]} gave scene hash "
                  f"{self.scene_hash()}, recorded {entry['scene_hash']}", file=sys.stderr)

    def _loaded(self, kept: tuple | None) -> None:
        self.hasher.adopt(kept)
        self.last_changed = None
        self._digest = None

    def _write(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)
        bpy.ops.wm.save_as_mainfile(filepath=os.path.join(path, "scene.blend"), copy=True,
                                    compress=False, check_existing=False)
        self._write_parts(path)

    def _write_parts(self, path: str) -> None:
        manifest = {name: self.parts.save(name, self.brep_dir) for name in self.parts.names()}
        with open(os.path.join(path, "parts.json"), "w") as f:
            json.dump(manifest, f, sort_keys=True)

    def _read(self, path: str) -> None:
        blend = os.path.join(path, "scene.blend")
        bpy.ops.wm.open_mainfile(filepath=blend, load_ui=False, use_scripts=False)
        relations.forget()
        self._read_parts(path)

    def _read_parts(self, path: str) -> None:
        with open(os.path.join(path, "parts.json")) as f:
            manifest = json.load(f)
        self.parts.load_manifest(manifest, self.brep_dir)

    # -- hash ------------------------------------------------------------------------------------
    def scene_hash(self) -> str:
        """A deterministic digest of names, transforms, mesh data, materials and CAD parts,
        kept up to date incrementally (see `tools.worker.scene_hash`)."""
        if self._digest is None:
            self._digest = self.hasher.digest()
        return self._digest


def _is_checkpoint(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "scene.blend"))
