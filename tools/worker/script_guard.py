"""Running a user's or a model's CadQuery script inside the (already jailed) worker.

Two layers: a static check of the script's AST (imports from an allowlist, no dunder access,
no file/exec builtins) and a restricted runtime (safe builtins, a guarded `__import__`,
exporters that write only into scratch). The process jail around the worker is the third.
"""

from __future__ import annotations

import ast
import builtins
import math
import os

from tools.errors import ErrorKind, ToolError
from tools.worker.lazy_cq import cq, module

ALLOWED_MODULES = frozenset({"cadquery", "math", "cmath", "itertools", "functools", "collections",
                             "typing", "dataclasses", "random", "fractions", "decimal",
                             "statistics", "operator", "enum", "copy"})
FORBIDDEN_NAMES = frozenset({"open", "exec", "eval", "compile", "__import__", "globals", "locals",
                             "vars", "getattr", "setattr", "delattr", "input", "breakpoint", "help",
                             "memoryview", "exit", "quit", "__builtins__", "__loader__", "__spec__"})
SAFE_BUILTINS = {name: getattr(builtins, name) for name in (
    "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "filter", "float", "frozenset",
    "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "object",
    "pow", "print", "range", "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum",
    "tuple", "zip", "hasattr", "callable", "hash", "id", "format", "chr", "ord", "bin", "hex", "oct",
    "complex", "bytes", "property", "staticmethod", "classmethod", "super", "type",
    "ValueError", "TypeError", "KeyError", "IndexError", "ZeroDivisionError", "Exception",
    "RuntimeError", "ArithmeticError", "StopIteration", "AssertionError", "NotImplementedError",
)}


def check_script(code: str) -> ast.Module:
    try:
        tree = ast.parse(code, "<cadquery_script>")
    except SyntaxError as e:
        raise ToolError(ErrorKind.VALIDATION, f"syntax error on line {e.lineno}: {e.msg}") from None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for mod in mods:
                if mod.split(".")[0] not in ALLOWED_MODULES or (isinstance(node, ast.ImportFrom) and node.level):
                    raise ToolError(ErrorKind.SANDBOX, f"line {node.lineno}: import of {mod!r} is not allowed; "
                                    f"allowed: {', '.join(sorted(ALLOWED_MODULES))}")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("__"):
            raise ToolError(ErrorKind.SANDBOX, f"line {node.lineno}: access to {node.attr!r} is not allowed")
        elif isinstance(node, ast.Name) and (node.id in FORBIDDEN_NAMES or node.id.startswith("__")):
            raise ToolError(ErrorKind.SANDBOX, f"line {node.lineno}: {node.id!r} is not allowed in scripts")
    return tree


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level or name.split(".")[0] not in ALLOWED_MODULES:
        raise ImportError(f"import of {name!r} is not allowed")
    return __import__(name, globals, locals, fromlist, level)


class _Capture:
    """Records show_object() calls and exports, writing exports only inside scratch."""

    def __init__(self, out_dir: str):
        self.out_dir = out_dir
        self.shown: list = []
        self.exported: list = []

    def show_object(self, obj, name=None, options=None, **_kw):
        self.shown.append(obj)

    def export(self, w, fname, *args, **kwargs):
        self.exported.append(w)
        os.makedirs(self.out_dir, exist_ok=True)
        target = os.path.join(self.out_dir, os.path.basename(str(fname)) or "out.step")
        return _real_export()(w, target, *args, **kwargs)


_REAL_EXPORT: list = []  # CadQuery's own exporter, taken before any script could replace it


def _real_export():
    if not _REAL_EXPORT:
        _REAL_EXPORT.append(cq.exporters.export)
    return _REAL_EXPORT[0]


def _guard_path(path) -> str:
    real = os.path.realpath(str(path))
    allowed = [os.path.realpath(p) for p in _ALLOWED_READ]
    if not any(real == a or real.startswith(a + os.sep) for a in allowed):
        raise PermissionError(f"reading {path!r} is not allowed: scripts may read only the workspace")
    return real


_ALLOWED_READ: list[str] = []


def run_cadquery_script(code: str, out_dir: str) -> cq.Shape:
    tree = check_script(code)
    capture = _Capture(out_dir)
    _ALLOWED_READ[:] = [out_dir]
    real_export, cadquery = _real_export(), module()  # the script gets the module itself
    real_import_step, real_import_stl = cq.importers.importStep, getattr(cq.importers, "importDXF", None)
    cq.exporters.export = capture.export
    cq.importers.importStep = lambda p, *a, **k: real_import_step(_guard_path(p), *a, **k)
    if real_import_stl is not None:
        cq.importers.importDXF = lambda p, *a, **k: real_import_stl(_guard_path(p), *a, **k)
    safe = dict(SAFE_BUILTINS, __import__=_guarded_import)
    env = {"__builtins__": safe, "__name__": "__cadquery_script__", "cq": cadquery, "cadquery": cadquery, "math": math,
           "show_object": capture.show_object, "show": capture.show_object, "debug": lambda *a, **k: None}
    try:
        exec(compile(tree, "<cadquery_script>", "exec"), env)  # noqa: S102 - jailed, checked above
    except ToolError:
        raise
    except PermissionError as e:
        raise ToolError(ErrorKind.SANDBOX, str(e)) from None
    except ImportError as e:
        raise ToolError(ErrorKind.SANDBOX, str(e)) from None
    except Exception as e:
        line = _error_line(e)
        raise ToolError(ErrorKind.KERNEL, f"script failed{line}: {type(e).__name__}: {str(e)[:300]}") from None
    finally:
        cq.exporters.export = real_export
        cq.importers.importStep = real_import_step
        if real_import_stl is not None:
            cq.importers.importDXF = real_import_stl
    return _pick_result(env, capture)


def _error_line(e: BaseException) -> str:
    tb = e.__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<cadquery_script>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" on line {line}" if line else ""


def _to_shape(obj) -> cq.Shape | None:
    if isinstance(obj, cq.Workplane):
        vals = [v for v in obj.vals() if isinstance(v, cq.Shape)]
        if not vals:
            return None
        solids = [v for v in vals if isinstance(v, (cq.Solid, cq.Compound, cq.Shell))] or vals
        return solids[0] if len(solids) == 1 else cq.Compound.makeCompound(solids)
    if isinstance(obj, cq.Assembly):
        return obj.toCompound()
    if isinstance(obj, cq.Shape):
        return obj
    return None


def _pick_result(env: dict, capture: _Capture) -> cq.Shape:
    candidates = []
    if "result" in env:
        candidates.append(("result", env["result"]))
    if capture.shown:
        shown = [s for s in (_to_shape(o) for o in capture.shown) if s is not None]
        if shown:
            candidates.append(("show_object", shown[0] if len(shown) == 1 else cq.Compound.makeCompound(shown)))
    if capture.exported:
        candidates.append(("export", capture.exported[-1]))
    module_level = [v for k, v in env.items() if not k.startswith("_") and isinstance(v, (cq.Workplane, cq.Shape))]
    if len(module_level) == 1:
        candidates.append(("module", module_level[0]))
    for _how, obj in candidates:
        shape = _to_shape(obj)
        if shape is not None:
            return shape
    raise ToolError(ErrorKind.VALIDATION, "the script produced no shape: bind it to `result` "
                    "(result = cq.Workplane().box(1, 1, 1)) or pass it to show_object(...)")
