"""Studio responsiveness under a real X server (Xvfb, Mesa llvmpipe): the live GPU viewport
against the worker-rendered viewport it replaced, GUI lateness during agent and training
runs, and time from launch to a usable window.

    .venv/bin/python benchmarks/bench_studio.py        (starts its own Xvfb; ~4 minutes on 2 cores,
                                                        plus the fine-tune figures, ~15 minutes)
    .venv/bin/python benchmarks/bench_studio.py --viewport   (only the viewport figures)
    .venv/bin/python benchmarks/bench_studio.py --finetune   (only the fine-tune figures, offscreen)
    .venv/bin/python benchmarks/bench_studio.py --finetune --quick   (the tiny model: a check)

Measured in the same run: orbit frames/s in a 1280x800 viewport with a ~200k-triangle scene,
before (the worker renders PNG frames, drafts while dragging) and after (the live view);
time from a scene change (a move; a new object) to the frame showing it, before and after;
lateness of the idle GUI thread (baseline) and during an agent run with the live view on;
the bare `render` tool rate; a bare Qt window's launch time.

The fine-tune figures (`finetune_benchmarks`): the studio's fine-tune (the shipped studio
config, LoRA on the packaged base, at nice 5 under SCHED_BATCH as the Training dock runs it) on
demonstrations the oracle just recorded, first with no studio open (idle) and then launched
from the Training dock of a real studio window while a modeller's work goes on in it (a move
every half second, the viewport drawing it); per-step time of each (median of the steps after
the first), their ratio, GUI lateness meanwhile, and the time from Launch to the first usable
adapter (RUN/adapter-latest) in each. `--quick`: the tiny model and a few steps.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Studio responsiveness: the live viewport, GUI lateness during agent and "
                    "training runs, launch time, and a fine-tune beside the open studio.")
    parser.add_argument("--viewport", action="store_true", help="only the viewport figures")
    parser.add_argument("--finetune", action="store_true",
                        help="only the fine-tune figures (offscreen: no X server needed)")
    parser.add_argument("--quick", action="store_true",
                        help="the fine-tune on the tiny model, a few steps (checks the script)")
    parser.add_argument("--steps", type=int, default=None,
                        help="fine-tune steps per run (default 30; 12 with --quick)")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    if os.environ.get("MW_BENCH_CHILD"):
        if args.finetune:
            run_finetune_only(args)
        elif args.viewport:
            run_viewport_only()
        else:
            run_all(args)
        sys.stdout.flush()
        os._exit(0)  # the figures are out; interpreter teardown with a live GL window can block
    platform = "offscreen" if args.finetune else "xcb"
    xvfb = None if args.finetune else start_xvfb()  # a child: Qt leaves the X server first
    try:
        code = subprocess.call([sys.executable, __file__, *sys.argv[1:]], cwd=ROOT,
                               env={**os.environ, "MW_BENCH_CHILD": "1", "QT_QPA_PLATFORM": platform})
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


def run_all(args: argparse.Namespace | None = None) -> None:
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
    finetune = finetune_benchmarks(app, window, controller, tmp, args or parse_args([]))
    window.close()

    print(json.dumps({k: round(v, 3) for k, v in results.items()}, indent=1))
    print(f"launch: window shown {shown:.2f} s ({shown / bare_shown:.1f}x a bare Qt window's "
          f"{bare_shown:.2f} s); runtime ready {ready:.2f} s")
    for run in ("agent", "training"):
        print(f"lateness during {run}: p50 {results[f'lateness_{run}_p50_ms']:.1f} ms, "
              f"p99 {results[f'lateness_{run}_p99_ms']:.1f} ms (idle p99 "
              f"{results['lateness_idle_p99_ms']:.1f} ms: {results[f'lateness_{run}_p99_ms'] / max(0.1, results['lateness_idle_p99_ms']):.1f}x)")
    print_viewport(results)
    print_finetune(finetune)


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


# -- a fine-tune beside the open studio ---------------------------------------------------------
def run_finetune_only(args: argparse.Namespace) -> None:
    tmp = tempfile.mkdtemp(prefix="mw-bench-finetune-")
    app, window, controller = open_studio(tmp)
    results = finetune_benchmarks(app, window, controller, tmp, args)
    window.close()
    print_finetune(results)


def finetune_benchmarks(app, window, controller, tmp: str, args: argparse.Namespace) -> dict:
    """The studio's fine-tune idle, then from the Training dock of `window` while a modeller
    works in it; one run, so the ratio compares like with like."""
    from studio.agent.runner import AgentRequest
    from studio.probe import LatenessProbe

    steps = args.steps or (12 if args.quick else 30)
    every = 3 if args.quick else 10  # the shipped studio config saves every 10 steps
    finished: list = []  # demonstrations: the oracle's episode, recorded in this studio
    window.agent.sig_finished.connect(finished.append)
    window.agent.run(AgentRequest(policy="oracle", task_id=TASK))
    wait(app, lambda: bool(finished), 600)
    controller.finish_demonstration(check=False)
    config = _finetune_config(Path(tmp), controller, steps, every, args.quick)
    results: dict = {"finetune_steps": steps, "finetune_model": "tiny" if args.quick else
                     "smollm2-135m-instruct", "finetune_adapter_every_steps": every}

    idle_run = Path(tmp) / "ft-idle"  # 1. no studio work: the process waits on the child
    from agents.models.cpu import background_command, child_env

    env = {**os.environ, **child_env(), "MODELWRIGHT_DATA_DIR": str(controller.data_dir)}
    env.pop("QT_QPA_PLATFORM", None)
    t0 = time.monotonic()
    proc = subprocess.Popen(background_command([sys.executable, "-m", "studio.cli", "train", "sft",
                                                "--config", str(config), "--out", str(idle_run)]),
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    first = None
    while proc.poll() is None:
        if first is None and (idle_run / "adapter-latest" / "adapter_config.json").is_file():
            first = time.monotonic() - t0
        time.sleep(0.2)  # polling a file the child writes, not timing the code under test
    if proc.returncode:
        raise RuntimeError(f"the idle fine-tune failed: {proc.stderr.read()[-2000:]}")
    results["finetune_idle_first_adapter_s"] = first
    results["finetune_idle_step_s"] = _median_step(idle_run)

    # 2. the same run from the Training dock while a modeller works in the window
    dock, probe = window.training, LatenessProbe()
    studio_run = Path(tmp) / "ft-studio"
    dock.kind.setCurrentText("sft")
    dock.config.setText(str(config))
    dock.out.setText(str(studio_run))
    stopped: list = []
    dock.sig_stopped.connect(stopped.append)
    seen: dict = {}
    moves = [0]

    def modeller() -> None:  # a move every half second, as a person drags an object about
        if stopped:
            return
        moves[0] += 1
        controller.send("transform", {"name": "Globe", "location": [moves[0] % 2, 0, 0.5]},
                        origin="human", on_done=lambda _r: QTimer.singleShot(500, modeller))

    from PySide6.QtCore import QTimer

    probe.start()
    t0 = time.monotonic()
    dock.launch()
    modeller()

    def done() -> bool:
        if "first" not in seen and (studio_run / "adapter-latest" / "adapter_config.json").is_file():
            seen["first"] = time.monotonic() - t0
        return bool(stopped)

    wait(app, done, 7200)
    probe.stop()
    if stopped[0] != 0:
        raise RuntimeError(f"the studio's fine-tune failed: {dock.log.toPlainText()[-2000:]}")
    results["finetune_studio_first_adapter_s"] = seen.get("first")
    results["finetune_studio_step_s"] = _median_step(studio_run)
    results["finetune_studio_moves"] = moves[0]
    results["finetune_step_ratio"] = results["finetune_studio_step_s"] / results["finetune_idle_step_s"]
    results["finetune_lateness_p50_ms"] = probe.percentile(50)
    results["finetune_lateness_p99_ms"] = probe.percentile(99)
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in results.items()},
                     indent=1))
    return results


def _finetune_config(tmp: Path, controller, steps: int, every: int, quick: bool) -> Path:
    """The studio's own SFT config on this studio's demonstrations ("From my demonstrations"),
    with `steps` steps; on the tiny model with --quick. The packaged base is linked into the
    studio's data dir (built once in the usual one)."""
    import yaml

    from studio.training.demos import prepare_demo_run

    config, _ = prepare_demo_run(controller.store(), tmp / "demos-run",
                                 controller.session_episodes or None)
    raw = yaml.safe_load(config.read_text())
    raw["sft"]["max_steps"] = steps
    raw["run"].update(adapter_every_steps=every, save_steps=10 * steps)
    if quick:
        from training.sft.tiny_model import build_tiny_model

        raw["model"] = {"path": str(build_tiny_model(tmp / "tiny", seed=0))}
        raw["lora"] = {"r": 4, "alpha": 8}
    else:
        from agents.models.registry import BASE_NAME, ensure_base

        base = ensure_base()  # the usual data dir's copy
        link = Path(controller.data_dir) / "models" / BASE_NAME
        if not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(base, target_is_directory=True)
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    return config


def _median_step(run: Path) -> float:
    """Median seconds per optimiser step, from the run's metrics (the first step, which loads
    and warms up, left out)."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    times = {int(r["step"]): float(r["elapsed_s"]) for r in rows if "loss" in r and "elapsed_s" in r}
    steps = sorted(times)
    gaps = [(times[b] - times[a]) / (b - a) for a, b in zip(steps, steps[1:], strict=False)]
    return statistics.median(gaps)


def print_finetune(r: dict) -> None:
    print(f"fine-tune ({r['finetune_model']}, {r['finetune_steps']} steps): "
          f"{r['finetune_studio_step_s']:.2f} s/step beside the studio at work vs "
          f"{r['finetune_idle_step_s']:.2f} s/step idle ({r['finetune_step_ratio']:.2f}x); "
          f"GUI lateness meanwhile p99 {r['finetune_lateness_p99_ms']:.1f} ms")
    print(f"first usable adapter (every {r['finetune_adapter_every_steps']} steps): "
          f"{_secs(r['finetune_studio_first_adapter_s'])} after Launch beside the studio, "
          f"{_secs(r['finetune_idle_first_adapter_s'])} idle")


def _secs(value) -> str:
    return "never" if value is None else f"{value:.0f} s"


def _render_rate(session, args: dict, seconds: float) -> float:
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        session.call("render", args)
        n += 1
    return n / (time.perf_counter() - t0)


if __name__ == "__main__":
    main()
