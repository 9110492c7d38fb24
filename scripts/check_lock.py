"""Checks that a venv holds exactly what requirements.lock pins, and that the lock still
satisfies pyproject.toml. `make setup` runs it last; tests/test_lock.py runs it on the test venv.

    .venv/bin/python scripts/check_lock.py            # the venv of the interpreter that runs it
    .venv/bin/python scripts/check_lock.py --strict   # packages the lock does not name fail too

Exit 0: the venv matches. Exit 1: it drifted (a version differs from its pin, a locked package
is missing) or pyproject.toml asks for something the lock does not give (run `make lock`); one
line per package. A package installed beside the lock (say vLLM, the gpu extra) is listed and,
without --strict, allowed. Needs only the standard library and `packaging` (which is locked).
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parent.parent
PROJECT = "modelwright"
# Installed by setup itself, not by the lock: pip (the installer) and the project (-e .).
NOT_LOCKED = {"pip", PROJECT}
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def read_pins(path: Path) -> dict[str, str]:
    """`name==version` lines of a requirements file (hashes, comments, markers ignored)."""
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        m = _PIN.match(line)
        if m:
            pins[canonicalize_name(m.group(1))] = m.group(2)
    return pins


def installed_versions() -> dict[str, str]:
    """Every distribution the running interpreter sees, by canonical name."""
    out: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            out.setdefault(canonicalize_name(name), dist.version)
    return out


def compare(expected: dict[str, str], installed: dict[str, str]) -> tuple[list[str], list[str]]:
    """(problems, extras): a version that differs or a package missing; packages not expected."""
    problems = []
    for name, version in sorted(expected.items()):
        have = installed.get(name)
        if have is None:
            problems.append(f"{name}: missing (locked {version})")
        elif have != version:
            problems.append(f"{name}: installed {have}, locked {version}")
    extras = [f"{name} {v}" for name, v in sorted(installed.items())
              if name not in expected and name not in NOT_LOCKED]
    return problems, extras


def project_requirements(pyproject: Path, extra: str = "dev") -> list[Requirement]:
    """The base dependencies plus `extra`, with the project's own extras (modelwright[train])
    expanded, for this interpreter's environment."""
    project = tomllib.loads(pyproject.read_text())["project"]
    optional = project.get("optional-dependencies", {})
    reqs: list[Requirement] = []
    seen: set[str] = set()

    def add(lines: list[str]) -> None:
        for line in lines:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            if canonicalize_name(req.name) == PROJECT:
                for e in sorted(req.extras - seen):
                    seen.add(e)
                    add(optional.get(e, []))
            else:
                reqs.append(req)

    add(project.get("dependencies", []))
    seen.add(extra)
    add(optional.get(extra, []))
    return reqs


def unmet_by_lock(reqs: list[Requirement], pins: dict[str, str]) -> list[str]:
    """pyproject.toml requirements the lock does not pin or pins outside their range."""
    out = []
    for req in reqs:
        name = canonicalize_name(req.name)
        pinned = pins.get(name)
        if pinned is None:
            out.append(f"{req}: not in the lock")
        elif not req.specifier.contains(pinned, prereleases=True):
            out.append(f"{req}: the lock pins {pinned}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lock", type=Path, default=REPO / "requirements.lock")
    ap.add_argument("--also", type=Path, action="append",
                    default=[REPO / "scripts" / "base-model.txt"],
                    help="another hashed requirements file that setup installs (repeatable)")
    ap.add_argument("--pyproject", type=Path, default=REPO / "pyproject.toml")
    ap.add_argument("--strict", action="store_true",
                    help="fail on packages that the lock does not name, too")
    args = ap.parse_args(argv)
    for f in (args.lock, args.pyproject, *args.also):
        if not f.is_file():
            print(f"error: {f} not found", file=sys.stderr)
            return 2

    pins = read_pins(args.lock)
    expected = dict(pins)
    for f in args.also:
        expected.update(read_pins(f))
    problems, extras = compare(expected, installed_versions())
    stale = unmet_by_lock(project_requirements(args.pyproject), pins)
    env = sys.prefix
    ok = True
    if stale:
        ok = False
        print(f"error: {args.lock.name} does not satisfy {args.pyproject.name} (run `make lock`):",
              file=sys.stderr)
        for line in stale:
            print(f"  {line}", file=sys.stderr)
    if problems:
        ok = False
        print(f"error: {env} differs from {args.lock.name} ({len(problems)} packages; "
              "`make setup` installs the lock, `make clean setup` starts over):", file=sys.stderr)
        for line in problems:
            print(f"  {line}", file=sys.stderr)
    if extras:
        if args.strict:
            ok = False
        word = "error" if args.strict else "note"
        print(f"{word}: installed beside {args.lock.name} ({len(extras)}): {', '.join(extras)}",
              file=sys.stderr)
    if ok:
        print(f"{env} matches {args.lock.name}: {len(expected)} pinned packages")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
