"""Tables are assembled where they are used, from literal lists: no wiring by import side effect.

- No product module imports another only for what importing it does (a `# noqa: F401`
  import outside a package's `__init__` re-exports), except the few listed below with why.
- No lower layer names a module of a higher one as a string (`"training.eval.oracle"` in
  agents/ would be a registration by name the layers contract cannot see).
- The command line has every command group, and a group's module that cannot be imported is
  an error of one line, not a group silently left out.
- The policy table holds every policy without any module imported first.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("tools", "agents", "training", "studio")

# (file, imported module) -> why an import kept for its effect is not wiring
KEPT_FOR_EFFECT = {
    ("training/cli/eval.py", "training.tasks.checks.verdict"): "a preload: the checker's imports run "
    "while the workers start, not after the episode",
    ("training/cli/tasks.py", "training.tasks.checks.verdict"): "the same preload",
    ("training/tasks/checker_main.py", "training.tasks.base"): "a preload: the job's pickled "
    "task's classes, imported before the checker says it is ready",
    ("training/tasks/checker_main.py", "cadquery"): "a probe: is the CAD kernel importable here",
    ("training/eval/harness.py", "training.eval.spec"): "a re-export: names moved to spec.py",
    ("tools/worker/template.py", "tools.worker"): "a preload: the worker template imports bpy, "
    "CadQuery and every worker module once, before it forks workers",
}
# Registration by import that is still to go (none: the task families, constraint kinds,
# deliverable checks and file makers are literal tables since #46).
PENDING: dict[tuple[str, str], str] = {}
# (file, string) -> why a lower layer names a higher module
NAMED_UPWARDS = {
    ("training/launch.py", "studio.cli"): "the command line run as a child process "
    "(`accelerate launch -m studio.cli train ...`), not imported",
}
HIGHER = {
    "tools": ("agents", "training", "studio"),
    "agents": ("training", "studio"),
    "training": ("studio",),
}
EXPECTED_COMMANDS = {
    "studio", "tools", "tasks", "score", "run", "eval", "train", "cluster", "envs", "serve",
    "mcp", "models", "data",
}  # fmt: skip


def _sources(packages):
    for pkg in packages:
        for path in sorted((REPO / pkg).rglob("*.py")):
            yield path.relative_to(REPO).as_posix(), path.read_text(encoding="utf-8")


def side_effect_imports() -> set[tuple[str, str]]:
    """(file, module) of every import marked unused (`noqa: F401`) outside an `__init__`."""
    found = set()
    for rel, text in _sources(PRODUCT):
        if rel.endswith("__init__.py"):
            continue
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            span = lines[node.lineno - 1 : node.end_lineno]
            if not any(re.search(r"noqa:[^#]*\bF401\b", line) for line in span):
                continue
            if isinstance(node, ast.ImportFrom):
                found.add((rel, node.module or ""))
            else:
                found.update((rel, alias.name) for alias in node.names)
    return found


def test_no_product_module_is_imported_for_its_side_effect():
    unexplained = side_effect_imports() - set(KEPT_FOR_EFFECT) - set(PENDING)
    assert not unexplained, (
        "imports kept only for what importing does (wiring by side effect): assemble the table "
        f"where it is used from a literal list instead: {sorted(unexplained)}"
    )


def test_the_scan_sees_an_import_kept_for_its_effect():
    assert ("training/eval/harness.py", "training.eval.spec") in side_effect_imports()


def test_no_lower_layer_names_a_higher_module():
    named = set()
    for layer, above in HIGHER.items():
        pattern = re.compile(rf"^({'|'.join(above)})(\.\w+)+(:\w+)?$")
        for rel, text in _sources((layer,)):
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    if pattern.match(node.value):
                        named.add((rel, node.value))
    assert named - set(NAMED_UPWARDS) == set()


def test_every_command_group_is_on_the_command_line():
    from studio.cli import build_app

    commands = typer.main.get_command(build_app()).commands
    assert set(commands) == EXPECTED_COMMANDS


def test_a_command_module_that_is_missing_is_one_line_and_exit_3():
    code = "from studio.cli import main; main(('training.cli', 'no_such_layer.cli'))"
    proc = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True, text=True,
                          cwd=REPO, timeout=300)  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "no_such_layer" in lines[0]


def test_the_policy_table_needs_no_import_first():
    # a fresh interpreter: the oracle is there without importing the module that defines it
    code = (
        "from training import make_policy, policy_names\n"
        "print(' '.join(policy_names())); print(type(make_policy('oracle')).__name__)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    names, built = proc.stdout.split("\n")[:2]
    assert set(names.split()) == {"hf", "none", "openai", "oracle", "reference", "script"}
    assert built == "OraclePolicy"


def test_the_agents_layer_builds_only_its_own_policies():
    from agents import UnknownPolicyError, make_policy, policy_names

    assert "oracle" not in policy_names()
    with pytest.raises(UnknownPolicyError, match="choose one of: hf, none, openai, script"):
        make_policy("oracle")
