"""The scene hash, kept incrementally so a call's cost follows what it changed.

The digest is the same one the full walk always produced (sha256 over every user object's
bytes in name order, then the CAD parts' digest): recorded episodes replay against it. What
changed is the bookkeeping: each object's bytes are cached by name, and after a mutating call
only the objects that call could have touched are read again from Blender. A call that may
touch anything (an import, a script, a reload of a commit) starts from a full walk instead.
"""

from __future__ import annotations

import hashlib
import struct

import bpy
import numpy as np

from tools.worker import relations

# Argument keys that name an object a call changes (the `parent` tool's new parent does not
# change: only the child and its descendants move).
_TOUCHED_KEYS = ("name", "new_name", "target", "cutter", "child", "into")
# Calls that may change any object: the cache is rebuilt from a full walk after them.
_ANYTHING = frozenset({"clear_scene", "import_file", "cadquery_script"})


def object_chunk(ob) -> bytes:
    """Exactly the bytes the scene hash reads for one object."""
    out = [ob.name.encode() + b"\0" + ob.type.encode(),
           (ob.parent.name if ob.parent else "").encode(),
           np.array(ob.matrix_world, dtype=np.float64).round(9).tobytes(),
           str(ob.get("mw_source", "blender")).encode() + (b"H" if ob.hide_render else b"V")]
    if ob.type == "MESH":
        me = ob.data
        co = np.empty(len(me.vertices) * 3, dtype=np.float32)
        me.vertices.foreach_get("co", co)
        out.append(co.tobytes())
        out.append(canonical_faces(me).tobytes())
        out.extend(mod.type.encode() for mod in ob.modifiers)
    for slot in ob.material_slots:
        mat = slot.material
        if mat is not None:
            out.append(mat.name.encode())
            out.append(struct.pack("<6d", *mat.diffuse_color[:4], mat.metallic, mat.roughness))
    if ob.type == "LIGHT":
        out.append(struct.pack("<4d", ob.data.energy, *ob.data.color))
    if ob.type == "CAMERA":
        out.append(struct.pack("<2d", ob.data.lens, ob.data.sensor_width))
    return b"".join(out)


class SceneHasher:
    """Per-object chunks by name; `digest` combines them with the CAD parts' digest."""

    def __init__(self, parts) -> None:
        self.parts = parts
        self._chunks: dict[str, bytes] | None = None  # None: walk everything on next use
        self._order: list[str] | None = None  # the chunks' names sorted (None: sort again)
        self._helpers: set[str] = set()  # names of renderer helpers seen (never hashed)
        # Objects whose world matrix waits for a depsgraph update (a light placed without one):
        # whichever call runs that update moves them, so they are read again after every call.
        self._stale: set[str] = set()
        self.full_walks = 0  # how many times the whole scene was read (for tests and benches)

    # -- what a call may touch ----------------------------------------------------------------
    def touching(self, tool: str, args: dict) -> set[str] | None:
        """Before a mutating call: the objects it may change, or None when it may change any.
        Read before the call because a deletion or re-parenting loses the links it needs."""
        if tool in _ANYTHING or self._chunks is None:
            return None
        names = {args[k] for k in _TOUCHED_KEYS if isinstance(args.get(k), str)}
        names |= {n for n in args.get("others") or () if isinstance(n, str)}
        touched = set(names)
        shared = []
        for name in names:
            ob = bpy.data.objects.get(name)
            if ob is None:
                continue
            touched |= relations.descendants(ob)  # world matrices, parent names
            if ob.data is not None and ob.data.users > 1:
                shared.append(ob.data)
            shared += [s.material for s in ob.material_slots if s.material is not None
                       and s.material.users > 1]
        if tool == "set_material":  # the material it edits may already colour other objects
            mat = bpy.data.materials.get(f"mw_{args.get('name')}")
            if mat is not None:
                shared.append(mat)
        if shared:
            touched |= _objects_using(shared)
        return touched

    def update(self, touched: set[str] | None) -> bool:
        """After a call: read again the objects it touched (all when None) and those whose
        world matrix was stale. Returns whether anything may have changed."""
        if touched is None or self._chunks is None:
            self._chunks = None
            return True
        names = touched | self._stale
        if not names:
            return False
        objects = bpy.data.objects
        stale = set()
        for name in names:
            ob = objects.get(name)
            if ob is None or ob.get("mw_helper"):
                if self._chunks.pop(name, None) is not None:
                    self._order = None
                continue
            if name not in self._chunks:
                self._order = None
            self._chunks[name] = object_chunk(ob)
            if _matrix_stale(ob):
                stale.add(name)
        self._stale = stale
        if not self._all_cached(objects):
            self._chunks = None
        return True

    def unchanged(self, touched: set[str] | None) -> bool:
        """Whether the objects a call may have touched still read exactly as cached (and no
        object came or went): then a refused call left nothing to roll back."""
        if touched is None or self._chunks is None:
            return False
        objects = bpy.data.objects
        for name in touched | self._stale:
            ob = objects.get(name)
            cached = self._chunks.get(name)
            if ob is None or ob.get("mw_helper"):
                if cached is not None:
                    return False
            elif cached is None or object_chunk(ob) != cached:
                return False
        return self._all_cached(objects)

    def _all_cached(self, objects) -> bool:
        """Cheap guard: no object appeared or vanished that a call did not name. Renderer
        helpers made since the last walk (its camera, grid, proxy) are learned by their flag:
        at 10 000 objects that costs milliseconds, the full walk a mismatch starts seconds."""
        for learn in (False, True):
            if learn:
                self._helpers |= {ob.name for ob in objects if ob.get("mw_helper")}
            helpers = sum(1 for n in self._helpers
                          if (ob := objects.get(n)) is not None and ob.get("mw_helper"))
            if len(objects) - helpers == len(self._chunks):
                return True
        return False

    # -- whole states -----------------------------------------------------------------------------
    def invalidate(self) -> None:
        self._chunks = None

    def state(self) -> tuple[dict[str, bytes], frozenset[str]]:
        """The chunks of the current scene (a copy that later calls do not change)."""
        return dict(self._walk()), frozenset(self._stale)

    def adopt(self, state: tuple[dict[str, bytes], frozenset[str]] | None) -> None:
        """Take the chunks of a state just loaded (a commit whose chunks were kept); objects
        that were waiting for a matrix update are read again, as loading may have run it."""
        if state is None:
            self._chunks = None
            return
        self._chunks, self._stale, self._order = dict(state[0]), set(state[1]), None
        self.update(set())

    def digest(self) -> str:
        chunks = self._walk()
        if self._order is None:  # names change rarely: sort them again only when they do
            self._order = sorted(chunks)
        h = hashlib.sha256(b"".join(map(chunks.__getitem__, self._order)))
        h.update(self.parts.digest().encode())
        return h.hexdigest()[:32]

    def full_digest(self) -> str:
        """The digest from a fresh walk of every object (what `digest` must always equal)."""
        return full_scene_hash(self.parts)

    def _walk(self) -> dict[str, bytes]:
        if self._chunks is None:
            self.full_walks += 1
            chunks, helpers, stale = {}, set(), set()
            for ob in bpy.data.objects:
                if ob.get("mw_helper"):
                    helpers.add(ob.name)
                    continue
                chunks[ob.name] = object_chunk(ob)
                if _matrix_stale(ob):
                    stale.add(ob.name)
            self._chunks, self._helpers, self._stale = chunks, helpers | self._helpers, stale
            self._order = None
        return self._chunks


def full_scene_hash(parts) -> str:
    """The scene hash by walking every object (the reference the incremental one must equal)."""
    h = hashlib.sha256()
    for ob in sorted(bpy.data.objects, key=lambda o: o.name):
        if not ob.get("mw_helper"):
            h.update(object_chunk(ob))
    h.update(parts.digest().encode())
    return h.hexdigest()[:32]


def _matrix_stale(ob) -> bool:
    """Whether the object's world matrix is not yet what its location, rotation, scale and
    parent make it (Blender updates it only when the dependency graph is evaluated)."""
    expected = ob.matrix_basis
    if ob.parent is not None:
        expected = ob.parent.matrix_world @ ob.matrix_parent_inverse @ expected
    world = ob.matrix_world
    return any(abs(world[i][j] - expected[i][j]) > 1e-6 for i in range(4) for j in range(4))


def _objects_using(ids: list) -> set[str]:
    """Names of the objects that use these meshes or materials, directly or via a mesh."""
    users = bpy.data.user_map(subset=set(ids))
    objs: set[str] = set()
    meshes = set()
    for found in users.values():
        for user in found:
            if isinstance(user, bpy.types.Object):
                objs.add(user.name)
            elif isinstance(user, bpy.types.Mesh):
                meshes.add(user)
    if meshes:
        for found in bpy.data.user_map(subset=meshes).values():
            objs |= {u.name for u in found if isinstance(u, bpy.types.Object)}
    return objs


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
