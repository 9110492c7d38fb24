"""A cold `modelwright tasks list` / `tools list` loads only what listing needs: the modules
a command imports are asserted (what its speed follows), never its time."""

import json
import subprocess
import sys

PROBE = """
import json, sys
from typer.testing import CliRunner
from studio.cli import build_app
result = CliRunner().invoke(build_app(), sys.argv[1:])
assert result.exit_code == 0, result.output
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {sys_names})))
"""
HEAVY = ("trimesh", "scipy", "torch", "bpy", "OCP", "cadquery", "PySide6", "transformers")


def loaded(*args: str) -> set[str]:
    code = PROBE.replace("{sys_names}", repr(set(HEAVY) | {"pydantic", "tools"}))
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return {m.split(".")[0] if m.split(".")[0] != "tools" else m
            for m in json.loads(p.stdout.strip().splitlines()[-1])}


def test_tasks_list_imports_no_kernel_no_specs_no_supervisor():
    # Listing measures the oracle plans' lengths (it generates tasks, pure Python); a
    # family's generator may use trimesh/scipy for its geometry, never a kernel or a model.
    mods = loaded("tasks", "list")
    assert not mods & (set(HEAVY) - {"trimesh", "scipy"}), mods
    assert "tools.runtime.supervisor" not in mods and "tools.specs" not in mods


def test_tools_list_imports_the_specs_but_no_kernel_or_supervisor():
    mods = loaded("tools", "list")
    assert "tools.specs" in mods
    assert not mods & set(HEAVY), mods
    assert "tools.runtime.supervisor" not in mods
