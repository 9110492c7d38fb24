"""A person's folder is never the jail's: `tools run --out`, `tasks try --out` and MCP
`--workspace` copy in and out through tools/trust/outbox.py, and the worker works in its scratch.

The hostile script of these tests runs with full Python in the worker (the suite's lint
bypass), looks for the person's folder and a canary in it, and plants symlinks to a victim
file and FIFOs under every name the command delivers. The victim, the folder's own files and
their owners must come out as they went in, as root and as an ordinary user.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import BYPASSES, PRELUDE, SECURITY_DIR

REPO = Path(SECURITY_DIR).parents[1]
OUTPUTS = ["final.png", "scene.json", "reward.json", "calls.jsonl", "results.jsonl",
           "render_000_0.png", "parts/p.step", "parts/q.step"]
PROBE = r'''
P = PARAMS
ws = os.path.join(os.getcwd(), "workspace")
out["ws"] = os.path.isdir(ws)
out["listing"] = sorted(os.listdir(ws)) if out["ws"] else None
out["sees_out"] = os.path.exists(P["out"])
out["sees_canary"] = "canary.txt" in (out["listing"] or []) or os.path.exists(os.path.join(P["out"], "canary.txt"))
for d, _, files in os.walk(ws):  # were the person's folder the workspace, this would touch it
    for name in files:
        attempt("overwrite:" + name, lambda p=os.path.join(d, name): open(p, "w").write("jail"))
attempt("write_out", lambda: open(os.path.join(P["out"], "mine.txt"), "w").write("jail"))
for i, name in enumerate(P["names"]):
    p = os.path.join(ws, name)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    if os.path.lexists(p):
        os.unlink(p)
    if i % 2:
        os.mkfifo(p)
    else:
        os.symlink(P["victim"], p)
raise ValueError("MWREPORT" + json.dumps({k: out[k] for k in ("ws", "listing", "sees_out", "sees_canary", "write_out")}) + "MWEND")
'''


def hostile_call(out: Path, victim: Path) -> dict:
    params = {"out": str(out), "victim": str(victim), "names": OUTPUTS}
    code = (BYPASSES["dataclasses.sys"] + "bi = imp('builtins')\n"
            + f"bi.exec({PRELUDE + PROBE!r}, {{'__builtins__': bi, 'PARAMS': {json.dumps(params)!r}}})\n"
            + "import cadquery as cq\nresult = cq.Workplane().box(1, 1, 1)\n")
    return {"tool": "cadquery_script", "args": {"code": code, "name": "probe"}}


BOX = {"tool": "cadquery_script", "args": {"code": "import cadquery as cq\nresult = cq.Workplane().box(2, 2, 2)",
                                           "name": "P"}}


def report_of(lines: list[dict]) -> dict:
    """The hostile script's findings, carried out in its call's error message (in a `tasks
    try` report, labelled as what the worker said: `worker_error`)."""
    for rec in lines:
        said = rec.get("worker_error") or rec.get("error")
        m = re.search(r"MWREPORT(.*?)MWEND", json.dumps(said) if said else "")
        if m:
            return json.loads(json.loads(f'"{m.group(1)}"'))
    raise AssertionError(f"the hostile call left no report: {lines}")


def setup_folders(base: Path, uid: int | None = None) -> tuple[Path, Path]:
    """(the person's folder with a canary and a file of theirs, a victim file outside it)."""
    out, outside = base / "out", base / "outside"
    for d in (out, outside):
        d.mkdir(parents=True)
    (out / "canary.txt").write_text("canary")
    (out / "mine.txt").write_text("my own file")
    victim = outside / "victim.txt"
    victim.write_text("precious")
    if uid is not None:
        for p in (base, out, outside, out / "canary.txt", out / "mine.txt", victim):
            os.chown(p, uid, uid)
    return out, victim


def assert_untouched(out: Path, victim: Path, owner: int, report: dict) -> None:
    assert victim.read_text() == "precious"
    assert (out / "canary.txt").read_text() == "canary"
    assert (out / "mine.txt").read_text() == "my own file"
    assert report["ws"] and not report["sees_out"] and not report["sees_canary"], report
    assert "canary.txt" not in report["listing"] and report["write_out"].startswith("refused"), report
    for d, dirs, files in os.walk(out):
        for name in dirs + files:
            st = os.lstat(os.path.join(d, name))
            assert stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode), (name, oct(st.st_mode))
            assert st.st_uid == owner, (name, st.st_uid)
    assert os.stat(out).st_uid == owner


def run_as(user, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """`modelwright ARGS` as the suite's own identity, or as the ordinary user."""
    if user is None:
        return subprocess.run([sys.executable, "-m", "studio.cli", *args], capture_output=True,
                              text=True, timeout=900, cwd=REPO)
    return user.python("-m", "studio.cli", *args, timeout=900)


def _tools_run(tmp_path: Path, user) -> None:
    owner = os.geteuid() if user is None else user.uid
    base = tmp_path / "tr" if user is None else Path(user.home) / "tr"
    out, victim = setup_folders(base, None if user is None else user.uid)
    seq = base / "seq.jsonl"
    calls = [hostile_call(out, victim), BOX,
             {"tool": "export", "args": {"format": "step", "path": "parts/p.step"}},
             {"tool": "export", "args": {"format": "step", "path": "parts/r.step"}},
             {"tool": "render", "args": {"size": 64}}]
    seq.write_text("".join(json.dumps(c) + "\n" for c in calls))
    os.chmod(seq, 0o644)
    p = run_as(user, ["tools", "run", str(seq), "--out", str(out), "--keep-going"], base)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert_untouched(out, victim, owner, report_of(results))
    assert (out / "final.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "render_000_0.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "parts" / "r.step").read_bytes().startswith(b"ISO-10303-21")
    assert json.loads((out / "scene.json").read_text())["objects"][0]["name"] == "P"


def _tasks_try(tmp_path: Path, user) -> None:
    from training.tasks import get_task

    owner = os.geteuid() if user is None else user.uid
    base = tmp_path / "tt" if user is None else Path(user.home) / "tt"
    out, victim = setup_folders(base, None if user is None else user.uid)
    task = get_task("composition:1:3")
    # exports are delivered at the end: the hostile call swaps p.step for a link before that
    calls = [*task.oracle, BOX, *({"tool": "export", "args": {"format": "step", "path": f"parts/{n}.step",
                                                                "objects": ["P"]}} for n in "pr"),
             hostile_call(out, victim),
             {"tool": "export", "args": {"format": "step", "path": "parts/s.step", "objects": ["P"]}}]
    path = base / "calls.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in calls))
    os.chmod(path, 0o644)
    p = run_as(user, ["tasks", "try", "composition:1:3", "--calls", str(path), "--out", str(out),
                      "--json"], base)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    recorded = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    assert_untouched(out, victim, owner, report_of(recorded))
    assert json.loads((out / "reward.json").read_text())["task"]
    assert (out / "final.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [c["ok"] for c in recorded[-4:]] == [True, True, False, True]
    assert (out / "parts" / "s.step").read_bytes().startswith(b"ISO-10303-21")
    # p.step became a link in the scratch, r.step the text "jail": neither is taken out
    assert not (out / "parts" / "p.step").exists() and not (out / "parts" / "r.step").exists()
    link, text = p.stderr.splitlines()
    assert link.startswith("warning: ") and "'parts/p.step' is a symlink" in link
    assert text.startswith("warning: ") and "'parts/r.step' is not a step file" in text


def test_tools_run_out_is_never_the_jails(tmp_path):
    _tools_run(tmp_path, None)


def test_tasks_try_out_is_never_the_jails(tmp_path):
    _tasks_try(tmp_path, None)


@pytest.mark.skipif(os.geteuid() != 0, reason="as an ordinary user the two tests above are this case")
def test_tools_run_and_tasks_try_as_an_ordinary_user(tmp_path, ordinary_user):
    _tools_run(tmp_path, ordinary_user)
    _tasks_try(tmp_path, ordinary_user)


CUBE_STL = "solid c\n" + "".join(
    f"facet normal 0 0 0\nouter loop\nvertex {a}\nvertex {b}\nvertex {c}\nendloop\nendfacet\n"
    for a, b, c in [("0 0 0", "1 0 0", "0 1 0"), ("0 0 0", "0 1 0", "0 0 1"),
                    ("0 0 0", "0 0 1", "1 0 0"), ("1 0 0", "0 0 1", "0 1 0")]) + "endsolid c\n"


def test_mcp_workspace_is_copied_in_and_out_never_bound(tmp_path):
    from agents.serving.mcp_server import McpSettings, ToolBridge

    out, victim = setup_folders(tmp_path)
    (out / "in").mkdir()
    (out / "in" / "tet.stl").write_text(CUBE_STL)
    os.symlink(victim, out / "in" / "link.stl")
    os.mkfifo(out / "in" / "fifo.stl")  # opened to read, it would block forever
    (out / "exp").mkdir()
    os.symlink(victim, out / "exp" / "b.stl")  # planted by someone else in the person's folder
    bridge = ToolBridge(McpSettings(workspace=out, record=False))
    try:
        first = bridge.call("import_file", {"path": "in/tet.stl"})
        again = bridge.call("import_file", {"path": str(out / "in" / "tet.stl")})
        link = bridge.call("import_file", {"path": "in/link.stl"})
        fifo = bridge.call("import_file", {"path": "in/fifo.stl"})
        probe = bridge.call("cadquery_script", hostile_call(out, victim)["args"])
        made = bridge.call("export", {"format": "stl", "path": "exp/a.stl"})
        refused = bridge.call("export", {"format": "stl", "path": "exp/b.stl"})
    finally:
        bridge.close()
    assert not first.is_error and not again.is_error, (first.content, again.content)
    assert link.is_error and "symlink" in link.content[0].text
    assert fifo.is_error and "not a regular file" in fifo.content[0].text
    report = report_of([{"error": probe.content[0].text}])
    stl = (out / "exp" / "a.stl").read_bytes()  # binary: a header, a count, 50 bytes a triangle
    assert not made.is_error and len(stl) == made.structured_content["bytes"] == 84 + 50 * 8
    assert refused.is_error and "is a symlink; it was left as it is" in refused.content[0].text
    assert (out / "exp" / "b.stl").is_symlink() and stat.S_ISFIFO(os.lstat(out / "in" / "fifo.stl").st_mode)
    (out / "exp" / "b.stl").unlink()  # the person's own link: the walk below checks the rest
    (out / "in" / "link.stl").unlink()
    (out / "in" / "fifo.stl").unlink()
    assert_untouched(out, victim, os.geteuid(), report)
    assert sorted(p.name for p in out.rglob("*")) == ["a.stl", "canary.txt", "exp", "in",
                                                      "mine.txt", "tet.stl"]
