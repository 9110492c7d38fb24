"""Studio responsiveness under a real X server (Xvfb, Mesa llvmpipe): the live GPU viewport
against the worker-rendered viewport it replaced, GUI lateness during agent and training
runs, and time from launch to a usable window.

    .venv/bin/python benchmarks/bench_studio.py        (starts its own Xvfb; ~4 minutes on 2 cores)
    .venv/bin/python benchmarks/bench_studio.py --viewport   (only the viewport figures)

Measured in the same run: orbit frames/s in a 1280x800 viewport with a ~200k-triangle scene,
before (the worker renders PNG frames, drafts while dragging) and after (the live view);
time from a scene change (a move; a new object) to the frame showing it, before and after;
lateness of the idle GUI thread (baseline) and during an agent run with the live view on;
the bare `render` tool rate; a bare Qt window's launch time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TASK = "primitive_placement:1:42"

LAUNCH_CHILD = r"""
import time, sys
t0 = time.perf_counter()
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
app = QApplication(sys.argv[:1])
marks = {}
if sys.argv[1] == "bare":
    from PySide6.QtWidgets import QMainWindow
    w = QMainWindow(); w.resize(1600, 1000); w.show()
    QTimer.singleShot(0, lambda: (marks.setdefault("shown", time.perf_counter() - t0), app.quit()))
    app.exec()
    print(marks["shown"], marks["shown"])
else:
    from studio.app import StudioOptions, build
    window, controller = build(StudioOptions(data_dir=sys.argv[2], settings_file=sys.argv[2] + "/s.ini"))
    window.show()
    QTimer.singleShot(0, lambda: marks.setdefault("shown", time.perf_counter() - t0))
    controller.sig_ready.connect(lambda: (marks.setdefault("ready", time.perf_counter() - t0), window.close(), app.quit()))
    app.exec()
    print(marks["shown"], marks["ready"])
"""


def launch_times(kind: str, tmp: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", LAUNCH_CHILD, kind, tmp], capture_output=True, text=True,
                         cwd=ROOT, timeout=180, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    shown, ready = out.stdout.strip().splitlines()[-1].split()
    return float(shown), float(ready)


def wait(app, condition, timeout_s: float) -> None:
    """Run the event loop (idle, not spinning: the worker shares 2 cores) until `condition`."""
    from PySide6.QtCore import QEventLoop, QTimer

    deadline = time.monotonic() + timeout_s
    loop = QEventLoop()
    check = QTimer()
    check.setInterval(5)
    check.timeout.connect(lambda: loop.quit() if condition() or time.monotonic() > deadline else None)
    check.start()
    if not condition():
        loop.exec()
    check.stop()
    if not condition():
        raise TimeoutError("benchmark step timed out")


def start_xvfb() -> subprocess.Popen | None:
    """Our own X server unless DISPLAY is set; the viewport needs a real one for OpenGL."""
    if os.environ.get("DISPLAY"):
        return None
    binary = shutil.which("Xvfb")
    if binary is None:
        sys.exit("bench_studio needs an X server: install Xvfb (scripts/setup.sh does) or set DISPLAY")
    number = next(n for n in range(90, 200) if not Path(f"/tmp/.X{n}-lock").exists())
    proc = subprocess.Popen([binary, f":{number}", "-screen", "0", "2560x1600x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not Path(f"/tmp/.X11-unix/X{number}").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit("Xvfb did not start")
        time.sleep(0.05)
    os.environ["DISPLAY"] = f":{number}"
    return proc


def main() -> None:
    if os.environ.get("MW_BENCH_CHILD"):
        run_viewport_only() if "--viewport" in sys.argv else run_all()
        sys.stdout.flush()
        os._exit(0)  # the figures are out; interpreter teardown with a live GL window can block
    xvfb = start_xvfb()  # the run is a child so that Qt leaves the X server before it stops
    try:
        code = subprocess.call([sys.executable, __file__, *sys.argv[1:]], cwd=ROOT,
                               env={**os.environ, "MW_BENCH_CHILD": "1", "QT_QPA_PLATFORM": "xcb"})
    finally:
        if xvfb is not None:
            xvfb.terminate()
            xvfb.wait(10)
    sys.exit(code)


def open_studio(tmp: str):
    """The studio's window on its own data folder, shown, with its tool runtime ready."""
    from PySide6.QtWidgets import QApplication

    from studio.app import StudioOptions, build

    app = QApplication.instance() or QApplication([])
    window, controller = build(StudioOptions(data_dir=f"{tmp}/data", settings_file=f"{tmp}/s.ini"))
    window.show()
    wait(app, lambda: controller.ready, 120)
    return app, window, controller


def run_viewport_only() -> None:
    """The viewport figures alone: orbit frames/s live and worker-rendered, scene change to frame."""
    results: dict[str, float] = {}
    app, window, controller = open_studio(tempfile.mkdtemp(prefix="mw-bench-studio-"))
    viewport_benchmarks(app, window, controller, results)
    window.close()
    print(json.dumps({k: round(v, 3) for k, v in results.items()}, indent=1))
    print_viewport(results)


def print_viewport(results: dict) -> None:
    print(f"orbit, 1280x800, {results['scene_triangles'] / 1000:.0f}k triangles: live {results['orbit_fps_live']:.1f} "
          f"frames/s vs worker-rendered {results['orbit_fps_worker']:.1f} frames/s "
          f"({results['orbit_fps_live'] / max(1e-6, results['orbit_fps_worker']):.1f}x; bare render tool "
          f"{results['bare_render_fps_384']:.1f}/s at 384²)")
    print(f"scene change to frame: move {results['move_to_frame_live_ms']:.0f} ms live vs "
          f"{results['move_to_frame_worker_ms']:.0f} ms worker-rendered; new object "
          f"{results['add_to_frame_live_ms']:.0f} ms live")


def run_all() -> None:
    from studio.agent.runner import AgentRequest
    from studio.probe import LatenessProbe

    tmp = tempfile.mkdtemp(prefix="mw-bench-studio-")
    results: dict[str, float] = {}

    bare_shown, _ = launch_times("bare", tmp)
    shown, ready = launch_times("studio", tmp)
    results.update(launch_bare_qt_s=bare_shown, launch_window_shown_s=shown, launch_runtime_ready_s=ready)

    app, window, controller = open_studio(tmp)
    probe = LatenessProbe()

    def measure(name: str, run, done) -> None:
        probe.start()
        run()
        wait(app, done, 600)
        probe.stop()
        results[f"{name}_p50_ms"] = probe.percentile(50)
        results[f"{name}_p99_ms"] = probe.percentile(99)
        results[f"{name}_max_ms"] = probe.worst_ms

    t_end = time.monotonic() + 3
    measure("lateness_idle", lambda: None, lambda: time.monotonic() > t_end)

    finished: list = []
    window.agent.sig_finished.connect(finished.append)
    measure("lateness_agent", lambda: window.agent.run(AgentRequest(policy="oracle", task_id=TASK)),
            lambda: bool(finished))
    assert finished[0]["status"] == "done", finished[0]

    viewport_benchmarks(app, window, controller, results)

    # a training run: the tiny model's SFT on the episode just recorded
    from agents.store.export import export_parquet
    from training.sft.tiny_model import build_tiny_model

    model = build_tiny_model(Path(tmp) / "tiny", seed=0)
    export_parquet(controller.store(), Path(tmp) / "demos")
    cfg = Path(tmp) / "sft.yaml"
    cfg.write_text(f"kind: sft\nmodel: {{path: {model}}}\ntools: [add_primitive, set_material, delete]\n"
                   f"lora: {{r: 4, alpha: 8}}\nrun: {{save_steps: 1000, report_to: []}}\n"
                   f"sft: {{data: [{Path(tmp) / 'demos' / 'episodes.parquet'}], max_steps: 40}}\n")
    dock = window.training
    dock.kind.setCurrentText("sft")
    dock.config.setText(str(cfg))
    dock.out.setText(f"{tmp}/run")
    stopped: list = []
    dock.sig_stopped.connect(stopped.append)
    measure("lateness_training", dock.launch, lambda: bool(stopped))
    results["training_points_plotted"] = dock.metrics.points()
    window.close()

    print(json.dumps({k: round(v, 3) for k, v in results.items()}, indent=1))
    print(f"launch: window shown {shown:.2f} s ({shown / bare_shown:.1f}x a bare Qt window's "
          f"{bare_shown:.2f} s); runtime ready {ready:.2f} s")
    for run in ("agent", "training"):
        print(f"lateness during {run}: p50 {results[f'lateness_{run}_p50_ms']:.1f} ms, "
              f"p99 {results[f'lateness_{run}_p99_ms']:.1f} ms (idle p99 "
              f"{results['lateness_idle_p99_ms']:.1f} ms: {results[f'lateness_{run}_p99_ms'] / max(0.1, results['lateness_idle_p99_ms']):.1f}x)")
    print_viewport(results)


SPHERES = 91  # 48 x 24 UV spheres of 2208 triangles: ~201k triangles


def _big_scene(session) -> None:
    session.reset()
    for i in range(SPHERES):
        session.call("add_primitive", {"kind": "uv_sphere", "name": f"S{i:02d}", "dimensions": [0.9, 0.9, 0.9],
                                       "location": [i % 10 - 4.5, i // 10 - 4.5, 0.45]})


def _orbit_fps(app, drag_by, frames, seconds: float = 8.0) -> float:
    """Frames shown per second while a pointer drags at 60 Hz."""
    from PySide6.QtCore import QTimer

    drag = QTimer()
    drag.setInterval(16)
    drag.timeout.connect(lambda: drag_by(6, 1))
    first, t0 = frames(), time.perf_counter()
    drag.start()
    wait(app, lambda: time.perf_counter() - t0 > seconds, seconds + 30)
    drag.stop()
    return (frames() - first) / (time.perf_counter() - t0)


def viewport_benchmarks(app, window, controller, results: dict) -> None:
    panel = window.viewport_panel
    live, old = panel.live, panel.viewport
    assert live is not None and panel.live_active, "the live viewport did not start (no OpenGL 3.3?)"
    panel.stack.setFixedSize(1280, 800)
    window.resize(2400, 1500)
    future = controller.worker.submit(_big_scene, "bench scene")
    wait(app, future.done, 300)
    future.result()
    controller.refresh()
    controller.sig_scene_changed.emit()
    wait(app, lambda: len(live.renderer.meshes) == SPHERES and live.idle, 300)
    live.frame_all()
    results["scene_triangles"] = live.renderer.triangles
    results["orbit_fps_live"] = _orbit_fps(app, live.drag_by, lambda: live.frames)

    def to_frame(call: tuple[str, dict], shown) -> float:
        t0 = time.perf_counter()
        done: list = []
        controller.send(*call, origin="agent", on_done=done.append)
        wait(app, lambda: bool(done) and shown(), 120)
        return (time.perf_counter() - t0) * 1000

    def live_shows(name: str, x: float):
        return lambda: live.idle and name in live.renderer.meshes and abs(live.renderer.meshes[name].model[0, 3] - x) < 1e-6

    results["move_to_frame_live_ms"] = to_frame(("transform", {"name": "S00", "location": [-6, -4.5, 0.45]}),
                                                live_shows("S00", -6.0))
    results["add_to_frame_live_ms"] = to_frame(("add_primitive", {"kind": "cylinder", "name": "New", "dimensions": [1, 1, 1],
                                                                  "location": [6, 0, 0.5]}), live_shows("New", 6.0))

    # before: the worker-rendered viewport in the same place, same scene, same drag
    panel.stack.setCurrentWidget(old)
    old.rendering = True
    old.request()
    wait(app, lambda: old.frames > 0 and old.shown_serial >= old._serial, 60)
    results["orbit_fps_worker"] = _orbit_fps(app, old.drag_by, lambda: old.frames)
    wait(app, lambda: old.shown_serial >= old._serial, 60)

    results["move_to_frame_worker_ms"] = to_frame(("transform", {"name": "S00", "location": [-7, -4.5, 0.45]}),
                                                  lambda: old.shown_serial >= old._serial and old.frames > 0)
    cam = old.camera.render_args(384)
    future = controller.worker.submit(lambda s: _render_rate(s, cam, 8.0), "bench")
    wait(app, future.done, 60)
    results["bare_render_fps_384"] = future.result()
    panel.set_mode("orbit")


def _render_rate(session, args: dict, seconds: float) -> float:
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        session.call("render", args)
        n += 1
    return n / (time.perf_counter() - t0)


if __name__ == "__main__":
    main()
