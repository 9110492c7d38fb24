"""Rewrites the generated blocks of the docs from the code, so that lists never drift.

    .venv/bin/python scripts/gen_docs.py           # rewrite every block in README.md and docs/*.md
    .venv/bin/python scripts/gen_docs.py --check   # exit 1, naming the files, if one is stale

A block is a marked span of a Markdown file; its kind says what fills it:

    <!-- BEGIN GENERATED tool-names: scripts/gen_docs.py -->
    ...(replaced)...
    <!-- END GENERATED tool-names -->

Kinds: `tool-names` (every name in `tools.specs.TOOLS`, in catalogue order) and `tool-table`
(one row per tool: kernel, whether it changes the scene, the description the model sees).
tests/test_docs_generated.py fails when a block is stale; the fix is to run this script.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # this checkout's tools/, whichever venv runs the script

_BLOCK = re.compile(
    r"(?P<begin><!-- BEGIN GENERATED (?P<kind>[a-z0-9-]+)[^>]*-->\n)"
    r"(?P<body>.*?)"
    r"(?P<end><!-- END GENERATED (?P=kind) -->)",
    re.S)
_BEGIN = re.compile(r"<!-- BEGIN GENERATED ([a-z0-9-]+)")


def _specs() -> list:
    from tools import TOOLS  # the catalogue's public face (tools/specs.py)
    return list(TOOLS.values())


def tool_names() -> str:
    specs = _specs()
    names = ", ".join(s.name for s in specs)
    return textwrap.fill(f"{len(specs)} tools: {names}.", width=100,
                         break_on_hyphens=False) + "\n"


def tool_table() -> str:
    rows = ["| tool | kernel | changes the scene | what it does (its description in the catalogue) |",
            "| --- | --- | --- | --- |"]
    for s in _specs():
        d = s.to_dict()
        desc = " ".join(d["description"].split()).replace("|", "\\|")
        rows.append(f"| `{s.name}` | {d['kernel']} | {'yes' if d['mutating'] else 'no'} | {desc} |")
    return "\n".join(rows) + "\n"


GENERATORS: dict[str, Callable[[], str]] = {"tool-names": tool_names, "tool-table": tool_table}


class DocError(ValueError):
    pass


def render(text: str, where: str = "<text>") -> str:
    """`text` with every generated block refilled; DocError on an unknown kind or an unclosed
    block."""
    cache: dict[str, str] = {}

    def fill(m: re.Match) -> str:
        kind = m.group("kind")
        if kind not in GENERATORS:
            raise DocError(f"{where}: unknown generated block {kind!r} "
                           f"(known: {', '.join(GENERATORS)})")
        if kind not in cache:
            cache[kind] = GENERATORS[kind]()
        return m.group("begin") + cache[kind] + m.group("end")

    out, n = _BLOCK.subn(fill, text)
    if n != len(_BEGIN.findall(text)):
        raise DocError(f"{where}: a BEGIN GENERATED marker has no matching END marker")
    return out


def doc_files(repo: Path = REPO) -> list[Path]:
    """The Markdown files that hold at least one generated block."""
    candidates = [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]
    return [p for p in candidates if p.is_file() and _BEGIN.search(p.read_text())]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    ap.add_argument("--root", type=Path, default=REPO, help="the checkout whose docs to fill")
    args = ap.parse_args(argv)
    stale = []
    try:
        for path in doc_files(args.root):
            old = path.read_text()
            new = render(old, str(path.relative_to(args.root)))
            if new != old:
                stale.append(path.relative_to(args.root))
                if not args.check:
                    path.write_text(new)
    except DocError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.check and stale:
        print(f"error: stale generated blocks in {', '.join(map(str, stale))}: "
              "run `.venv/bin/python scripts/gen_docs.py`", file=sys.stderr)
        return 1
    verb = "would rewrite" if args.check else "rewrote"
    print(f"{verb} {len(stale)} file(s)" + (f": {', '.join(map(str, stale))}" if stale else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
