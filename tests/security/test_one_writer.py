"""One writer for paths a person names: a static scan of every write in the product.

Only tools/trust/outbox.py may write into a person's folder (`--out`, `--workspace`, `--image`,
`--json-out`): it never follows a link, never writes through anything but a file it made,
and checks what it writes. Every other place that opens a path for writing is listed below
with the reason it is not a person's folder. A new write anywhere fails this test until it
goes through tools.trust.outbox or is added here with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("studio", "agents", "tools", "training")
_WRITE_MODE = set("wax+")
_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT")

# (file, function, what) -> why that write is not into a person's folder
ALLOWED: dict[tuple[str, str, str], str] = {
    # the one writer itself, and the writer into a worker's own scratch (hostile, not a person's)
    ("tools/trust/outbox.py", "*", "*"): "the outbox: a fresh O_EXCL|O_NOFOLLOW name, never the final one",
    ("tools/trust/confined.py", "*", "*"): "a worker's scratch and the trusted side's own copies of it",
    ("studio/project/recovery.py", "*", "*"): "the studio's own autosave slot under its data folder "
    "(its lock file, the recovery copy's origin), never a person's folder",
    ("agents/models/shipped.py", "ship", "*"): "scripts/ship_adapter.py (a maintainer's command) "
    "writing a new adapter into the product's assets, in a fresh temp folder renamed into place",
    ("tools/worker/", "*", "*"): "inside the jail: the worker's own scratch",
    # supervisor, verifier and ledger bookkeeping inside their own private roots
    ("tools/sandbox/scratch.py", "*", "os.open"): "a pool's lock file in its own mkdtemp root",
    ("tools/sandbox/identity.py", "*", "os.open"): "a uid lease lock in the supervisor's lock dir",
    ("tools/sandbox/template.py", "*", "open"): "the worker template's log in its own mkdtemp folder (0700)",
    ("tools/sandbox/diskwatch.py", "_mount", "os.open"): "a worker's scratch image (ext4, as root) "
    "beside its scratch in the pool's own root, O_EXCL|O_NOFOLLOW",
    ("tools/sandbox/diskwatch.py", "_pristine", "os.open"): "the pool's pristine ext4 image that "
    "scratch images are copied from, in the pool's own root, O_EXCL|O_NOFOLLOW, then renamed",
    ("tools/sandbox/shader_cache.py", "*", "shutil.copytree"): "the shader cache under the pool's root",
    ("tools/trust/ledger.py", "*", "open"): "the ledger's vault of acknowledged commits (0700, its own)",
    ("tools/runtime/verifier.py", "*", "*"): "a clean verifier worker's private state folder",
    ("tools/cli/fuzz.py", "*", "write_text"): "a fuzz input in the fuzzer's own temp dir",
    # the trajectory store and registries: atomic writers under their own data dir
    ("agents/store/atomic.py", "*", "*"): "the store's atomic writer, under its data dir",
    ("agents/store/journal.py", "*", "os.open"): "the store's journal, O_NOFOLLOW, under its data dir",
    ("agents/store/lease.py", "*", "os.open"): "the store's lease file under its data dir",
    ("agents/store/export.py", "*", "write_text"): "a dataset export's temp dir, then os.replace",
    # the model registry under DATA/models: no worker ever wrote there
    ("agents/models/convert.py", "convert_gguf", "write_text"): "a converted model's manifest, "
    "in its own mkdtemp build folder before the rename",
    ("agents/models/convert.py", "locked", "open"): "a conversion or registry lock file under "
    "DATA/models",
    ("agents/models/registry.py", "_registry", "write_text"): "the registry's temp file under DATA/models, "
    "then os.replace",
    ("agents/models/variants.py", "add_speed", "write_text"): "a fast variant's speed counts: "
    "a temp file beside its GGUF under DATA/variants, then os.replace",
    # training run folders: the trusted side's own figures and checkpoints, no worker's file
    ("training/runs.py", "*", "*"): "a training run folder (config, metrics, checkpoints)",
    ("training/pipeline.py", "*", "write_text"): "the pipeline's run folder",
    ("training/pipeline.py", "evaluate_model.keep", "open"): "an eval stage's journal of "
    "finished episodes in the pipeline's run folder, appended to",
    ("training/sft/trainer.py", "*", "*"): "the SFT run folder",
    ("training/rl/grpo.py", "*", "open"): "the GRPO run folder's metrics",
    ("training/eval/run_eval.py", "*", "*"): "the run folder's eval reports",
    ("training/eval/cluster.py", "keep", "write_text"): "the local cluster's state file under the "
    "data dir (our own JSON: address, pid), a temp file then os.replace",
    ("training/cli/cluster.py", "start_keeper", "open"): "the cluster keeper's log beside its "
    "state file (this user's cache folder, or MODELWRIGHT_CLUSTER_STATE's), appended to",
    ("training/eval/cluster.py", "new_token", "os.open"): "the cluster's token file under the data "
    "dir, 0600, O_EXCL|O_NOFOLLOW",
    ("training/eval/cluster.py", "_check_token", "os.open"): "/dev/null, where Ray's stderr goes "
    "while a token is tried",
    ("studio/training/demos.py", "*", "write_text"): "a studio run folder's config",
    ("studio/viewport/capture.py", "*", "open"): "a Qt image file the person chose in a dialog",
}


def _name(node: ast.AST) -> str:
    return ast.unparse(node)


def _writes(tree: ast.AST):
    """(function qualname, what, line) for every call that may open a path for writing."""
    stack: list[str] = []

    def visit(node: ast.AST):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            stack.append(node.name)
            for child in ast.iter_child_nodes(node):
                yield from visit(child)
            stack.pop()
            return
        if isinstance(node, ast.Call):
            what = _what(node)
            if what:
                yield ".".join(stack) or "<module>", what, node.lineno
        for child in ast.iter_child_nodes(node):
            yield from visit(child)

    yield from visit(tree)


def _what(call: ast.Call) -> str | None:
    f = call.func
    attr = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    base = _name(f.value) if isinstance(f, ast.Attribute) else ""
    if attr in ("write_text", "write_bytes"):
        return attr
    if base == "shutil" and attr.startswith(("copy", "move")) and attr != "copyfileobj":
        return f"shutil.{attr}"
    if attr == "open" and base == "os":
        flags = _name(call.args[1]) if len(call.args) > 1 else ""
        return "os.open" if any(flag in flags for flag in _WRITE_FLAGS) else None
    if attr != "open":  # os.fdopen opens no path: the descriptor's open was scanned
        return None
    builtin = base in ("", "io", "builtins")
    # open(path, mode); Path.open(mode); Qt's device.open(flags); Image.open(path) reads
    at = 1 if builtin else 0
    mode = next((k.value for k in call.keywords if k.arg == "mode"),
                call.args[at] if len(call.args) > at else None)
    if mode is None:
        return None
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return "open" if set(mode.value) & _WRITE_MODE else None
    if builtin or "Write" in _name(mode):  # a mode chosen at run time, or Qt's write flags
        return "open"
    return None


def _allowances(rel: str, func: str, what: str) -> set[tuple[str, str, str]]:
    return {key for key in ALLOWED if (key[0] == rel or key[0].endswith("/") and rel.startswith(key[0]))
            and key[1] in (func, "*") and key[2] in (what, "*")}


def scan() -> list[str]:
    found = []
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            for func, what, line in _writes(ast.parse(path.read_text(), rel)):
                if not _allowances(rel, func, what):
                    found.append(f"{rel}:{line}: {func}: {what}")
    return found


def test_no_code_outside_the_outbox_opens_a_path_for_writing():
    assert scan() == [], ("these write a path without tools.trust.outbox; route a person's folder "
                          "through it, or list the write in ALLOWED with its reason")


def test_the_scan_sees_each_kind_of_write():
    """The scanner itself: each form it must catch, caught (else the test above proves nothing)."""
    src = '''
import os, shutil
def f(p, q, m):
    open(p, "w"); open(p, "ab"); open(p, mode="x"); open(p, "r+"); p.open("a")
    p.write_text("x"); p.write_bytes(b"x"); shutil.copy(p, q); shutil.copyfile(p, q)
    os.open(p, os.O_WRONLY | os.O_CREAT); open(p, m); f.open(QIODevice.OpenModeFlag.WriteOnly)
    open(p); open(p, "rb"); os.open(p, os.O_RDONLY); Image.open(p); p.open()
'''
    whats = [what for _, what, _ in _writes(ast.parse(src))]
    assert whats == ["open"] * 5 + ["write_text", "write_bytes", "shutil.copy", "shutil.copyfile",
                                    "os.open", "open", "open"]


def test_every_allowance_is_still_used():
    """A stale allowance would let a new write in under an old reason."""
    used = set()
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            for func, what, _ in _writes(ast.parse(path.read_text(), rel)):
                used |= _allowances(rel, func, what)
    assert set(ALLOWED) - used == set()


def test_no_worker_is_given_a_folder_of_its_callers():
    """The jail's only writable folder is its scratch: nothing in the product hands a worker
    another (`workspace=` to a pool's spawn, a WorkerProcess or a ToolSession)."""
    import inspect

    from tools.runtime.session import ToolSession

    assert "workspace" not in inspect.signature(ToolSession).parameters
    given = []
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and _name(node.func).split(".")[-1] in (
                        "spawn", "WorkerProcess", "ToolSession") \
                        and any(k.arg == "workspace" for k in node.keywords):
                    given.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert given == []
