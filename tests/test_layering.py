"""The layering rule, checked: import-linter's contracts, and lazy heavy imports."""

import json
import os
import subprocess
import sys

PROBE = r"""
import importlib, json, pkgutil, sys
heavy = ("torch", "transformers", "trl", "peft", "PySide6", "bpy", "OCP", "cadquery")
report = {}
for pkg in ("tools", "agents", "training"):
    mod = importlib.import_module(pkg)
    for info in pkgutil.walk_packages(mod.__path__, pkg + "."):
        if info.name.startswith("tools.worker"):
            continue  # the worker is the one place that imports bpy and OCP
        importlib.import_module(info.name)
report["loaded"] = sorted(m for m in heavy if m in sys.modules)
print(json.dumps(report))
"""


def test_import_contracts_hold():
    lint = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    p = subprocess.run([lint, "--no-cache", "pyproject.toml"], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "broken" in p.stdout and "0 broken" in p.stdout


def test_heavy_packages_are_imported_lazily():
    """Importing every module of tools/, agents/ and training/ loads no torch, Qt, bpy or OCP."""
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.strip().splitlines()[-1])["loaded"] == []
