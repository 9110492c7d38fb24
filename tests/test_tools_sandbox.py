"""The jail and the script checks refuse network, foreign files and forbidden imports;
hostile .blend files load without running anything."""

import os
import socket
import subprocess
import sys
import textwrap

import pytest

from tools import ErrorKind
from tools.sandbox import jail


@pytest.fixture
def listener():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    yield srv.getsockname()
    srv.close()


def test_jail_refuses_network_and_foreign_paths(session, listener, tmp_path):
    assert jail.mode() == "bwrap"  # make test installs bubblewrap; the full jail is what we test
    here = os.path.dirname(os.path.abspath(__file__))
    out = session._probe(connect=list(listener), read=["/etc/passwd", os.path.expanduser("~/.bashrc")],
                         write=[str(tmp_path / "escape"), os.path.join(here, "escape"),
                                str(session.workspace / "ok.txt")])
    assert out["connect"].startswith("refused")
    assert out["read:/etc/passwd"].startswith("refused")
    assert out[f"read:{os.path.expanduser('~/.bashrc')}"].startswith("refused")
    assert out[f"write:{tmp_path / 'escape'}"].startswith("refused")
    assert out[f"write:{os.path.join(here, 'escape')}"].startswith("refused")
    assert out[f"write:{session.workspace / 'ok.txt'}"] == "written"
    assert not (tmp_path / "escape").exists()


@pytest.mark.parametrize("code,needle", [
    ("import os\nresult = os.listdir('/')", "import of 'os'"),
    ("import subprocess", "import of 'subprocess'"),
    ("from socket import socket", "import of 'socket'"),
    ("import cadquery as cq\nresult = open('/etc/passwd').read()", "'open'"),
    ("x = __import__('os')", "'__import__'"),
    ("x = ().__class__.__bases__[0].__subclasses__()", "is not allowed"),
    ("x = getattr(1, '__class__')", "'getattr'"),
    ("import cadquery as cq\nresult = cq.importers.importStep('/etc/passwd')", "not allowed"),
    ("import cadquery as cq\nresult = cq.importers.importStep('" + os.path.expanduser("~/.bashrc") + "')", "not allowed"),
])
def test_cadquery_script_refuses(session, code, needle):
    r = session.call("cadquery_script", {"code": code, "name": "x"})
    assert not r.ok and r.error.kind == ErrorKind.SANDBOX, r.error
    assert needle in r.error.message


def test_script_exports_land_only_in_scratch(session, tmp_path):
    target = tmp_path / "escaped.step"
    code = f"import cadquery as cq\nw = cq.Workplane().box(1, 1, 1)\ncq.exporters.export(w, {str(target)!r})"
    assert session.call("cadquery_script", {"code": code, "name": "p"}).ok
    assert not target.exists()


def test_export_outside_workspace_is_refused(session, tmp_path):
    assert session.call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}).ok
    for path in [str(tmp_path / "x.glb"), "../../x.glb", "/etc/x.glb"]:
        r = session.call("export", {"format": "glb", "path": path})
        assert r.error.kind == ErrorKind.SANDBOX, path
    assert not (tmp_path / "x.glb").exists()


HOSTILE = """
import bpy, sys
marker = sys.argv[-2]
bpy.ops.wm.read_factory_settings(use_empty=True)
text = bpy.data.texts.new("autorun.py")
text.write(f"import os\\nopen({marker!r} + '.text', 'w').write('pwned')\\n")
text.use_module = True
me = bpy.data.meshes.new("m")
me.from_pydata([(0, 0, 0), (1, 0, 0), (0, 1, 0)], [], [(0, 1, 2)])
ob = bpy.data.objects.new("Trojan", me)
bpy.context.scene.collection.objects.link(ob)
fc = ob.driver_add("location", 2)
fc.driver.type = "SCRIPTED"
fc.driver.expression = f"__import__('os').system('touch {marker}.driver') or 7"
bpy.ops.wm.save_as_mainfile(filepath=sys.argv[-1])
"""


def test_hostile_blend_runs_nothing(session):
    marker = str(session.workspace / "pwned")
    blend = str(session.workspace / "hostile.blend")
    subprocess.run([sys.executable, "-c", textwrap.dedent(HOSTILE), marker, blend], check=True,
                   capture_output=True, timeout=120)
    r = session.call("import_file", {"path": "hostile.blend"})
    assert r.ok, r.error
    assert r.output["imported"] == ["Trojan"]
    trojan = next(o for o in session.scene()["objects"] if o["name"] == "Trojan")
    assert trojan["location"][2] == 0.0  # the driver never evaluated
    session.render(size=64)  # a depsgraph evaluation and a render: still nothing runs
    assert not os.path.exists(marker + ".text") and not os.path.exists(marker + ".driver")
