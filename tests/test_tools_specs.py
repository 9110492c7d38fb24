"""The tool catalogue's contract, and validation that refuses bad arguments before any worker."""

import json
import math
import re
import subprocess
import sys

import pytest

from tools import TOOLS, ErrorKind, ToolError, catalogue, validate_call

REQUIRED = {
    "add_primitive": {"kind", "name", "dimensions", "location", "rotation_deg"},
    "transform": {"name", "location", "rotation_deg", "scale"},
    "set_material": {"name", "color", "metallic", "roughness"},
    "boolean": {"target", "cutter", "operation"},
    "delete": {"name"},
    "get_scene": set(),
    "render": {"views", "size"},
    "export": {"format", "path", "objects"},
    "undo": {"steps"},
    "snapshot": {"name"},
    "restore": {"name"},
    "cadquery_script": {"code", "name"},
}


def test_catalogue_contract():
    cat = catalogue()
    names = [t["name"] for t in cat]
    assert len(names) == len(set(names))
    for t in cat:
        assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", t["name"])
        assert set(t) == {"name", "description", "parameters", "mutating", "kernel"}
        assert t["description"] and t["parameters"]["type"] == "object"
        assert "$ref" not in json.dumps(t["parameters"])
    for name, params in REQUIRED.items():
        assert name in names, name
        assert params <= set(TOOLS[name].schema()["properties"]), name
    assert not TOOLS["get_scene"].mutating and TOOLS["add_primitive"].mutating
    kinds = TOOLS["add_primitive"].schema()["properties"]["kind"]["enum"]
    assert set(kinds) == {"cube", "cylinder", "uv_sphere", "cone", "torus", "plane"}


def test_cli_tools_list_json():
    out = subprocess.run([sys.executable, "-m", "studio.cli", "tools", "list", "--json"],
                         capture_output=True, text=True, check=True)
    listed = json.loads(out.stdout)
    assert [t["name"] for t in listed] == [t["name"] for t in catalogue()]


@pytest.mark.parametrize("tool,args,needle", [
    ("add_primitive", {"kind": "hexagon", "name": "A", "dimensions": [1, 1, 1]}, "kind"),
    ("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 1]}, "dimensions"),
    ("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, math.nan, 1]}, "finite"),
    ("add_primitive", {"kind": "cube", "name": "", "dimensions": [1, 1, 1]}, "name"),
    ("add_primitive", {"kind": "cube", "name": "A" * 500, "dimensions": [1, 1, 1]}, "name"),
    ("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 1, 1], "extra": 1}, "extra"),
    ("transform", {"name": "A", "scale": [0, 1, 1]}, "scale"),
    ("set_material", {"name": "A", "color": "red"}, "color"),
    ("set_material", {"name": "A", "color": "#FF0000", "metallic": 2}, "metallic"),
    ("boolean", {"target": "A", "cutter": "B", "operation": "xor"}, "operation"),
    ("render", {"size": 10_000}, "size"),
    ("render", {"views": ["sideways"]}, "views"),
    ("export", {"format": "fbx", "path": "a.fbx"}, "format"),
    ("cadquery_script", {"code": "", "name": "P"}, "code"),
    ("cad_fillet", {"name": "P", "edges": "|Z; import os", "radius": 1}, "edges"),
    ("undo", {"steps": -1}, "steps"),
    ("nonexistent_tool", {}, "unknown tool"),
    ("delete", ["A"], "JSON object"),
])
def test_validation_rejects(tool, args, needle):
    with pytest.raises(ToolError) as e:
        validate_call(tool, args)
    assert e.value.kind == ErrorKind.VALIDATION
    assert needle.lower() in e.value.message.lower()


def test_validation_normalises_defaults():
    spec, args = validate_call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 2, 3]})
    assert spec.name == "add_primitive"
    assert args["location"] == [0.0, 0.0, 0.0] and args["dimensions"] == [1.0, 2.0, 3.0]


def test_deeply_nested_arguments_are_a_validation_error():
    nested: list = []
    for _ in range(5000):
        nested = [nested]
    with pytest.raises(ToolError) as e:
        validate_call("add_primitive", {"kind": "cube", "name": "A", "dimensions": nested})
    assert e.value.kind == ErrorKind.VALIDATION


def test_a_changed_schema_is_the_callers_own() -> None:
    """Schemas are made once a process; each caller gets its own copy to change (a prompt
    builder that trims one must not trim the next episode's)."""
    first = catalogue()
    first[0]["parameters"]["properties"].clear()
    first[0]["parameters"]["extra"] = True
    again = catalogue()
    assert again[0]["parameters"]["properties"] and "extra" not in again[0]["parameters"]
    assert again == catalogue() and again[0]["parameters"] is not catalogue()[0]["parameters"]
