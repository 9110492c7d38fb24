"""The one renderer: Workbench (headless through EGL), auto-framed cameras, a flat ground grid
under the scene with thin X/Y axis lines and a written grid spacing for scale, fixed views tiled
as a montage, or any user camera. Same input, same pixels.

The grid lies flat at or below the scene's lowest point, so it never pierces or stands in front
of a part (it is hidden when the camera looks up from below it); there is no vertical axis.
"""

from __future__ import annotations

import io
import math
import os
from contextlib import contextmanager

import bmesh
import bpy
from mathutils import Vector
from PIL import Image, ImageDraw

from tools.worker import render_budget, safety
from tools.worker.scene import user_objects, world_bbox

DEFAULT_VIEWS = ["iso", "front", "top", "right"]
DIRECTIONS = {  # from the scene centre towards the camera
    "iso": Vector((1.0, -1.0, 0.8)).normalized(), "front": Vector((0, -1, 0)), "back": Vector((0, 1, 0)),
    "right": Vector((1, 0, 0)), "left": Vector((-1, 0, 0)), "top": Vector((0, 0, 1)), "bottom": Vector((0, 0, -1)),
}
BACKGROUND = (0.13, 0.14, 0.16)
GRID = (0.36, 0.38, 0.42, 1.0)
AXES = {"x": (0.85, 0.2, 0.2, 1.0), "y": (0.25, 0.75, 0.25, 1.0)}
LABEL = (200, 204, 212)


def format_length(metres: float) -> str:
    if metres >= 1:
        return f"{metres:g} m"
    if metres >= 0.01:
        return f"{metres * 100:g} cm"
    return f"{metres * 1000:g} mm"


def scene_bounds() -> tuple[Vector, Vector]:
    boxes = [world_bbox(o) for o in user_objects()
             if o.type == "MESH" and max(o.dimensions) > 0 and not o.hide_render]
    if not boxes:
        return Vector((-1, -1, 0)), Vector((1, 1, 1))
    lo = Vector((min(b[0].x for b in boxes), min(b[0].y for b in boxes), min(b[0].z for b in boxes)))
    hi = Vector((max(b[1].x for b in boxes), max(b[1].y for b in boxes), max(b[1].z for b in boxes)))
    return lo, hi


def _nice_step(extent: float) -> float:
    raw = extent / 8
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


class Renderer:
    def __init__(self, out_dir: str):
        self.out_dir = out_dir
        self.shading = "solid"
        self._proxy = None  # the scene drawn instead of the real one when it is large
        os.makedirs(out_dir, exist_ok=True)

    # -- public -----------------------------------------------------------------------------------
    def warm_up(self) -> None:
        """The first Workbench render compiles shaders (seconds); pay it while the worker warms."""
        self.render_views(["iso", "top"], 32)

    def render_call(self, a: dict) -> tuple[dict, list[bytes]]:
        size = a.get("size", 256)
        self.shading = a.get("shading", "solid")
        if a.get("camera"):
            cam = a["camera"]
            images = [self._render_user(cam["location"], cam["target"], cam["lens_mm"], size)]
            names = ["camera"]
        else:
            names = a.get("views") or DEFAULT_VIEWS
            images = self.render_views(names, size)
        if a.get("tiled", True) and len(images) > 1:
            blobs = [_png(montage(images, names))]
        else:
            blobs = [_png(im) for im in images]
        w, h = Image.open(io.BytesIO(blobs[0])).size
        return {"views": names, "size": size, "image_size": [w, h], "images": len(blobs)}, blobs

    def render_views(self, names: list[str], size: int) -> list[Image.Image]:
        lo, hi = scene_bounds()
        self._ensure_helpers(lo, hi)
        with self._within_budget():
            return [self._render_view(n, lo, hi, size) for n in names]

    @contextmanager
    def _within_budget(self):
        """Large scenes are drawn from one merged proxy mesh (see `render_budget`)."""
        helpers = [o for o in bpy.data.objects if o.get("mw_helper") and o.type == "MESH"
                   and o.name != render_budget.PROXY]
        with render_budget.proxy_scene(user_objects(), helpers, self._camera()) as proxy:
            if proxy is not None and proxy.world != bpy.context.scene.world:
                proxy.world = bpy.context.scene.world
            self._proxy = proxy
            try:
                yield
            finally:
                self._proxy = None

    def _helpers_visible(self, camera_z: float) -> None:
        """The grid shows from above only: from below it would hide the scene."""
        grid = bpy.data.objects.get("_mw_grid")
        below = grid is not None and camera_z < grid.get("mw_z", 0.0)
        for ob in bpy.data.objects:
            if ob.get("mw_helper") and ob.type == "MESH":
                ob.hide_render = below

    def _label(self, im: Image.Image, px_per_m: float | None = None) -> Image.Image:
        """The scale cue in the lower left corner: in a parallel view a bar one grid step
        long, in a perspective view the grid's spacing."""
        grid = bpy.data.objects.get("_mw_grid")
        if grid is None:
            return im
        step = grid.get("mw_step", 1.0)
        draw = ImageDraw.Draw(im)
        y = im.height - 8
        if px_per_m is not None:
            bar = step * px_per_m
            while bar > im.width * 0.4:
                step, bar = step / 2, bar / 2
            x1 = 6 + max(4, round(bar))
            draw.line([(6, y), (x1, y)], fill=LABEL, width=2)
            draw.line([(6, y - 4), (6, y + 3)], fill=LABEL)
            draw.line([(x1, y - 4), (x1, y + 3)], fill=LABEL)
            draw.text((x1 + 5, y - 6), format_length(step), fill=LABEL)
        elif not grid.hide_render:
            draw.text((5, y - 6), f"grid {format_length(step)}", fill=LABEL)
        return im

    # -- internals ------------------------------------------------------------------------------------
    def _setup(self, size: int) -> None:
        sc = self._proxy or bpy.context.scene
        sc.render.engine = "BLENDER_WORKBENCH"
        sc.render.resolution_x = sc.render.resolution_y = size
        sc.render.resolution_percentage = 100
        sc.render.film_transparent = False
        sc.render.image_settings.file_format = "BMP"  # uncompressed: cheapest to write and read back
        sc.display.render_aa = "OFF"  # FXAA tripled the cost of a view; outlines keep edges legible
        sh = sc.display.shading
        sh.type = "WIREFRAME" if self.shading == "wireframe" else "SOLID"
        sh.light = "STUDIO"
        sh.color_type = "VERTEX" if self._proxy else "MATERIAL"  # the proxy's colour attribute
        sh.show_object_outline = True
        sh.show_cavity = False
        sh.show_shadows = False
        if sc.world is None:
            sc.world = bpy.data.worlds.get("mw_world") or bpy.data.worlds.new("mw_world")
        sc.world.color = BACKGROUND

    def _camera(self):
        ob = bpy.data.objects.get("_mw_camera")
        if ob is None:
            ob = bpy.data.objects.new("_mw_camera", bpy.data.cameras.new("_mw_camera"))
            ob["mw_helper"] = 1
            bpy.context.scene.collection.objects.link(ob)
        if bpy.context.scene.camera != ob:  # assigning rebuilds the whole dependency graph
            bpy.context.scene.camera = ob
        return ob

    def _shoot(self, size: int) -> Image.Image:
        self._setup(size)
        path = os.path.join(self.out_dir, "view.bmp")
        if self._proxy is not None:  # write_still costs ~1 s per 10 000 objects in the file
            safety.run_operator("render.render", write_still=False, scene=self._proxy.name)
            bpy.data.images["Render Result"].save_render(path, scene=self._proxy)
        else:
            bpy.context.scene.render.filepath = path
            safety.run_operator("render.render", write_still=True)
        with Image.open(path) as im:
            return im.convert("RGB")

    def _render_view(self, name: str, lo: Vector, hi: Vector, size: int) -> Image.Image:
        cam = self._camera()
        centre, ext = (lo + hi) / 2, hi - lo
        radius = max(ext.length / 2, 1e-3)
        d = DIRECTIONS[name]
        if name == "iso":
            cam.data.type = "PERSP"
            cam.data.lens, cam.data.sensor_width = 50.0, 36.0
            half_fov = math.atan(18 / 50)
            dist = radius / math.sin(half_fov) * 1.08
        else:
            cam.data.type = "ORTHO"
            span = {"front": (ext.x, ext.z), "back": (ext.x, ext.z), "right": (ext.y, ext.z),
                    "left": (ext.y, ext.z), "top": (ext.x, ext.y), "bottom": (ext.x, ext.y)}[name]
            cam.data.ortho_scale = max(max(span) * 1.2, 1e-3)
            dist = radius * 3 + 1
        cam.location = centre + d * dist
        if name == "top":
            cam.rotation_euler = (0.0, 0.0, 0.0)
        elif name == "bottom":
            cam.rotation_euler = (math.pi, 0.0, 0.0)
        else:
            cam.rotation_euler = (-d).to_track_quat("-Z", "Y").to_euler()
        cam.data.clip_start = max(dist - radius * 4, dist * 1e-3, 1e-4)
        cam.data.clip_end = dist + radius * 4 + 10
        self._helpers_visible(cam.location.z if name != "bottom" else -math.inf)
        px_per_m = size / cam.data.ortho_scale if cam.data.type == "ORTHO" else None
        return self._label(self._shoot(size), px_per_m)

    def _render_user(self, location, target, lens, size) -> Image.Image:
        lo, hi = scene_bounds()
        self._ensure_helpers(lo, hi)
        cam = self._camera()
        cam.data.type = "PERSP"
        cam.data.lens, cam.data.sensor_width = lens, 36.0
        cam.location = location
        d = Vector(target) - Vector(location)
        if d.length < 1e-9:
            d = Vector((0, 0, -1))
        cam.rotation_euler = d.to_track_quat("-Z", "Y" if abs(d.normalized().z) < 0.999 else "X").to_euler()
        reach = (Vector(location) - (lo + hi) / 2).length + (hi - lo).length * 2 + 10
        cam.data.clip_start, cam.data.clip_end = 1e-3 * reach, reach
        self._helpers_visible(float(location[2]))
        with self._within_budget():
            return self._label(self._shoot(size))

    def _ensure_helpers(self, lo: Vector, hi: Vector) -> None:
        """Grid and axes sized to the scene; rebuilt only when the scene's bounds change."""
        key = ",".join(f"{v:.6g}" for v in (*lo, *hi))
        grid = bpy.data.objects.get("_mw_grid")
        if grid is not None and grid.get("mw_key") == key:
            return
        self._remove([o for o in bpy.data.objects if o.get("mw_helper") and o.type == "MESH"
                      and o.name != render_budget.PROXY])
        helpers = self._add_helpers(lo, hi)
        helpers[0]["mw_key"] = key

    def _add_helpers(self, lo: Vector, hi: Vector) -> list:
        extent = max(hi.x - lo.x, hi.y - lo.y, 1e-3) * 1.6
        step = _nice_step(extent)
        n = max(2, math.ceil(extent / step / 2))
        half = n * step
        cx, cy = round(((lo.x + hi.x) / 2) / step) * step, round(((lo.y + hi.y) / 2) / step) * step
        z = min(0.0, lo.z) - 1e-4 * extent
        t = step * 0.015
        grid = [((cx + i * step - t, cy - half, z), (cx + i * step + t, cy + half, z)) for i in range(-n, n + 1)]
        grid += [((cx - half, cy + j * step - t, z), (cx + half, cy + j * step + t, z)) for j in range(-n, n + 1)]
        helpers = [self._slabs("_mw_grid", grid, GRID)]
        helpers[0]["mw_step"], helpers[0]["mw_z"] = step, z
        za = z + 1e-4 * extent  # flat on the grid, a hair above its lines; no vertical rod
        w = t * 1.6
        if cy - half <= 0 <= cy + half:
            helpers.append(self._slabs("_mw_axis_x", [((cx - half, -w, za), (cx + half, w, za))], AXES["x"]))
        if cx - half <= 0 <= cx + half:
            helpers.append(self._slabs("_mw_axis_y", [((-w, cy - half, za), (w, cy + half, za))], AXES["y"]))
        return helpers

    def _slabs(self, name: str, boxes, color) -> bpy.types.Object:
        bm = bmesh.new()
        for (x0, y0, z0), (x1, y1, z1) in boxes:
            vs = [bm.verts.new((x, y, zz)) for zz in (z0, z1 if z1 > z0 else z0) for y in (y0, y1) for x in (x0, x1)]
            bm.faces.new((vs[0], vs[1], vs[3], vs[2]))
            if z1 > z0:
                for f in ((4, 5, 7, 6), (0, 1, 5, 4), (2, 3, 7, 6), (0, 2, 6, 4), (1, 3, 7, 5)):
                    bm.faces.new([vs[i] for i in f])
        me = bpy.data.meshes.new(name)
        bm.to_mesh(me)
        bm.free()
        mat = bpy.data.materials.new(name)
        mat.diffuse_color = color
        me.materials.append(mat)
        ob = bpy.data.objects.new(name, me)
        ob["mw_helper"] = 1
        bpy.context.scene.collection.objects.link(ob)
        return ob

    def _remove(self, helpers) -> None:
        for ob in helpers:
            me = ob.data
            mats = list(me.materials)
            bpy.data.objects.remove(ob)
            bpy.data.meshes.remove(me)
            for m in mats:
                if m is not None and m.users == 0:
                    bpy.data.materials.remove(m)


def montage(images: list[Image.Image], labels: list[str]) -> Image.Image:
    cols = math.ceil(math.sqrt(len(images)))
    rows = math.ceil(len(images) / cols)
    w, h = images[0].size
    out = Image.new("RGB", (cols * w, rows * h), tuple(int(c * 255) for c in BACKGROUND))
    draw = ImageDraw.Draw(out)
    for i, (im, label) in enumerate(zip(images, labels, strict=True)):
        x, y = (i % cols) * w, (i // cols) * h
        out.paste(im, (x, y))
        draw.rectangle([x, y, x + w - 1, y + h - 1], outline=(70, 74, 82))
        draw.text((x + 6, y + 4), label, fill=(235, 235, 235))
    return out


def _png(im: Image.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="PNG", optimize=False, compress_level=1)
    return buf.getvalue()
