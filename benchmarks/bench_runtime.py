"""Tool runtime benchmark: warm workers against a cold process per step, in the same run.

(a) a mutating call + one 256x256 view, warm vs a fresh process (import bpy, same op, same render)
(b) cadquery_script warm vs a subprocess per script
(c) snapshot + restore of a 20-object scene
(d) session start with clean state + first call: before (a warm worker reset and reused, as
    the pool did until a session's code could leak into the next) vs now (a fresh jailed
    worker per session, from a spare booted in the background), and a cold start (no spare)
(e) scene scale: a mutating call, `get_scene` and a 256² view at 10, 100, 1 000 and 10 000
    objects (each scene made in one import call), against the 10-object figures

Run: .venv/bin/python benchmarks/bench_runtime.py   (or `make bench`); `... scale` runs (e) only
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

from tools import ToolSession, WorkerPool
from tools.cli.fuzz import write_cubes

COLD_BLENDER = r"""
import bpy, bmesh
bpy.ops.wm.read_factory_settings(use_empty=True)
sc = bpy.context.scene
me = bpy.data.meshes.new("A"); bm = bmesh.new(); bmesh.ops.create_cube(bm, size=1); bm.to_mesh(me); bm.free()
ob = bpy.data.objects.new("A", me); sc.collection.objects.link(ob); ob.location = (0.3, 0, 0)
cam = bpy.data.objects.new("cam", bpy.data.cameras.new("cam")); sc.collection.objects.link(cam); sc.camera = cam
cam.location = (3, -3, 2.4); cam.rotation_euler = (1.05, 0, 0.785)
sc.render.engine = "BLENDER_WORKBENCH"; sc.render.resolution_x = sc.render.resolution_y = 256
sc.render.filepath = "/tmp/mw_bench_cold.png"; bpy.ops.render.render(write_still=True)
"""
SCRIPT = """import cadquery as cq
result = (cq.Workplane("XY").box(40, 30, 5).faces(">Z").workplane()
          .rect(30, 20, forConstruction=True).vertices().hole(4).edges("|Z").fillet(2))"""
COLD_CQ = f"import cadquery as cq\nexec(compile({SCRIPT!r}, 's', 'exec'))\n"


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def cold(code: str) -> None:
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def main() -> None:
    pool = WorkerPool(size=1)
    s = ToolSession(pool)
    s.render(views=["iso"], size=256)  # first render compiles shaders: not a steady-state cost
    i = iter(range(10**6))

    def warm_step():
        r = s.call("transform", {"name": "A", "location": [next(i) * 1e-3, 0, 0]})
        assert r.ok, r.error
        assert s.render(views=["iso"], size=256).ok

    assert s.call("add_primitive", {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}).ok
    warm_a = statistics.median(timed(warm_step, 20))
    cold_a = statistics.median(timed(lambda: cold(COLD_BLENDER), 3))
    print(f"(a) mutating call + 256² view: warm {warm_a * 1e3:7.1f} ms | cold process {cold_a * 1e3:7.1f} ms "
          f"| speed-up {cold_a / warm_a:5.1f}x (target >= 20x)")

    warm_b = statistics.median(timed(lambda: s.call("cadquery_script", {"code": SCRIPT, "name": "P"}), 20))
    cold_b = statistics.median(timed(lambda: cold(COLD_CQ), 3))
    print(f"(b) cadquery_script:           warm {warm_b * 1e3:7.1f} ms | subprocess   {cold_b * 1e3:7.1f} ms "
          f"| speed-up {cold_b / warm_b:5.1f}x (target >= 30x)")

    s.reset()
    for k in range(15):
        s.call("add_primitive", {"kind": "cube", "name": f"m{k}", "dimensions": [1, 1, 1], "location": [k, 0, 0]})
    for k in range(5):
        s.call("cad_box", {"name": f"c{k}", "length": 2, "width": 2, "height": 2})
    snap = timed(lambda: s.call("snapshot", {"name": "b"}), 10)
    rest = timed(lambda: s.call("restore", {"name": "b"}), 10)
    print(f"(c) snapshot {statistics.median(snap) * 1e3:.1f} ms + restore {statistics.median(rest) * 1e3:.1f} ms "
          "(20 objects, 5 CAD parts)")
    s.close()

    first_call = {"kind": "cube", "name": "S", "dimensions": [1, 1, 1]}
    # before: the old session boundary, a `reset` of the same warm worker, then the first call
    with ToolSession(pool) as t:
        t.call("add_primitive", first_call)

        def reused():
            t.reset()
            assert t.call("add_primitive", first_call).ok

        before = statistics.median(timed(reused, 10))
    # now: a fresh worker per session, taken from the spare the pool keeps booted
    starts, firsts = [], []
    for _ in range(5):
        while not pool._idle:  # the spare boots in the background between sessions
            time.sleep(0.1)
        t0 = time.perf_counter()
        with ToolSession(pool) as t:
            starts.append(time.perf_counter() - t0)
            t1 = time.perf_counter()
            assert t.call("add_primitive", first_call).ok
            firsts.append(time.perf_counter() - t1)
    cold_pool = WorkerPool(size=0, prewarm=False)
    t0 = time.perf_counter()
    with ToolSession(cold_pool) as t:
        cold_start = time.perf_counter() - t0
    cold_pool.close()
    after = statistics.median(starts) + statistics.median(firsts)
    print(f"(d) session start + first call: before (reset, reused worker) {before * 1e3:.1f} ms | now "
          f"(fresh worker from a spare) {statistics.median(starts) * 1e3:.1f} ms + "
          f"{statistics.median(firsts) * 1e3:.1f} ms = {after * 1e3:.1f} ms (ratio {after / before:.2f}) | "
          f"with no spare ready: {cold_start:.1f} s to boot a jailed worker")
    pool.close()


def scene_scale(sizes: tuple[int, ...] = (10, 100, 1_000, 10_000)) -> None:
    """(e) What a call costs as the scene grows; targets: the mutating call at 10 000 objects
    within 10x of the call at 10, and the model-facing scene text under a fixed budget."""
    from agents.loop.context import compact_scene

    pool = WorkerPool(size=1)
    rows = []
    for n in sizes:
        with ToolSession(pool, deadline_s=600) as s:
            write_cubes(s.workspace / "scale.obj", n)
            t = time.perf_counter()
            assert s.call("import_file", {"path": "scale.obj"}).ok
            made = time.perf_counter() - t
            assert s.render(views=["iso"], size=64).ok  # helpers, shader batches: not steady state
            def move(k=iter(range(10**6))) -> None:
                r = s.call("transform", {"name": "cube_00003", "location": [next(k) * 1e-3, 0, 0]})
                assert r.ok, r.error

            moves = timed(move, 16)  # one full cycle of undo points: 15 journal entries + 1 checkpoint
            mutate, mean = statistics.median(moves), statistics.fmean(moves)
            scene = s.call("get_scene", {})
            listing = statistics.median(timed(lambda: s.call("get_scene", {}), 5))
            view = statistics.median(timed(lambda: s.render(views=["iso"], size=256), 3))
            text = compact_scene(scene.output, limit=40)
            rows.append((n, made, mutate, mean, listing, view, len(json.dumps(scene.output)),
                         len(text)))
    pool.close()
    base, base_mean = rows[0][2], rows[0][3]
    print("(e) objects | import | mutating call: median (x vs 10), mean of 16 (x) | get_scene "
          "| 256² view | get_scene reply | observation text")
    for n, made, mutate, mean, listing, view, reply, text in rows:
        print(f"    {n:7,d} | {made:6.2f} s | {mutate * 1e3:7.1f} ms ({mutate / base:4.1f}x), "
              f"{mean * 1e3:7.1f} ms ({mean / base_mean:4.1f}x) "
              f"| {listing * 1e3:7.1f} ms | {view * 1e3:8.1f} ms | {reply / 1e3:6.1f} kB "
              f"| {text:6,d} chars (~{text // 4:,d} tokens)")
    worst = rows[-1][2] / base
    print(f"    mutating call at {rows[-1][0]:,} objects: {worst:.1f}x the call at {rows[0][0]} "
          f"(target <= 10x; mean with its checkpoints {rows[-1][3] / base_mean:.1f}x); "
          f"largest observation text {max(r[7] for r in rows):,} chars "
          "(budget 16 000)")


if __name__ == "__main__":
    if sys.argv[1:] == ["scale"]:
        scene_scale()
    else:
        main()
        scene_scale()
