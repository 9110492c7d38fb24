"""Studio responsiveness: event-loop lateness during agent and training runs, viewport
frames per second while orbiting at 384², and time from launch to a usable window.

    .venv/bin/python benchmarks/bench_studio.py        (offscreen; ~2-3 minutes on 2 cores)

Baselines measured in the same run: lateness of the idle GUI thread; the bare `render`
tool rate at 384² on a session (what the viewport could show at best); a bare Qt window's
launch time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
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


def main() -> None:
    from PySide6.QtWidgets import QApplication

    from studio.agent.runner import AgentRequest
    from studio.app import StudioOptions, build
    from studio.probe import LatenessProbe

    tmp = tempfile.mkdtemp(prefix="mw-bench-studio-")
    results: dict[str, float] = {}

    bare_shown, _ = launch_times("bare", tmp)
    shown, ready = launch_times("studio", tmp)
    results.update(launch_bare_qt_s=bare_shown, launch_window_shown_s=shown, launch_runtime_ready_s=ready)

    app = QApplication.instance() or QApplication([])
    window, controller = build(StudioOptions(data_dir=f"{tmp}/data", settings_file=f"{tmp}/s.ini"))
    window.show()
    wait(app, lambda: controller.ready, 120)
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

    # viewport FPS while orbiting at 384² (every frame full size), vs the bare render rate
    viewport = window.viewport_panel.viewport
    viewport.draft_size = 384
    from PySide6.QtCore import QTimer

    drag = QTimer()
    drag.setInterval(16)  # a pointer moving at 60 Hz
    drag.timeout.connect(lambda: viewport.drag_by(6, 1))
    first = viewport.frames
    t0 = time.perf_counter()
    drag.start()
    wait(app, lambda: time.perf_counter() - t0 > 8, 30)
    drag.stop()
    results["orbit_fps_384"] = (viewport.frames - first) / (time.perf_counter() - t0)
    cam = viewport.camera.render_args(384)
    future = controller.worker.submit(lambda s: _render_rate(s, cam, 8.0), "bench")
    wait(app, future.done, 60)
    results["bare_render_fps_384"] = future.result()

    # a training run: the tiny model's SFT on the episode just recorded
    from agents.store.export import export_parquet
    from agents.tinymodel import build_tiny_model

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
    print(f"orbit at 384²: {results['orbit_fps_384']:.1f} frames/s shown vs {results['bare_render_fps_384']:.1f} "
          f"bare renders/s ({results['orbit_fps_384'] / max(1e-6, results['bare_render_fps_384']):.2f}x)")


def _render_rate(session, args: dict, seconds: float) -> float:
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        session.call("render", args)
        n += 1
    return n / (time.perf_counter() - t0)


if __name__ == "__main__":
    main()
