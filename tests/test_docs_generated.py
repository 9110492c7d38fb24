"""The docs' generated blocks (scripts/gen_docs.py) agree with the code they are made from."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools import TOOLS

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "gen_docs.py"
_spec = importlib.util.spec_from_file_location("gen_docs", SCRIPT)
gen_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_docs)


def _block(text: str, kind: str) -> str:
    m = re.search(rf"<!-- BEGIN GENERATED {kind}[^>]*-->\n(.*?)<!-- END GENERATED {kind} -->",
                  text, re.S)
    assert m, f"no {kind} block"
    return m.group(1)


def test_every_generated_block_is_current():
    files = gen_docs.doc_files()
    names = {p.relative_to(REPO).as_posix() for p in files}
    assert {"docs/CONTRACTS.md", "docs/RUNTIME.md"} <= names  # the blocks are still there
    for path in files:
        text = path.read_text()
        assert gen_docs.render(text, str(path)) == text, (
            f"{path.relative_to(REPO)} is stale: run .venv/bin/python scripts/gen_docs.py")


def test_contracts_names_exactly_the_catalogue():
    body = _block((REPO / "docs" / "CONTRACTS.md").read_text(), "tool-names")
    count, names = body.split(":", 1)
    listed = [n.strip() for n in names.replace("\n", " ").rstrip(". ").split(",")]
    assert listed == list(TOOLS)
    assert count == f"{len(TOOLS)} tools"


def test_runtime_table_has_a_row_per_tool():
    body = _block((REPO / "docs" / "RUNTIME.md").read_text(), "tool-table")
    rows = [line for line in body.splitlines() if line.startswith("| `")]
    assert [re.match(r"\| `([^`]+)`", r).group(1) for r in rows] == list(TOOLS)
    by_name = {re.match(r"\| `([^`]+)`", r).group(1): r for r in rows}
    assert "| cadquery | yes |" in by_name["cad_box"]
    assert "| blender | no |" in by_name["get_scene"]
    # a '|' inside a description (cad_fillet's '|Z' selector) is escaped, not a new column
    assert by_name["cad_fillet"].count(" | ") == 3


def test_render_refills_a_stale_block_and_leaves_the_rest():
    text = ("intro\n<!-- BEGIN GENERATED tool-names: x -->\nold list\n"
            "<!-- END GENERATED tool-names -->\noutro\n")
    out = gen_docs.render(text)
    assert out.startswith("intro\n<!-- BEGIN GENERATED tool-names: x -->\n")
    assert out.endswith("<!-- END GENERATED tool-names -->\noutro\n")
    assert "old list" not in out and "cad_query" in out
    assert gen_docs.render(out) == out


@pytest.mark.parametrize("text,needle", [
    ("<!-- BEGIN GENERATED nope -->\n<!-- END GENERATED nope -->\n", "unknown generated block"),
    ("<!-- BEGIN GENERATED tool-names -->\nno end\n", "no matching END"),
    ("<!-- BEGIN GENERATED tool-names -->\n<!-- END GENERATED tool-table -->\n", "no matching END"),
])
def test_render_refuses_a_broken_block(text, needle):
    with pytest.raises(gen_docs.DocError, match=needle):
        gen_docs.render(text, "X.md")


def test_cli_check_then_rewrite(tmp_path):
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "A.md"
    doc.write_text("<!-- BEGIN GENERATED tool-names -->\nstale\n<!-- END GENERATED tool-names -->\n")
    (tmp_path / "README.md").write_text("no blocks here\n")

    def run(*args):
        return subprocess.run([sys.executable, str(SCRIPT), "--root", str(tmp_path), *args],
                              capture_output=True, text=True)

    p = run("--check")
    assert p.returncode == 1 and "docs/A.md" in p.stderr
    assert "stale" in doc.read_text()  # --check changes nothing
    p = run()
    assert p.returncode == 0 and "rewrote 1 file(s): docs/A.md" in p.stdout
    assert "stale" not in doc.read_text() and "add_primitive" in doc.read_text()
    assert run("--check").returncode == 0
    assert (tmp_path / "README.md").read_text() == "no blocks here\n"
