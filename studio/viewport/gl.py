"""The live viewport's GPU side (moderngl on the window's OpenGL 3.3 context): the scene's
meshes as GPU buffers, shaded passes, feature edges as lines, the adaptive grid, the move
gizmo, and an id pass for picking (one pixel read back under the cursor)."""

from __future__ import annotations

from dataclasses import dataclass

import moderngl
import numpy as np

from studio.viewport.camera import ViewMath, grid_step
from studio.viewport.gizmo import (
    HANDLES,
    arrow_mesh,
    box_mesh,
    handle_matrix,
    ring_mesh,
    scale_handle_matrix,
)

# Lighting per vertex (Gouraud): with Mesa's software rasteriser the fragment stage dominates,
# and per-pixel lighting halved the frame rate; meshes arrive finely tessellated anyway.
MESH_VS = """#version 330
uniform mat4 mvp; uniform mat4 model; uniform vec3 eye; uniform vec3 color; uniform float unlit;
in vec3 p; in vec3 n; out vec3 lit;
void main() {
  gl_Position = mvp * vec4(p, 1.0);
  if (unlit > 0.5) { lit = color; return; }
  vec3 wp = (model * vec4(p, 1.0)).xyz;
  vec3 wn = normalize(mat3(model) * n); vec3 v = normalize(eye - wp);
  if (dot(wn, v) < 0.0) wn = -wn;
  vec3 key = normalize(v + vec3(0.3, 0.2, 0.6));
  float diff = 0.30 + 0.55 * max(dot(wn, key), 0.0) + 0.15 * (0.5 + 0.5 * wn.z);
  float spec = pow(max(dot(wn, normalize(key + v)), 0.0), 40.0) * 0.25;
  lit = color * diff + spec;
}
"""
MESH_FS = """#version 330
uniform float tint; uniform vec3 tint_color; in vec3 lit; out vec4 frag;
void main() { frag = vec4(mix(lit, tint_color, tint), 1.0); }
"""
LINE_VS = """#version 330
uniform mat4 mvp; in vec3 p; in vec4 c; out vec4 vc;
void main() { vc = c; gl_Position = mvp * vec4(p, 1.0); }
"""
LINE_FS = """#version 330
uniform vec4 color; uniform float use_vertex; in vec4 vc; out vec4 frag;
void main() { frag = mix(color, vc, use_vertex); }
"""
ID_FS = """#version 330
uniform vec3 id; out vec4 frag;
void main() { frag = vec4(id, 1.0); }
"""
SELECT = (1.0, 0.55, 0.1)
AXIS_COLORS = ((0.9, 0.25, 0.25), (0.35, 0.8, 0.3), (0.3, 0.5, 0.95))
GIZMO_ID = 1 << 20  # gizmo handle h has id GIZMO_ID + h: 0-2 move arrows, 3-5 rotate rings, 6-8 scale boxes
Gizmo = tuple  # (origin, arrow length in world units, the active handle or None, the object's 4x4 model)


@dataclass
class GpuMesh:
    key: str
    vao: moderngl.VertexArray
    edges: moderngl.VertexArray | None
    buffers: list[moderngl.Buffer]
    model: np.ndarray  # 4x4 world matrix (row-major)
    color: tuple[float, float, float]
    location: list[float]
    lo: np.ndarray  # local bounds
    hi: np.ndarray
    id_vao: moderngl.VertexArray | None = None
    closed: bool = False  # closed and wound outwards (the worker's word): back faces are culled

    def release(self) -> None:
        for vao in (self.vao, self.edges, self.id_vao):
            if vao is not None:
                vao.release()
        for b in self.buffers:
            b.release()

    def world_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        corners = np.array([[x, y, z, 1.0] for x in (self.lo[0], self.hi[0])
                            for y in (self.lo[1], self.hi[1]) for z in (self.lo[2], self.hi[2])])
        w = (self.model @ corners.T).T[:, :3]
        return w.min(0), w.max(0)


def hex_rgb(color: str) -> tuple[float, float, float]:
    c = color.lstrip("#")
    return tuple(int(c[i:i + 2], 16) / 255.0 for i in (0, 2, 4))  # type: ignore[return-value]


def _gl(m: np.ndarray) -> bytes:
    return np.ascontiguousarray(m.T, dtype="f4").tobytes()


class SceneRenderer:
    """GPU resources for one context; all calls need that context current."""

    def __init__(self, ctx: moderngl.Context) -> None:
        self.ctx = ctx
        self.mesh_prog = ctx.program(vertex_shader=MESH_VS, fragment_shader=MESH_FS)
        self.line_prog = ctx.program(vertex_shader=LINE_VS, fragment_shader=LINE_FS)
        self.id_prog = ctx.program(vertex_shader=LINE_VS, fragment_shader=ID_FS)
        self.meshes: dict[str, GpuMesh] = {}
        self._handle_buffers: list[moderngl.Buffer] = []
        self.arrow, self.arrow_id = self._handle(*arrow_mesh())
        self.ring, self.ring_id = self._handle(*ring_mesh())
        self.box, self.box_id = self._handle(*box_mesh())
        self._triad_buf = ctx.buffer(_triad_lines())
        self._triad = ctx.vertex_array(self.line_prog, [(self._triad_buf, "3f 4f", "p", "c")])
        self._lines_buf: moderngl.Buffer | None = None
        self._pick_fbo: moderngl.Framebuffer | None = None
        self.triangles = 0
        self.grid_step = 1.0  # the grid's spacing in the last frame drawn

    def _handle(self, pos: np.ndarray, tris: np.ndarray) -> tuple[moderngl.VertexArray, moderngl.VertexArray]:
        """A gizmo handle's shaded and id vertex arrays (drawn unlit: its normals are zero)."""
        ctx = self.ctx
        vb, nb, ib = ctx.buffer(pos), ctx.buffer(np.zeros_like(pos)), ctx.buffer(tris)
        self._handle_buffers += [vb, nb, ib]
        return (ctx.vertex_array(self.mesh_prog, [(vb, "3f", "p"), (nb, "3f", "n")], ib),
                ctx.vertex_array(self.id_prog, [(vb, "3f", "p")], ib))

    # -- scene buffers -------------------------------------------------------------------
    def apply(self, objects: list[dict], blobs: list[bytes]) -> None:
        """Apply a `meshes` reply: new geometry uploaded, transforms and colours updated,
        objects no longer present released."""
        seen = set()
        for entry in objects:
            name = entry["name"]
            seen.add(name)
            model = np.array(entry["matrix"], float).reshape(4, 4)
            old = self.meshes.get(name)
            if entry.get("blob") is not None:
                if old is not None:
                    old.release()
                self.meshes[name] = self._upload(entry, blobs[entry["blob"]], model)
            elif old is not None:
                old.model, old.color, old.location = model, hex_rgb(entry["color"]), entry["location"]
        for name in set(self.meshes) - seen:
            self.meshes.pop(name).release()
        self.triangles = sum(m.vao.vertices // 3 for m in self.meshes.values())

    def _upload(self, entry: dict, blob: bytes, model: np.ndarray) -> GpuMesh:
        nv, nt, ne = entry["nv"], entry["nt"], entry["ne"]
        data = np.frombuffer(blob, np.uint8)
        pos = data[: nv * 12].view("f4").reshape(-1, 3) if nv else np.zeros((1, 3), "f4")
        o = nv * 12
        nrm, o = data[o: o + nv * 12], o + nv * 12
        tri, o = data[o: o + nt * 12], o + nt * 12
        edg = data[o: o + ne * 8]
        ctx = self.ctx
        vb, nb, ib = ctx.buffer(pos.tobytes()), ctx.buffer(nrm.tobytes() or b"\0" * 12), ctx.buffer(tri.tobytes() or b"\0" * 12)
        buffers = [vb, nb, ib]
        vao = ctx.vertex_array(self.mesh_prog, [(vb, "3f", "p"), (nb, "3f", "n")], ib, index_element_size=4)
        vao.vertices = nt * 3
        id_vao = ctx.vertex_array(self.id_prog, [(vb, "3f", "p")], ib, index_element_size=4)
        id_vao.vertices = nt * 3
        edges = None
        if ne:
            eb = ctx.buffer(edg.tobytes())
            buffers.append(eb)
            edges = ctx.vertex_array(self.line_prog, [(vb, "3f", "p")], eb, index_element_size=4)
            edges.vertices = ne * 2
        return GpuMesh(entry["key"], vao, edges, buffers, model, hex_rgb(entry["color"]), entry["location"],
                       pos.min(0), pos.max(0), id_vao, entry.get("closed") is True)

    def _cull(self, m: GpuMesh) -> None:
        """Cull back faces of a closed mesh (a mirroring matrix turns its winding round)."""
        if not m.closed:
            self.ctx.disable(moderngl.CULL_FACE)
            return
        self.ctx.enable(moderngl.CULL_FACE)
        self.ctx.front_face = "cw" if np.linalg.det(m.model[:3, :3]) < 0 else "ccw"

    def bounds(self) -> tuple[list[float], list[float]] | None:
        if not self.meshes:
            return None
        boxes = [m.world_bounds() for m in self.meshes.values()]
        return list(np.min([b[0] for b in boxes], 0)), list(np.max([b[1] for b in boxes], 0))

    # -- drawing ---------------------------------------------------------------------------
    def draw(self, vm: ViewMath, selected, hovered: str | None,
             gizmo: Gizmo | None, background=(0.16, 0.17, 0.19)) -> None:
        """`selected`: a name or the names of a multi-selection (all drawn highlighted)."""
        selected = {selected} if isinstance(selected, str) else set(selected or ())
        ctx = self.ctx
        ctx.clear(*background, 1.0)
        ctx.disable(moderngl.DEPTH_TEST)
        self._draw_grid(vm)
        ctx.enable(moderngl.DEPTH_TEST)
        ctx.polygon_offset = (1.0, 1.0)  # edges drawn after the faces stay on top of them
        self.mesh_prog["eye"].value = tuple(vm.eye)
        self.mesh_prog["unlit"].value = 0.0
        for name, m in self.meshes.items():
            self.mesh_prog["mvp"].write(_gl(vm.view_proj @ m.model))
            self.mesh_prog["model"].write(_gl(m.model))
            self.mesh_prog["color"].value = m.color
            tint = 0.35 if name in selected else 0.15 if name == hovered else 0.0
            self.mesh_prog["tint"].value = tint
            self.mesh_prog["tint_color"].value = SELECT if name in selected else (1.0, 1.0, 1.0)
            self._cull(m)
            m.vao.render(moderngl.TRIANGLES)
        ctx.disable(moderngl.CULL_FACE)
        ctx.front_face = "ccw"
        ctx.polygon_offset = (0.0, 0.0)
        self.line_prog["use_vertex"].value = 0.0
        for name, m in self.meshes.items():
            if m.edges is None:
                continue
            self.line_prog["mvp"].write(_gl(vm.view_proj @ m.model))
            self.line_prog["color"].value = (*SELECT, 1.0) if name in selected else (0.05, 0.05, 0.06, 1.0)
            m.edges.render(moderngl.LINES)
        if gizmo is not None:
            self._draw_gizmo(vm, *gizmo)
        self._draw_triad(vm)

    def _draw_triad(self, vm: ViewMath, px: int = 96) -> None:
        """Thin screen-space axes in the lower left corner, turning with the camera."""
        rot = np.identity(4)
        rot[:3, :3] = vm.view[:3, :3]
        rot[2, 3] = -3.0
        proj = np.identity(4)
        proj[2, 2] = -0.1
        old = self.ctx.viewport
        self.ctx.viewport = (8, 8, px, px)
        self.ctx.disable(moderngl.DEPTH_TEST)
        self.line_prog["mvp"].write(_gl(proj @ rot))
        self.line_prog["use_vertex"].value = 1.0
        self._triad.render(moderngl.LINES)
        self.ctx.viewport = old

    def _handles(self, gizmo: Gizmo, ids: bool = False):
        """(handle, model matrix, vertex array) of each gizmo handle."""
        origin, length, _, basis = gizmo
        shapes = (self.arrow_id, self.ring_id, self.box_id) if ids else (self.arrow, self.ring, self.box)
        for handle in range(HANDLES):
            k = handle % 3
            m = (handle_matrix(k, origin, length) if handle < 6
                 else scale_handle_matrix(k, origin, length, basis))
            yield handle, m, shapes[handle // 3]

    def _draw_gizmo(self, vm: ViewMath, *gizmo) -> None:
        self.ctx.disable(moderngl.DEPTH_TEST)  # the handles stay grabbable behind parts
        self.mesh_prog["unlit"].value = 1.0
        self.mesh_prog["tint"].value = 0.0
        active = gizmo[2]
        for handle, m, vao in self._handles(gizmo):
            self.mesh_prog["mvp"].write(_gl(vm.view_proj @ m))
            self.mesh_prog["model"].write(_gl(m))
            self.mesh_prog["color"].value = (1.0, 0.9, 0.3) if active == handle else AXIS_COLORS[handle % 3]
            vao.render(moderngl.TRIANGLES)
        self.ctx.enable(moderngl.DEPTH_TEST)

    def grid_lines(self, vm: ViewMath) -> tuple[np.ndarray, float]:
        """Grid lines (x0 y0 z0 r g b a x1 ...) on z = 0 around the target, and the spacing."""
        centre = np.array([vm.target[0], vm.target[1], 0.0])
        step = grid_step(vm.pixels_per_unit(centre))
        n = 40
        cx, cy = (np.round(centre[:2] / step)).astype(int)
        rows = []
        for i in range(-n, n + 1):
            for axis in (0, 1):
                k = (cx if axis == 0 else cy) + i
                v = k * step
                major = k % 10 == 0
                alpha = (0.34 if major else 0.16) * (1 - abs(i) / (n + 1))
                col = [0.62, 0.64, 0.68, alpha]
                if k == 0:  # the world axes, thin, on the ground: red X, green Y
                    col = [*(AXIS_COLORS[1] if axis == 0 else AXIS_COLORS[0]), 0.75]
                other = (cy if axis == 0 else cx) * step
                a, b = [v, other - n * step, 0.0], [v, other + n * step, 0.0]
                if axis == 1:
                    a, b = [a[1], a[0], 0.0], [b[1], b[0], 0.0]
                rows += [a + col, b + col]
        return np.array(rows, "f4"), step

    def _draw_grid(self, vm: ViewMath) -> None:
        lines, self.grid_step = self.grid_lines(vm)
        data = lines.tobytes()
        if self._lines_buf is None or self._lines_buf.size < len(data):
            if self._lines_buf is not None:
                self._lines_buf.release()
            self._lines_buf = self.ctx.buffer(reserve=len(data))
        self._lines_buf.write(data)
        vao = self.ctx.vertex_array(self.line_prog, [(self._lines_buf, "3f 4f", "p", "c")])
        self.ctx.enable(moderngl.BLEND)
        self.line_prog["mvp"].write(_gl(vm.view_proj))
        self.line_prog["use_vertex"].value = 1.0
        vao.render(moderngl.LINES, vertices=len(lines))
        self.ctx.disable(moderngl.BLEND)
        vao.release()

    def draw_box(self, vm: ViewMath, a, b) -> None:
        """The box-select rectangle between device pixels `a` and `b`, over everything."""
        (x0, y0), (x1, y1) = [(2 * x / vm.width - 1, 1 - 2 * y / vm.height) for x, y in (a, b)]
        corners = [(x0, y0), (x1, y0), (x1, y0), (x1, y1), (x1, y1), (x0, y1), (x0, y1), (x0, y0)]
        buf = self.ctx.buffer(np.array([[x, y, 0.0, *SELECT, 1.0] for x, y in corners], "f4").tobytes())
        vao = self.ctx.vertex_array(self.line_prog, [(buf, "3f 4f", "p", "c")])
        self.ctx.disable(moderngl.DEPTH_TEST)
        self.line_prog["mvp"].write(_gl(np.identity(4)))
        self.line_prog["use_vertex"].value = 1.0
        vao.render(moderngl.LINES)
        vao.release()
        buf.release()

    # -- picking -----------------------------------------------------------------------------
    def pick(self, vm: ViewMath, x: int, y: int, gizmo: Gizmo | None) -> str | int | None:
        """What is under pixel (x, y): a gizmo axis (int), an object's name, or None."""
        if not (0 <= x < vm.width and 0 <= y < vm.height):
            return None
        ctx = self.ctx
        size = (vm.width, vm.height)
        if self._pick_fbo is None or self._pick_fbo.size != size:
            if self._pick_fbo is not None:
                self._pick_fbo.release()
            self._pick_fbo = ctx.framebuffer(color_attachments=[ctx.renderbuffer(size, 4)],
                                             depth_attachment=ctx.depth_renderbuffer(size))
        previous = ctx.fbo
        fbo = self._pick_fbo
        fbo.use()
        fbo.scissor = (x, vm.height - 1 - y, 1, 1)  # only the pixel asked about is shaded
        fbo.clear(0.0, 0.0, 0.0, 0.0, depth=1.0)
        ctx.enable(moderngl.DEPTH_TEST)
        names = list(self.meshes)
        for i, name in enumerate(names, start=1):
            m = self.meshes[name]
            self.id_prog["mvp"].write(_gl(vm.view_proj @ m.model))
            self.id_prog["id"].value = _id_color(i)
            self._cull(m)
            m.id_vao.render(moderngl.TRIANGLES)
        ctx.disable(moderngl.CULL_FACE)
        ctx.front_face = "ccw"
        if gizmo is not None:
            ctx.disable(moderngl.DEPTH_TEST)  # handles win over anything behind them
            for handle, m, vao in self._handles(gizmo, ids=True):
                self.id_prog["mvp"].write(_gl(vm.view_proj @ m))
                self.id_prog["id"].value = _id_color(GIZMO_ID + handle)
                vao.render(moderngl.TRIANGLES)
        raw = fbo.read(viewport=(x, vm.height - 1 - y, 1, 1), components=4)
        fbo.scissor = None
        previous.use()
        value = raw[0] | raw[1] << 8 | raw[2] << 16
        if value >= GIZMO_ID:
            return value - GIZMO_ID
        return names[value - 1] if 0 < value <= len(names) else None

    def release(self) -> None:
        for m in self.meshes.values():
            m.release()
        self.meshes.clear()
        for vao in (self.arrow, self.arrow_id, self.ring, self.ring_id, self.box, self.box_id, self._triad):
            vao.release()
        for resource in (*self._handle_buffers, self._triad_buf, self._lines_buf, self._pick_fbo):
            if resource is not None:
                resource.release()
        self._handle_buffers, self._lines_buf, self._pick_fbo = [], None, None


def _triad_lines() -> bytes:
    """The corner triad's three axes as coloured lines (x0 y0 z0 r g b a x1 ...)."""
    rows = []
    for k, col in enumerate(AXIS_COLORS):
        tip = [0.0, 0.0, 0.0]
        tip[k] = 0.8
        rows += [[0.0, 0.0, 0.0, *col, 1.0], [*tip, *col, 1.0]]
    return np.array(rows, "f4").tobytes()


def _id_color(i: int) -> tuple[float, float, float]:
    return ((i & 255) / 255.0, ((i >> 8) & 255) / 255.0, ((i >> 16) & 255) / 255.0)
