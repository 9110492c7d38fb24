"""No module reaches into another module's private names (`_x`): what a module shares it
names without an underscore, so a private helper can change without breaking a caller it
never knew about. Checked on the source (AST) of every module of the four layers: a
`from m import _x`, an `m._x` on a project module `m` bound by an import, and an `obj._x`
(obj not `self`/`cls`) where no class or function of this module defines `_x` (another
module's object, whose private member this module has no business with). Tests are free to
use test hooks; a deliberate exception is listed in ALLOWED with its reason."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("tools", "agents", "training", "studio")

# (importing module, "imported.module._name" or "expression._name"): why it is allowed.
ALLOWED: dict[tuple[str, str], str] = {
    ("tools.worker.selfjail", "os._exit"): "the way out of a fork: no atexit handler or buffer "
    "inherited from the worker template runs twice",
    ("tools.worker.template", "os._exit"): "the same, for a fork that failed before it was a worker",
    ("agents.policies.llamacpp_policy", "llm._ctx"): "llama-cpp-python's Llama has no public "
    "way to run a batch with a logit row per token or to trim its cache (lookup decoding); "
    "_LlamaEngine.supports checks both are there",
    ("agents.policies.llamacpp_policy", "llm._batch"): "the same",
    ("training.eval.cluster", "os._exit"): "a cluster keeper whose Ray start hung: its main "
    "thread is stuck inside Ray, so its watchdog thread ends the process",
    ("training.eval.cluster", "sys._current_frames"): "the same watchdog writes where the main "
    "thread waited, with its outer frames (faulthandler keeps only the innermost 100); the "
    "standard library has no public way to another thread's frame",
}


def own_private_names(tree: ast.Module) -> set[str]:
    """Private names this module defines: functions, classes, assigned names and attributes."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
    return {n for n in names if is_private(n)}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def violations(path: Path) -> list[tuple[str, str, int]]:
    """(importer, "module._name", line) for each private name `path` takes from elsewhere."""
    me = module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[tuple[str, str, int]] = []
    modules: dict[str, str] = {}  # local name -> project module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in LAYERS:
                    local = alias.asname or alias.name.split(".")[0]
                    modules[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            source = absolute(me, path.name == "__init__.py", node)
            if source.split(".")[0] not in LAYERS:
                continue
            for alias in node.names:
                target = f"{source}.{alias.name}"
                if is_module(target):
                    modules[alias.asname or alias.name] = target
                elif is_private(alias.name) and source != me:
                    found.append((me, target, node.lineno))
    own = own_private_names(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and is_private(node.attr)):
            continue
        chain = dotted(node.value)
        head, _, rest = (chain or "").partition(".")
        if head in modules:
            owner = modules[head] + (f".{rest}" if rest else "")
            if is_module(owner):
                if owner != me:
                    found.append((me, f"{owner}.{node.attr}", node.lineno))
                continue
        if chain in ("self", "cls") or node.attr in own:
            continue
        found.append((me, f"{chain or ast.unparse(node.value)}.{node.attr}", node.lineno))
    return found


SOURCES = sorted(p for layer in LAYERS for p in (ROOT / layer).rglob("*.py"))


def test_the_scan_sees_the_project() -> None:
    assert len(SOURCES) > 100 and all(is_module(layer) for layer in LAYERS)


@pytest.mark.parametrize("layer", LAYERS)
def test_no_private_name_crosses_a_module(layer: str) -> None:
    bad = [
        f"{path.relative_to(ROOT)}:{line}: {importer} uses {name}"
        for path in SOURCES
        if path.relative_to(ROOT).parts[0] == layer
        for importer, name, line in violations(path)
        if (importer, name) not in ALLOWED
    ]
    assert not bad, "private names used across modules (make them public or move them):\n" + (
        "\n".join(bad)
    )


def test_the_scan_catches_both_forms(tmp_path: Path) -> None:
    """A control: the checker flags `from m import _x` and `m._x`, and not a module's own."""
    probe = ROOT / "tools" / "_probe_private_names.py"
    probe.write_text(
        "from tools.runtime.session import _private\nimport tools.runtime.supervisor as sup\n"
        "from tools import specs\nsup._hidden()\nspecs._other\nspecs.public\n_mine = 1\n"
        "def f(store, other):\n    store._write()\n    other._mine\n    store.ok\n"
    )
    try:
        names = sorted(name for _, name, _ in violations(probe))
    finally:
        probe.unlink()
    assert names == ["store._write", "tools.runtime.session._private",
                     "tools.runtime.supervisor._hidden", "tools.specs._other"]


def test_allow_list_entries_are_still_needed() -> None:
    seen = {(importer, name) for path in SOURCES for importer, name, _ in violations(path)}
    assert set(ALLOWED) <= seen, f"stale ALLOWED entries: {set(ALLOWED) - seen}"
