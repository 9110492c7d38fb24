"""CAD parts: exact B-reps kept in the worker, shown in Blender as tessellated meshes.

A part and its Blender object share a name. The object's matrix places the part; the B-rep
stays in part coordinates, and world-space geometry (STEP export, booleans, queries) applies
the object's matrix to it.

Units: the scene is in metres; CAD parts are authored in millimetres (what drawings, STEP
files and CadQuery scripts use). The conversion happens here and only here, at the kernel
boundary: a part's mesh is its B-rep scaled by `SCENE_PER_MM`, and the object's placement
(metres) is scaled back to millimetres when the B-rep is taken to world space.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile

import bpy

from tools.cadfix import fixed_solids, revolutions_as_bsplines
from tools.errors import ErrorKind, ToolError
from tools.worker import script_guard
from tools.worker.lazy_cq import cq  # imported by the first CAD call, not at start

SCENE_PER_MM = 0.001  # one CAD millimetre in scene metres


class PartStore:
    def __init__(self) -> None:
        self._shapes: dict[str, cq.Shape] = {}
        self._files: dict[str, str] = {}  # name -> brep file name in the pool (content hash)
        self._pool: str | None = None

    def clear(self) -> None:
        self._shapes.clear()
        self._files.clear()

    def names(self) -> list[str]:
        # a part whose Blender object was deleted is gone too
        for name in [n for n in self._shapes if n not in bpy.data.objects]:
            self.drop(name)
        return sorted(self._shapes)

    def has(self, name: str) -> bool:
        return name in self._shapes and name in bpy.data.objects

    def get(self, name: str) -> cq.Shape:
        if not self.has(name):
            kind = "a Blender mesh, not a CAD part" if name in bpy.data.objects else "not in the scene"
            raise ToolError(ErrorKind.VALIDATION, f"{name!r} is {kind}; CAD parts: {self.names() or 'none'}")
        return self._shapes[name]

    def world(self, name: str) -> cq.Shape:
        """The part with its Blender object's transform applied, in millimetres."""
        shape, ob = self.get(name), bpy.data.objects[name]
        m = [list(row) for row in ob.matrix_world]
        if all(abs(m[i][j] - (1.0 if i == j else 0.0)) < 1e-12 for i in range(4) for j in range(4)):
            return shape
        loc, rot, scale = ob.matrix_world.decompose()
        loc_mm = tuple(c / SCENE_PER_MM for c in loc)
        if max(abs(c - 1) for c in scale) < 1e-9:  # rigid: exact rotate + translate
            axis, angle = rot.to_axis_angle()
            if abs(angle) > 1e-12:
                shape = shape.rotate((0, 0, 0), tuple(axis), math.degrees(angle))
            return shape.translate(loc_mm)
        rows = [[*row[:3], loc_mm[i]] for i, row in enumerate(m[:3])]
        return shape.transformGeometry(cq.Matrix(rows))

    def set(self, name: str, shape: cq.Shape, keep_transform: bool = True) -> dict:
        if not isinstance(shape, cq.Shape) or shape.isNull():
            raise ToolError(ErrorKind.KERNEL, f"{name}: the CAD result is empty")
        if not shape.isValid():
            raise ToolError(ErrorKind.KERNEL, f"{name}: the CAD result is not a valid solid")
        self._shapes[name] = shape
        self._files.pop(name, None)
        _sync_mesh(name, shape, keep_transform)
        return describe(name, shape)

    def drop(self, name: str) -> None:
        self._shapes.pop(name, None)
        self._files.pop(name, None)

    def copy(self, old: str, new: str) -> None:
        self._shapes[new] = self._shapes[old]
        if old in self._files:
            self._files[new] = self._files[old]

    def rename(self, old: str, new: str) -> None:
        if old in self._shapes:
            self._shapes[new] = self._shapes.pop(old)
            if old in self._files:
                self._files[new] = self._files.pop(old)

    def save(self, name: str, pool: str) -> str:
        if name not in self._files:
            fd, tmp = tempfile.mkstemp(suffix=".brep", dir=pool)
            os.close(fd)
            self._shapes[name].exportBrep(tmp)
            with open(tmp, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()[:24]
            final = os.path.join(pool, digest + ".brep")
            os.replace(tmp, final)
            self._files[name] = digest + ".brep"
        return self._files[name]

    def load_manifest(self, manifest: dict[str, str], pool: str) -> None:
        shapes = {}
        for name, fname in manifest.items():
            if self._files.get(name) == fname:
                shapes[name] = self._shapes[name]
            else:
                shapes[name] = cq.Shape.importBrep(os.path.join(pool, fname))
        self._shapes, self._files = shapes, dict(manifest)

    def digest(self) -> str:
        h = hashlib.sha256()
        for name in sorted(self._shapes):
            h.update(name.encode() + b"\0")
            fname = self._files.get(name)
            if fname is None:
                bb = self._shapes[name].BoundingBox()
                fname = f"{self._shapes[name].Volume():.9g}:{bb.xmin:.9g}:{bb.ymax:.9g}:{bb.zmax:.9g}"
            h.update(fname.encode())
        return h.hexdigest()


def describe(name: str, shape: cq.Shape) -> dict:
    bb = shape.BoundingBox()
    return {"name": name, "volume": round(shape.Volume(), 9), "area": round(shape.Area(), 9),
            "bbox_min": [round(bb.xmin, 6), round(bb.ymin, 6), round(bb.zmin, 6)],
            "bbox_max": [round(bb.xmax, 6), round(bb.ymax, 6), round(bb.zmax, 6)],
            "valid": shape.isValid(), "solids": len(shape.Solids()), "faces": len(shape.Faces()),
            "edges": len(shape.Edges())}


def _sync_mesh(name: str, shape: cq.Shape, keep_transform: bool) -> None:
    bb = shape.BoundingBox()
    tol = max(1e-4, 0.002 * max(bb.xlen, bb.ylen, bb.zlen, 1e-6))
    verts, tris = shape.tessellate(tol, 0.3)
    me = bpy.data.meshes.new(name)
    k = SCENE_PER_MM
    me.from_pydata([(v.x * k, v.y * k, v.z * k) for v in verts], [], [tuple(t) for t in tris])
    me.validate()
    me.shade_smooth()  # one B-rep face's triangles share normals; face borders are split already
    ob = bpy.data.objects.get(name)
    if ob is None:
        ob = bpy.data.objects.new(name, me)
        bpy.context.scene.collection.objects.link(ob)
    else:
        old = ob.data
        ob.data = me
        if old is not None and old.users == 0:
            bpy.data.meshes.remove(old)
        if not keep_transform:
            ob.matrix_world.identity()
    me.name = name
    ob["mw_source"] = "cad"


def _wp(shape: cq.Shape) -> cq.Workplane:
    return cq.Workplane("XY").add(shape)


def _solid(wp: cq.Workplane) -> cq.Shape:
    vals = [v for v in wp.vals() if isinstance(v, cq.Shape)]
    if not vals:
        raise ToolError(ErrorKind.KERNEL, "the operation produced no shape")
    return vals[0] if len(vals) == 1 else cq.Compound.makeCompound(vals)


def _select(wp: cq.Workplane, what: str, selector: str) -> cq.Workplane:
    try:
        sel = getattr(wp, what)(selector)
    except Exception as e:  # bad selector grammar
        raise ToolError(ErrorKind.VALIDATION, f"bad selector {selector!r}: {e}") from None
    if not sel.vals():
        raise ToolError(ErrorKind.VALIDATION, f"selector {selector!r} matched no {what}")
    return sel


# A font every install has (DejaVu ships with the system's fontconfig); None: CadQuery's default.
TEXT_FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def _need(a: dict, tool: str, *keys: str) -> None:
    missing = [k for k in keys if a.get(k) is None]
    if missing:
        raise ToolError(ErrorKind.VALIDATION, f"{tool} needs {', '.join(missing)}")


def _plane_square_to(start: cq.Vector, tangent: cq.Vector) -> cq.Plane:
    """The plane through `start` square to `tangent`; its x axis horizontal (Y for a vertical path)."""
    t = tangent.normalized()
    up = cq.Vector(0, 0, 1) if abs(t.z) < 0.999 else cq.Vector(0, 1, 0)
    return cq.Plane(origin=start, xDir=up.cross(t).normalized(), normal=t)


def _add_to(parts: PartStore, name: str, shape: cq.Shape) -> dict:
    if parts.has(name):
        shape = parts.get(name).fuse(shape).clean()
    return parts.set(name, shape)


def handlers(parts: PartStore, scratch: str, workspace: str) -> dict:
    def box(a):
        return parts.set(a["name"], cq.Workplane().box(a["length"], a["width"], a["height"],
                                                        centered=(True, True, False)).val())

    def cylinder(a):
        return parts.set(a["name"], cq.Workplane().circle(a["radius"]).extrude(a["height"]).val())

    def sketch_extrude(a):
        p = a["profile"]
        wp = cq.Workplane("XY", origin=(0, 0, a["at_z"]))
        need = {"rect": ("width", "height"), "circle": ("radius",), "slot": ("width", "height"),
                "polygon": ("points",)}[p["kind"]]
        missing = [k for k in need if p.get(k) is None]
        if missing:
            raise ToolError(ErrorKind.VALIDATION, f"profile {p['kind']} needs {', '.join(missing)}")
        if p["kind"] == "rect":
            wp = wp.rect(p["width"], p["height"])
        elif p["kind"] == "circle":
            wp = wp.circle(p["radius"])
        elif p["kind"] == "slot":
            wp = wp.slot2D(p["width"], p["height"])
        else:
            wp = wp.polyline([tuple(q) for q in p["points"]]).close()
        shape = wp.extrude(a["distance"]).val()
        if parts.has(a["name"]):
            shape = parts.get(a["name"]).fuse(shape).clean()
        return parts.set(a["name"], shape)

    def revolve(a):
        pts = [tuple(q) for q in a["points"]]
        if any(r < -1e-9 for r, _ in pts):
            raise ToolError(ErrorKind.VALIDATION, "revolve: every point needs r >= 0 (r is the distance from the Z axis)")
        wp = cq.Workplane("XZ").polyline(pts).close().revolve(a["angle_deg"], (0, 0, 0), (0, 1, 0))
        return parts.set(a["name"], wp.val())

    def hole(a):
        shape = parts.get(a["name"])
        face = _select(_wp(shape), "faces", a["face"])
        wp = face.workplane(centerOption="ProjectedOrigin", origin=(0, 0, 0)).pushPoints([tuple(p) for p in a["positions"]])
        if a.get("counterbore_diameter"):
            if not a.get("counterbore_depth"):
                raise ToolError(ErrorKind.VALIDATION, "counterbore_diameter needs counterbore_depth")
            if a["counterbore_diameter"] <= a["diameter"]:
                raise ToolError(ErrorKind.VALIDATION, "counterbore_diameter must exceed diameter")
            wp = wp.cboreHole(a["diameter"], a["counterbore_diameter"], a["counterbore_depth"], a.get("depth"))
        else:
            wp = wp.hole(a["diameter"], a.get("depth"))
        return parts.set(a["name"], _solid(wp))

    def fillet(a):
        sel = _select(_wp(parts.get(a["name"])), "edges", a["edges"])
        return parts.set(a["name"], _solid(sel.fillet(a["radius"])))

    def chamfer(a):
        sel = _select(_wp(parts.get(a["name"])), "edges", a["edges"])
        return parts.set(a["name"], _solid(sel.chamfer(a["length"])))

    def shell(a):
        sel = _select(_wp(parts.get(a["name"])), "faces", a["faces"])
        return parts.set(a["name"], fixed_solids(_solid(sel.shell(-a["thickness"]))))

    def pattern(a):
        if a["kind"] == "grid":
            pts = [[round((i - (a["count_x"] - 1) / 2) * a["spacing_x"], 9),
                    round((j - (a["count_y"] - 1) / 2) * a["spacing_y"], 9)]
                   for j in range(a["count_y"]) for i in range(a["count_x"])]
        else:
            pts = [[round(a["radius"] * math.cos(math.radians(a["start_deg"] + 360 * k / a["count"])), 9),
                    round(a["radius"] * math.sin(math.radians(a["start_deg"] + 360 * k / a["count"])), 9)]
                   for k in range(a["count"])]
        return {"positions": pts}

    def sweep(a):
        _need(a, "cad_sweep", *(("radius",) if a["profile"] == "circle" else ("width", "height")))
        pts = [cq.Vector(*p) for p in a["path"]]
        if any((q - p).Length < 1e-6 for p, q in zip(pts, pts[1:], strict=False)):
            raise ToolError(ErrorKind.VALIDATION, "cad_sweep: two consecutive path points coincide")
        if a["path_kind"] == "arc":
            if len(pts) != 3:
                raise ToolError(ErrorKind.VALIDATION, "cad_sweep: an arc path is 3 points (start, through, end)")
            if (pts[1] - pts[0]).cross(pts[2] - pts[0]).Length < 1e-6:
                raise ToolError(ErrorKind.VALIDATION, "cad_sweep: the 3 arc points lie on a line")
            path = cq.Wire.assembleEdges([cq.Edge.makeThreePointArc(*pts)])
        else:
            path = cq.Wire.makePolygon(pts)
        wp = cq.Workplane(_plane_square_to(pts[0], path.tangentAt(0)))
        wp = wp.circle(a["radius"]) if a["profile"] == "circle" else wp.rect(a["width"], a["height"])
        try:
            shape = revolutions_as_bsplines(wp.sweep(cq.Workplane().add(path), transition="round").val())
        except Exception:  # OCCT: the profile cannot follow this path
            raise ToolError(ErrorKind.KERNEL, "cad_sweep: the profile cannot be swept along this path "
                            "(too tight a bend for its size?)") from None
        if not shape.isValid():
            raise ToolError(ErrorKind.KERNEL, "cad_sweep: the sweep intersects itself (bends too tight for the profile?)")
        return _add_to(parts, a["name"], shape)

    def loft(a):
        secs = a["sections"]
        if any(q["z"] <= p["z"] for p, q in zip(secs, secs[1:], strict=False)):
            raise ToolError(ErrorKind.VALIDATION, "cad_loft: section z values must rise strictly")
        wires = []
        for s in secs:
            _need(s, f"a {s['kind']} section", *(("radius",) if s["kind"] == "circle" else ("width", "height")))
            c = cq.Vector(s["x"], s["y"], s["z"])
            if s["kind"] == "circle":
                wires.append(cq.Wire.makeCircle(s["radius"], c, cq.Vector(0, 0, 1)))
            else:
                w, h = s["width"] / 2, s["height"] / 2
                corners = [c + cq.Vector(x, y, 0) for x, y in ((-w, -h), (w, -h), (w, h), (-w, h))]
                wires.append(cq.Wire.makePolygon(corners, close=True))
        try:
            shape = cq.Solid.makeLoft(wires, a["ruled"])
        except Exception:
            raise ToolError(ErrorKind.KERNEL, "cad_loft: OCCT could not loft these sections") from None
        return _add_to(parts, a["name"], shape)

    def text(a):
        sel = _select(_wp(parts.get(a["name"])), "faces", a["face"])
        flat = f"cad_text: face {a['face']!r} must pick one plane (planar faces side by side)"
        if any(f.geomType() != "PLANE" for f in sel.vals()):
            raise ToolError(ErrorKind.VALIDATION, flat)
        try:
            wp = sel.workplane(centerOption="ProjectedOrigin", origin=(0, 0, 0))
        except ValueError:  # faces on different planes
            raise ToolError(ErrorKind.VALIDATION, flat) from None
        wp = wp.center(*a["position"])
        engrave = a["mode"] == "engrave"
        font = TEXT_FONT if os.path.isfile(TEXT_FONT) else None
        try:
            wp = wp.text(a["text"], a["height"], -a["depth"] if engrave else a["depth"],
                         combine="cut" if engrave else "a", fontPath=font)
        except Exception:
            raise ToolError(ErrorKind.KERNEL, "cad_text: the text could not be cut into or raised on that face") from None
        shape = _solid(wp)
        missed = engrave and shape.Volume() >= parts.get(a["name"]).Volume() - 1e-9
        if missed or len(shape.Solids()) != 1:
            raise ToolError(ErrorKind.VALIDATION, "cad_text: the text must lie on the face (is "
                            "`position` on it?)")
        return parts.set(a["name"], shape)

    def mirror(a):
        shape = parts.get(a["name"])
        normal = {"XY": (0, 0, 1), "YZ": (1, 0, 0), "XZ": (0, 1, 0)}[a["plane"]]
        base = tuple(a["distance"] * n for n in normal)
        return parts.set(a["name"], shape.fuse(shape.mirror(a["plane"], base)).clean())

    def query(a):
        return describe(a["name"], parts.world(a["name"]))

    def script(a):
        shape = script_guard.run_cadquery_script(a["code"], os.path.join(scratch, "script"))
        return parts.set(a["name"], shape)

    return {"cad_box": box, "cad_cylinder": cylinder, "cad_sketch_extrude": sketch_extrude,
            "cad_revolve": revolve, "cad_hole": hole, "cad_fillet": fillet, "cad_chamfer": chamfer,
            "cad_shell": shell, "cad_pattern": pattern, "cad_query": query, "cadquery_script": script,
            "cad_sweep": sweep, "cad_loft": loft, "cad_text": text, "cad_mirror": mirror}
