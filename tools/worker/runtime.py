"""Dispatch of tool calls inside the worker, with all-or-nothing semantics.

A mutating call that succeeds is committed (an undo point on disk); one that fails in any way
rolls the scene back to the last commit, so a failed call never leaves a half-done scene.
"""

from __future__ import annotations

import errno
import os
import traceback
from collections.abc import Callable

import bpy

from tools.errors import ErrorKind, ToolError
from tools.worker import cad, io, lazy_cq, meshes, meshfix, render, safety, scene
from tools.worker import state as state_module
from tools.worker.state import SceneState


class WorkerRuntime:
    def __init__(self, scratch: str, workspace: str, test_hooks: bool = False, restore: bool = False,
                 preload_cad: bool = False, warm_render: bool = True, restore_upto: int | None = None,
                 disk_mb: int = 8192):
        self.scratch = scratch
        self.disk_mb = disk_mb
        self.workspace = workspace
        self.test_hooks = test_hooks
        self.test_ops: dict[str, Callable[[dict], dict]] = {}
        if test_hooks:  # fault, probe, exec, hash_check: tests only, never loaded otherwise
            from tools.worker import test_hooks as hooks

            self.test_ops = hooks.ops(self)
        safety.harden_blender()
        if preload_cad:  # a spare booted off the critical path (see tools/worker/lazy_cq.py)
            lazy_cq.preload()
        self.parts = cad.PartStore()
        self.state = SceneState(os.path.join(scratch, "state"), self.parts, replay=self._replay)
        self.renderer = render.Renderer(os.path.join(scratch, "render"))
        self.handlers: dict[str, Callable[[dict], dict | tuple[dict, list[bytes]]]] = {
            **scene.handlers(self.parts),
            **cad.handlers(self.parts, scratch, workspace),
            **io.handlers(self.parts, scratch, workspace),
            **meshfix.handlers(self.parts),
            "get_scene": lambda a: scene.get_scene(a, self.state.last_changed),
            "render": self.renderer.render_call,
            "undo": lambda a: self.state.undo(a["steps"]),
            "snapshot": lambda a: self.state.snapshot(a["name"]),
            "restore": lambda a: self.state.restore(a["name"]),
        }
        if restore:
            self.state.load_latest(restore_upto)
        else:
            self.state.reset()
        state_module.started()  # a restored fork's later reset must not take the template's scene
        if warm_render:  # compile Workbench's shaders (seconds in the jail) before a real render
            self.renderer.warm_up()

    def versions(self) -> dict:
        from importlib.metadata import version  # not the module: it loads on first use

        return {"blender": bpy.app.version_string, "cadquery": version("cadquery")}

    def handle(self, request: dict, blobs: list[bytes]) -> tuple[dict, list[bytes]]:
        op = request.get("op")
        try:
            if op == "call":
                return self._call(request["tool"], request["args"], bool(request.get("mutating")))
            if op == "reset":
                self.state.reset()
                return self._ok({})
            if op == "switch":
                return self._ok(self.state.switch(request.get("park"), request.get("take"),
                                                  bool(request.get("fork"))))
            if op == "meshes":  # the studio's live viewport (not a tool: agents never see it)
                try:
                    output, blobs = meshes.mesh_buffers(dict(request.get("known") or {}))
                except Exception as e:  # reading never changes the scene: report, keep serving
                    raise ToolError(ErrorKind.KERNEL, f"meshes failed: {_short(e)}") from None
                return self._ok(output, blobs)
            if op == "hash":
                return self._ok({})
            if op == "status":
                return self._ok({"rss_mb": _rss_mb(), "undo_depth": self.state.depth})
            if op == "confinement":  # what `tools doctor` reports, measured in here
                from tools.worker.confinement import report

                return self._ok(report(self.scratch))
            if op in self.test_ops:  # tools/worker/test_hooks.py
                return self._ok(self.test_ops[op](request))
            raise ToolError(ErrorKind.VALIDATION, f"unknown worker op {op!r}")
        except ToolError as e:
            return {"ok": False, "error": e.to_dict(), "scene_hash": self.state.scene_hash(),
                    "commit": self.state.head()}, []

    def _ok(self, output: dict, images: list[bytes] | None = None) -> tuple[dict, list[bytes]]:
        return {"ok": True, "output": output, "scene_hash": self.state.scene_hash(), "rss_mb": _rss_mb(),
                "commit": self.state.head()}, images or []

    def _call(self, tool: str, args: dict, mutating: bool) -> tuple[dict, list[bytes]]:
        handler = self.handlers.get(tool)
        if handler is None:
            raise ToolError(ErrorKind.VALIDATION, f"unknown tool {tool!r}")
        touched = self.state.touching(tool, args) if mutating else None
        try:
            out = handler(args)
        except ToolError as e:
            if mutating:
                self.state.rollback(touched, refused=e.kind == ErrorKind.VALIDATION)
            raise
        except (ValueError, RuntimeError, TypeError, KeyError, IndexError, AttributeError,
                ArithmeticError, AssertionError, OSError, MemoryError, RecursionError) as e:
            if mutating:
                self.state.rollback()
            if isinstance(e, OSError) and e.errno in _DISK_FULL:
                raise ToolError(ErrorKind.KERNEL, f"{tool} failed: the worker's disk space "
                                f"({self.disk_mb} MB, MODELWRIGHT_WORKER_DISK_MB) is full; write "
                                "smaller or fewer files") from None
            raise ToolError(ErrorKind.KERNEL, f"{tool} failed: {_short(e)}") from None
        except Exception as e:  # OCCT raises its own Standard_Failure types
            if mutating:
                self.state.rollback()
            raise ToolError(ErrorKind.KERNEL, f"{tool} failed: {_short(e)}") from None
        output, images = out if isinstance(out, tuple) else (out, [])
        if mutating and tool not in ("undo", "restore"):
            self.state.commit(tool, args, touched)
        elif not mutating:
            self.state.after_read()
        return self._ok(output, images)

    def _replay(self, tool: str, args: dict) -> None:
        """Run a journaled call again while a commit is reloaded (see `SceneState`)."""
        self.handlers[tool](args)


_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # the scratch's cap (tools/sandbox/diskwatch.py)


def _short(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if os.environ.get("MW_WORKER_DEBUG"):
        traceback.print_exc()
    return msg[:500]


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0

