"""Tool specs: the typed argument models, and the one registry every consumer reads.

The same spec feeds the model's tool list, the studio's generated forms, the MCP server,
validation in the supervisor and the dataset's `tools` column. Argument schemas are generated
from pydantic models, then flattened (no titles, no $refs) to keep the prompt cost small.
This module never imports bpy or CadQuery: the supervisor validates before a worker sees a call.
"""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tools.errors import ErrorKind, ToolError

NAME = r"^[A-Za-z0-9_][A-Za-z0-9_. \-]{0,62}$"
ObjName = Annotated[str, Field(pattern=NAME, description="object name")]
Length = Annotated[float, Field(gt=0, le=10_000)]
Coord = Annotated[float, Field(ge=-100_000, le=100_000)]
Vec3 = Annotated[list[Coord], Field(min_length=3, max_length=3)]
Size3 = Annotated[list[Annotated[float, Field(ge=0, le=10_000)]], Field(min_length=3, max_length=3)]
Point2 = Annotated[list[Coord], Field(min_length=2, max_length=2)]
Selector = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[<>|#%+\-XYZxyz()0-9. a-zA-Z]+$",
                                description="CadQuery selector, e.g. '>Z', '|Z', '#Z'")]
VIEWS = ("iso", "front", "top", "right", "back", "left", "bottom")


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=False)


# ---- Blender scene tools ----------------------------------------------------------------
class AddPrimitive(Args):
    """Add a mesh primitive. `dimensions` is its bounding size in metres."""
    kind: Literal["cube", "cylinder", "uv_sphere", "cone", "torus", "plane"]
    name: ObjName
    dimensions: Size3
    location: Vec3 = [0.0, 0.0, 0.0]
    rotation_deg: Vec3 = [0.0, 0.0, 0.0]


class Transform(Args):
    """Set an object's absolute location (metres), rotation (degrees, XYZ Euler) and/or scale."""
    name: ObjName
    location: Vec3 | None = None
    rotation_deg: Vec3 | None = None
    scale: Annotated[list[Annotated[float, Field(gt=0, le=10_000)]], Field(min_length=3, max_length=3)] | None = None


class SetMaterial(Args):
    """Give an object a solid material."""
    name: ObjName
    color: Annotated[str, Field(pattern=r"^#[0-9A-Fa-f]{6}$", description="#RRGGBB")]
    metallic: Annotated[float, Field(ge=0, le=1)] = 0.0
    roughness: Annotated[float, Field(ge=0, le=1)] = 0.5


class Boolean(Args):
    """Combine two objects; the cutter is removed. Two CAD parts combine exactly (B-rep)."""
    target: ObjName
    cutter: ObjName
    operation: Literal["union", "difference", "intersect"]


class Named(Args):
    name: ObjName


class Delete(Named):
    """Delete an object."""


class Duplicate(Args):
    """Copy an object (and its CAD B-rep) under a new name, optionally at `location` (metres)."""
    name: ObjName
    new_name: ObjName
    location: Vec3 | None = None


class Rename(Args):
    """Rename an object."""
    name: ObjName
    new_name: ObjName


class Parent(Args):
    """Parent `child` to `parent` keeping its world transform; parent null clears it."""
    child: ObjName
    parent: ObjName | None = None


class Join(Args):
    """Join mesh objects into `into` (the others are removed)."""
    into: ObjName
    others: Annotated[list[ObjName], Field(min_length=1, max_length=64)]


class Modifier(Args):
    """Add a modifier (applied by default): bevel(width, segments), array(count, offset),
    mirror(axis), solidify(thickness), subdivision(levels). Lengths in metres."""
    name: ObjName
    kind: Literal["bevel", "array", "mirror", "solidify", "subdivision"]
    width: Annotated[float, Field(gt=0, le=1000)] = 0.05
    segments: Annotated[int, Field(ge=1, le=16)] = 3
    count: Annotated[int, Field(ge=1, le=64)] = 2
    offset: Vec3 = [1.0, 0.0, 0.0]
    axis: Literal["X", "Y", "Z"] = "X"
    thickness: Annotated[float, Field(gt=-1000, le=1000)] = 0.05
    levels: Annotated[int, Field(ge=0, le=3)] = 1
    apply: bool = True


class AddLight(Args):
    """Add a light at `location` (metres), `energy` in watts (kept in exports; renders use
    studio lighting)."""
    kind: Literal["point", "sun", "spot", "area"]
    name: ObjName
    location: Vec3 = [0.0, 0.0, 5.0]
    energy: Annotated[float, Field(ge=0, le=1e6)] = 1000.0
    color: Annotated[str, Field(pattern=r"^#[0-9A-Fa-f]{6}$")] = "#FFFFFF"
    target: Vec3 | None = Field(None, description="aim a spot, area or sun light at this point (m)")


class AddCamera(Args):
    """Add a camera at `location` aimed at `target` (metres). 36 mm sensor, square frame as
    renders; a longer lens narrows the view."""
    name: ObjName
    location: Vec3
    target: Vec3 = [0.0, 0.0, 0.0]
    lens_mm: Annotated[float, Field(ge=5, le=300)] = 50.0


class SetVisible(Args):
    """Show or hide an object in renders (it stays in the scene and in exports)."""
    name: ObjName
    visible: bool


class GetScene(Args):
    """List objects in world space (metres, degrees): name, source, transform, dimensions, bbox,
    material — a page at a time, with totals, counts by kind and the objects the last change
    touched."""
    filter: Annotated[str, Field(min_length=1, max_length=64,
                                 description="glob on names, e.g. 'bolt_*'")] | None = None
    offset: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    limit: Annotated[int, Field(ge=1, le=10_000)] = 25


class Measure(Args):
    """Measure an object (dimensions, volume, area in metres); with `other`, the distance and gap
    between them."""
    name: ObjName
    other: ObjName | None = None


class MeshCheck(Named):
    """Check a mesh for printing: manifold (closed, one winding), holes (open borders), edges
    of more than two faces, flipped normals, duplicate vertices, loose parts, volume, wall
    thickness (metres)."""


class MeshRepair(Args):
    """Repair a mesh: merge_by_distance (weld vertices closer than `distance` metres),
    fill_holes, recalculate_normals (consistent, outward), flip_normals, delete_loose (edges
    and vertices without faces), keep_largest (delete every piece but the largest)."""
    name: ObjName
    operation: Literal["merge_by_distance", "fill_holes", "recalculate_normals", "flip_normals",
                       "delete_loose", "keep_largest"]
    distance: Annotated[float, Field(gt=0, le=1)] = 0.0001


class MassProperties(Args):
    """Volume (m³), area (m²), centre of mass and bbox (metres) of objects, each and together
    (uniform density); with `density` in kg/m³ also their mass in kg."""
    names: Annotated[list[ObjName], Field(min_length=1, max_length=256)]
    density: Annotated[float, Field(gt=0, le=100_000)] | None = None


class Camera(Args):
    location: Vec3
    target: Vec3 = [0.0, 0.0, 0.0]
    lens_mm: Annotated[float, Field(ge=5, le=300)] = 50.0


class Render(Args):
    """Render the scene. Default: iso, front, top, right tiled as one montage."""
    views: Annotated[list[Literal[VIEWS]], Field(min_length=1, max_length=7)] | None = None  # type: ignore[valid-type]
    size: Annotated[int, Field(ge=32, le=1024)] = 256
    camera: Camera | None = None
    shading: Literal["solid", "wireframe"] = "solid"
    tiled: bool = True


class Export(Args):
    """Export objects (default all) to a file in the workspace. `step` only for CAD parts (in
    millimetres); `3mf` is a mesh for 3D printing (in millimetres)."""
    format: Literal["glb", "blend", "stl", "obj", "step", "3mf"]
    path: Annotated[str, Field(min_length=1, max_length=255)]
    objects: Annotated[list[ObjName], Field(max_length=256)] | None = None
    unit: Literal["m", "mm"] = Field("m", description="stl and obj: length unit of the file")


class ImportFile(Args):
    """Import objects from a .blend, .glb, .stl, .obj or .step file in the workspace (a .step
    becomes a CAD part, in millimetres)."""
    path: Annotated[str, Field(min_length=1, max_length=255)]


class Undo(Args):
    """Undo the last mutating call(s)."""
    steps: Annotated[int, Field(ge=1, le=100)] = 1


class SnapshotArgs(Args):
    """Save the whole scene (Blender data and CAD parts) under a name."""
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_\-]{1,48}$")]


class RestoreArgs(SnapshotArgs):
    """Restore a named snapshot exactly."""


class ClearScene(Args):
    """Delete every object."""


# ---- CadQuery tools -----------------------------------------------------------------------
class CadScript(Args):
    """Run a CadQuery script (lengths in millimetres); its result becomes CAD part `name`. Mark
    the result with `result = ...` or `show_object(...)`. Only cadquery, math and a few safe
    modules import."""
    code: Annotated[str, Field(min_length=1, max_length=100_000)]
    name: ObjName


class CadBox(Args):
    """A CAD box (millimetres) centred on the origin in XY, standing on Z=0."""
    name: ObjName
    length: Length
    width: Length
    height: Length


class CadCylinder(Args):
    """A CAD cylinder (millimetres) along Z, centred in XY, standing on Z=0."""
    name: ObjName
    radius: Length
    height: Length


class Profile(Args):
    kind: Literal["rect", "circle", "polygon", "slot"]
    width: Length | None = None
    height: Length | None = None
    radius: Length | None = None
    points: Annotated[list[Point2], Field(min_length=3, max_length=256)] | None = None


class CadSketchExtrude(Args):
    """Extrude a 2D profile on the XY plane up along Z by `distance`, in millimetres (adds to
    `name` if it exists)."""
    name: ObjName
    profile: Profile
    distance: Length
    at_z: Coord = 0.0


class CadRevolve(Args):
    """Revolve a closed profile of [r, z] points (millimetres) about the Z axis."""
    name: ObjName
    points: Annotated[list[Point2], Field(min_length=3, max_length=256)]
    angle_deg: Annotated[float, Field(gt=0, le=360)] = 360.0


class CadHole(Args):
    """Drill holes into the part's face (default the top, '>Z') at XY positions; optional
    counterbore. Diameters, depths and positions in millimetres."""
    name: ObjName
    diameter: Length
    depth: Length | None = None
    positions: Annotated[list[Point2], Field(min_length=1, max_length=256)] = [[0.0, 0.0]]
    face: Selector = ">Z"
    counterbore_diameter: Length | None = None
    counterbore_depth: Length | None = None


class CadFillet(Args):
    """Round the edges a selector picks, e.g. '|Z' for vertical edges (radius in millimetres)."""
    name: ObjName
    edges: Selector
    radius: Length


class CadChamfer(Args):
    """Chamfer the edges a selector picks (length in millimetres)."""
    name: ObjName
    edges: Selector
    length: Length


class CadShell(Args):
    """Hollow the part, removing the faces a selector picks (e.g. '>Z'), walls `thickness`
    millimetres thick."""
    name: ObjName
    faces: Selector
    thickness: Length


class CadPattern(Args):
    """Positions for holes or copies, in millimetres: a rectangular grid or a bolt circle.
    Returns [[x, y], ...]."""
    kind: Literal["grid", "circle"]
    count_x: Annotated[int, Field(ge=1, le=64)] = 2
    count_y: Annotated[int, Field(ge=1, le=64)] = 2
    spacing_x: Length = 10.0
    spacing_y: Length = 10.0
    count: Annotated[int, Field(ge=1, le=128)] = 6
    radius: Length = 10.0
    start_deg: Annotated[float, Field(ge=-360, le=360)] = 0.0


Point3 = Annotated[list[Coord], Field(min_length=3, max_length=3)]


class CadSweep(Args):
    """Sweep a circle (radius) or rectangle (width x height) along a path of [x, y, z] points, in
    millimetres: a polyline (corners rounded) or, with path_kind 'arc', the arc through 3 points.
    The profile is centred on the first point, square to the path; adds to `name` if it exists."""
    name: ObjName
    path: Annotated[list[Point3], Field(min_length=2, max_length=64)]
    profile: Literal["circle", "rect"] = "circle"
    radius: Length | None = None
    width: Length | None = None
    height: Length | None = None
    path_kind: Literal["polyline", "arc"] = "polyline"


class LoftSection(Args):
    kind: Literal["circle", "rect"]
    z: Coord
    radius: Length | None = None
    width: Length | None = None
    height: Length | None = None
    x: Coord = 0.0
    y: Coord = 0.0


class CadLoft(Args):
    """Loft a solid through 2+ horizontal sections (circles or rectangles centred at x, y) at
    rising z, in millimetres; `ruled` gives straight sides. Adds to `name` if it exists."""
    name: ObjName
    sections: Annotated[list[LoftSection], Field(min_length=2, max_length=16)]
    ruled: bool = False


class CadText(Args):
    """Engrave (cut) or emboss (raise) text on a planar face of a part picked by a selector
    (default the top). `height` is the letter height and `depth` the cut or raise, in
    millimetres; the text is centred at `position` (x, y on the face, millimetres)."""
    name: ObjName
    text: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9 .\-+#/]+$")]
    height: Length
    depth: Length
    mode: Literal["engrave", "emboss"] = "engrave"
    face: Selector = ">Z"
    position: Point2 = [0.0, 0.0]


class CadMirror(Args):
    """Mirror a part about a plane through the origin (or `distance` millimetres along the
    plane's normal) and join the mirror image to it."""
    name: ObjName
    plane: Literal["XY", "YZ", "XZ"]
    distance: Coord = 0.0


class CadQueryPart(Named):
    """Exact facts of a CAD part in millimetres: volume, area, bbox, validity, counts of
    faces/edges/solids."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    args: type[Args]
    mutating: bool
    kernel: str  # "blender" | "cadquery" | "runtime"
    risky: bool = False  # needs approval in the studio when approval is on

    @property
    def description(self) -> str:
        return " ".join((self.args.__doc__ or "").split())

    def schema(self) -> dict:
        """The call's JSON schema (a copy: the caller may change it)."""
        return copy.deepcopy(_schema_of(self.args))

    def to_dict(self) -> dict:
        return {"name": self.name, "description": self.description, "parameters": self.schema(),
                "mutating": self.mutating, "kernel": self.kernel}

    def to_openai(self) -> dict:
        return openai_tool(self.to_dict())


_SPECS = [
    ToolSpec("add_primitive", AddPrimitive, True, "blender"),
    ToolSpec("transform", Transform, True, "blender"),
    ToolSpec("set_material", SetMaterial, True, "blender"),
    ToolSpec("boolean", Boolean, True, "blender"),
    ToolSpec("delete", Delete, True, "blender"),
    ToolSpec("duplicate", Duplicate, True, "blender"),
    ToolSpec("rename", Rename, True, "blender"),
    ToolSpec("parent", Parent, True, "blender"),
    ToolSpec("join", Join, True, "blender"),
    ToolSpec("modifier", Modifier, True, "blender"),
    ToolSpec("add_light", AddLight, True, "blender"),
    ToolSpec("add_camera", AddCamera, True, "blender"),
    ToolSpec("set_visible", SetVisible, True, "blender"),
    ToolSpec("clear_scene", ClearScene, True, "blender"),
    ToolSpec("get_scene", GetScene, False, "blender"),
    ToolSpec("measure", Measure, False, "blender"),
    ToolSpec("mesh_check", MeshCheck, False, "blender"),
    ToolSpec("mesh_repair", MeshRepair, True, "blender"),
    ToolSpec("mass_properties", MassProperties, False, "blender"),
    ToolSpec("render", Render, False, "blender"),
    ToolSpec("export", Export, False, "blender", risky=True),
    ToolSpec("import_file", ImportFile, True, "blender", risky=True),
    ToolSpec("undo", Undo, True, "runtime"),
    ToolSpec("snapshot", SnapshotArgs, False, "runtime"),
    ToolSpec("restore", RestoreArgs, True, "runtime"),
    ToolSpec("cadquery_script", CadScript, True, "cadquery", risky=True),
    ToolSpec("cad_box", CadBox, True, "cadquery"),
    ToolSpec("cad_cylinder", CadCylinder, True, "cadquery"),
    ToolSpec("cad_sketch_extrude", CadSketchExtrude, True, "cadquery"),
    ToolSpec("cad_revolve", CadRevolve, True, "cadquery"),
    ToolSpec("cad_hole", CadHole, True, "cadquery"),
    ToolSpec("cad_fillet", CadFillet, True, "cadquery"),
    ToolSpec("cad_chamfer", CadChamfer, True, "cadquery"),
    ToolSpec("cad_shell", CadShell, True, "cadquery"),
    ToolSpec("cad_sweep", CadSweep, True, "cadquery"),
    ToolSpec("cad_loft", CadLoft, True, "cadquery"),
    ToolSpec("cad_text", CadText, True, "cadquery"),
    ToolSpec("cad_mirror", CadMirror, True, "cadquery"),
    ToolSpec("cad_pattern", CadPattern, False, "cadquery"),
    ToolSpec("cad_query", CadQueryPart, False, "cadquery"),
]
TOOLS: dict[str, ToolSpec] = {s.name: s for s in _SPECS}


# ---- units: the scene in metres, CAD parts authored in millimetres --------------------------
SCENE_UNIT, CAD_UNIT = "m", "mm"
SCENE_PER_MM = 0.001  # the worker's conversion at the kernel boundary (tools/worker/cad.py)
_LENGTHS = {"dimensions", "location", "length", "width", "height", "radius", "diameter", "depth",
            "distance", "thickness", "spacing_x", "spacing_y", "positions", "points",
            "counterbore_diameter", "counterbore_depth", "at_z", "camera", "profile",
            "path", "sections", "position"}
_OTHER_UNITS = {"rotation_deg": "°", "angle_deg": "°", "start_deg": "°", "lens_mm": "mm",
                "size": "px", "energy": "W", "offset": "× size"}  # array offset is relative


def length_unit(tool: str) -> str:
    """The unit a tool's lengths are in: millimetres for the CAD kernel, metres otherwise."""
    spec = TOOLS.get(tool)
    return CAD_UNIT if spec is not None and spec.kernel == "cadquery" else SCENE_UNIT


def field_unit(tool: str, field: str) -> str | None:
    """The unit of one argument of a tool (None: a count, a name, a ratio...)."""
    if field in _OTHER_UNITS:
        return _OTHER_UNITS[field]
    if field in _LENGTHS:
        return length_unit(tool)
    return None


def without_defaults(tool: str, args: dict) -> dict:
    """A call as a model writes it: arguments equal to the schema's default left out (a
    generated form sends every field; the recorded demonstration should not)."""
    props = TOOLS[tool].schema().get("properties", {}) if tool in TOOLS else {}
    return {k: v for k, v in args.items() if "default" not in props.get(k, {})
            or props[k]["default"] != v}


def openai_tool(entry: dict) -> dict:
    """A catalogue entry ({name, description, parameters, ...}) as an OpenAI `tools=` item."""
    return {"type": "function", "function": {
        "name": entry["name"], "description": entry.get("description", ""),
        "parameters": entry.get("parameters", {"type": "object", "properties": {}})}}


def tool_names() -> list[str]:
    return list(TOOLS)


def catalogue() -> list[dict]:
    """Every tool as {name, description, parameters, mutating, kernel}."""
    return [s.to_dict() for s in _SPECS]


def openai_tools(names: list[str] | None = None) -> list[dict]:
    return [TOOLS[n].to_openai() for n in (names or TOOLS)]


def validate_call(tool: Any, args: Any) -> tuple[ToolSpec, dict]:
    """Check a call against its spec; return the spec and the normalised arguments."""
    if not isinstance(tool, str) or tool not in TOOLS:
        shown = repr(tool)[:80]
        raise ToolError(ErrorKind.VALIDATION, f"unknown tool {shown}; known tools: {', '.join(TOOLS)}")
    spec = TOOLS[tool]
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ToolError(ErrorKind.VALIDATION, f"{tool}: arguments must be a JSON object, got {type(args).__name__}")
    try:
        model = spec.args.model_validate(args)
    except ValidationError as e:
        raise ToolError(ErrorKind.VALIDATION, f"{tool}: {_explain(e)}") from None
    except (RecursionError, ValueError, TypeError) as e:  # pathological input
        raise ToolError(ErrorKind.VALIDATION, f"{tool}: unusable arguments ({type(e).__name__})") from None
    return spec, model.model_dump(mode="json")


def _explain(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:4]:
        loc = ".".join(str(x) for x in err["loc"]) or "arguments"
        parts.append(f"{loc}: {err['msg']}")
    more = len(e.errors()) - 4
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


@functools.cache
def _schema_of(args: type[Args]) -> dict:
    """A tool's flattened schema, made once a process: pydantic builds one in ~2 ms, and
    every episode's prompt and tool list asks for the whole catalogue's."""
    return _flatten_schema(args.model_json_schema())


def _flatten_schema(schema: dict) -> dict:
    """Inline $refs and drop what costs prompt tokens without telling a model anything
    (titles, `additionalProperties`, the name pattern, +-1e4 bounds); validation still
    enforces all of it."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(copy.deepcopy(defs[node["$ref"].split("/")[-1]]))
            out = {k: walk(v) for k, v in node.items() if k not in ("title", "$defs", "additionalProperties")
                   and not (k in ("minimum", "maximum") and isinstance(v, (int, float)) and abs(v) >= 10_000)
                   and not (k == "pattern" and v == NAME)}
            if "anyOf" in out:  # Optional[X] -> X (null allowed by omission)
                variants = [v for v in out["anyOf"] if v != {"type": "null"}]
                if len(variants) == 1:
                    rest = {k: v for k, v in out.items() if k != "anyOf"}
                    if rest.get("default", 0) is None:
                        rest.pop("default")
                    out = {**variants[0], **rest}
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    flat = walk(schema)
    flat.pop("description", None)
    flat.setdefault("properties", {})
    flat["type"] = "object"
    return flat


def schema_cost_chars() -> int:
    """Size of the whole catalogue as the model sees it (JSON characters)."""
    return len(json.dumps(openai_tools(), separators=(",", ":")))

