"""The install is reproducible: requirements.lock is closed, hashed and satisfies pyproject.toml,
the venv under test holds exactly its versions, and the Makefile re-installs when it changes."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "requirements.lock"
CHECK = REPO / "scripts" / "check_lock.py"
_spec = importlib.util.spec_from_file_location("check_lock", CHECK)
check_lock = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_lock)


def run_check(*args):
    return subprocess.run([sys.executable, str(CHECK), *map(str, args)],
                          capture_output=True, text=True)


def test_lock_is_fully_pinned_and_hashed():
    text = LOCK.read_text()
    entries = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2].strip())  # after the header
    assert len(entries) == len(check_lock.read_pins(LOCK)) > 100
    for entry in entries:
        first = entry.splitlines()[0]
        assert re.fullmatch(r"[A-Za-z0-9._-]+==[^\s;]+ \\", first), first
        assert re.search(r"--hash=sha256:[0-9a-f]{64}", entry), first
    pins = check_lock.read_pins(LOCK)
    assert "modelwright" not in pins and "pip" not in pins
    assert pins["trl"].startswith("1.16.") and pins["bpy"].startswith("5.2.")
    assert "vllm" not in pins  # the gpu extra stays outside the lock


def test_lock_satisfies_pyproject():
    reqs = check_lock.project_requirements(REPO / "pyproject.toml")
    names = {r.name for r in reqs}
    assert {"bpy", "torch", "trl", "ray", "pytest"} <= names  # base, train, cluster, dev
    assert "vllm" not in names
    assert check_lock.unmet_by_lock(reqs, check_lock.read_pins(LOCK)) == []


def test_this_venv_holds_the_locked_versions():
    p = run_check()
    assert p.returncode == 0, p.stderr
    assert "matches requirements.lock" in p.stdout


def test_a_drifted_version_fails_loudly(tmp_path):
    have = metadata.version("pytest")
    lock = tmp_path / "requirements.lock"
    lock.write_text(re.sub(r"^pytest==\S+", "pytest==0.0.1", LOCK.read_text(), flags=re.M))
    p = run_check("--lock", lock)
    assert p.returncode == 1
    assert f"pytest: installed {have}, locked 0.0.1" in p.stderr


def test_a_lock_behind_pyproject_says_make_lock(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    text = (REPO / "pyproject.toml").read_text()
    text = re.sub(r'"numpy[^"]*"', '"numpy>=99"', text, count=1)
    text = re.sub(r'("pytest[^"]*",)', r'\1 "no-such-pkg-x",', text, count=1)
    pyproject.write_text(text)
    p = run_check("--pyproject", pyproject)
    assert p.returncode == 1
    assert "run `make lock`" in p.stderr
    assert "numpy>=99: the lock pins" in p.stderr
    assert "no-such-pkg-x: not in the lock" in p.stderr


def test_packages_beside_the_lock_are_noted_or_refused(tmp_path):
    lock = tmp_path / "small.lock"
    lock.write_text(f"pytest=={metadata.version('pytest')} \\\n    --hash=sha256:{'0' * 64}\n")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\ndependencies = ["pytest>=8"]\n')
    p = run_check("--lock", lock, "--pyproject", pyproject)
    assert p.returncode == 0, p.stderr
    assert "note: installed beside small.lock" in p.stderr and "torch " in p.stderr
    p = run_check("--lock", lock, "--pyproject", pyproject, "--strict")
    assert p.returncode == 1 and "error: installed beside small.lock" in p.stderr


def test_project_extras_expand():
    reqs = check_lock.project_requirements(REPO / "pyproject.toml", extra="cluster")
    names = {r.name for r in reqs}
    assert "ray" in names and "bpy" in names and "torch" not in names


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize("newer", ["requirements.lock", "pyproject.toml", None])
def test_makefile_reinstalls_when_the_lock_changes(tmp_path, newer):
    """`make setup` re-runs setup.sh exactly when the stamp is older than what it installs."""
    stamp = tmp_path / ".installed"
    stamp.write_text("")
    # the stamp newer than every prerequisite: nothing to do, unless `newer` is set newer still
    inputs = ("Makefile", "requirements.lock", "pyproject.toml", "scripts/setup.sh",
              "scripts/base-model.txt", "scripts/check_lock.py")
    future = max((REPO / rel).stat().st_mtime for rel in inputs) + 3600
    os.utime(stamp, (future, future))
    env = {**os.environ, "MAKEFLAGS": ""}
    if newer:
        # make a copy of the checkout's Makefile inputs, so the real files keep their times
        work = tmp_path / "repo"
        (work / "scripts").mkdir(parents=True)
        for rel in inputs:
            shutil.copy2(REPO / rel, work / rel)
        os.utime(work / newer, (future + 60, future + 60))
        cwd = work
    else:
        cwd = REPO
    p = subprocess.run(["make", "-n", "setup", f"VENV={tmp_path}"], cwd=cwd, env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert ("scripts/setup.sh" in p.stdout) == bool(newer), p.stdout
