"""Screenshots of the studio's Agent dock as a newcomer first sees it: before any run (what the
default Local agent can do) and, with --goal, after a run of that goal (the steps, or the
no-call message). The real studio in a real window, on fresh settings: run it under a display.

    xvfb-run -a .venv/bin/python scripts/agent_dock_screenshot.py docs/img/agent-dock-first-run.png \
        --goal "add a red cube named Box at 1, 0, 0.5" \
        --after docs/img/agent-dock-one-call.png
    xvfb-run -a .venv/bin/python scripts/agent_dock_screenshot.py /tmp/bare.png \
        --model smollm2-135m-instruct --goal "Write a short poem about the sea." \
        --after docs/img/agent-dock-no-call.png

The Local agent is whatever is shipped (assets/agents; the bare packaged base when nothing is):
after shipping another adapter (scripts/ship_adapter.py), run this again for the pictures.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("screenshot", type=Path, help="the dock before any run (PNG)")
    parser.add_argument("--goal", default=None, help="then type this goal and press Run")
    parser.add_argument("--after", type=Path, default=None, help="the dock after that run (PNG)")
    parser.add_argument("--model", default="",
                        help="the Model field (e.g. smollm2-135m-instruct: the bare base); "
                             "empty: the default Local agent")
    parser.add_argument("--data-dir", default=None,
                        help="store and models (default: a fresh folder; the packaged base is "
                             "linked in from the usual data dir, built there once)")
    parser.add_argument("--size", default="1500x1150", help="the window's size")
    parser.add_argument("--dock-width", type=int, default=520,
                        help="the Agent dock's width in pixels (its row of options fits)")
    args = parser.parse_args()
    if args.after and not args.goal:
        parser.error("--after needs --goal")

    from PySide6.QtCore import Qt, QTimer
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    from agents.models.registry import BASE_NAME, ensure_base
    from studio.app import StudioOptions, build
    from studio.viewport.capture import capture

    fresh = Path(tempfile.mkdtemp(prefix="mw-dock-shot-"))  # the person's settings stay as they are
    data = Path(args.data_dir) if args.data_dir else fresh / "data"
    link = data / "models" / BASE_NAME
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(ensure_base(), target_is_directory=True)
    app = QApplication(sys.argv[:1])
    width, height = (int(v) for v in args.size.split("x"))
    options = StudioOptions(data_dir=str(data), settings_file=str(fresh / "settings.ini"),
                            exit_when_done=True, size=(width, height))
    window, controller = build(options)
    window.show()
    dock = window.agent
    out: dict = {}

    def shoot(path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        app.processEvents()
        if not capture(window.docks["Agent"]).save(str(path), "PNG"):  # the dock as shown
            raise SystemExit(f"error: could not write {path}")
        out.setdefault("screenshots", []).append(str(path))

    def finish(summary: dict | None = None) -> None:
        if summary is not None:
            out["summary"] = {k: summary.get(k) for k in ("status", "calls", "tokens_out", "error")}
            QTimer.singleShot(800, lambda: (shoot(args.after), end()))  # the last render shown
        else:
            end()

    def end() -> None:
        print(json.dumps(out), flush=True)
        window.close()
        app.exit(0)

    def first_run() -> None:
        if not controller.ready:
            QTimer.singleShot(200, first_run)
            return
        dock.model.setText(args.model)
        out["about"] = dock.about.text()
        window.resizeDocks([window.docks["Agent"]], [args.dock_width], Qt.Orientation.Horizontal)
        app.processEvents()
        shoot(args.screenshot)
        if not args.goal:
            finish()
            return
        dock.approval.setChecked(False)
        dock.goal.setFocus()
        QTest.keyClicks(dock.goal, args.goal)
        dock.sig_finished.connect(finish)
        QTest.mouseClick(dock.run_button, Qt.MouseButton.LeftButton)

    QTimer.singleShot(1500, first_run)  # the window is laid out and painted
    return app.exec()


if __name__ == "__main__":
    raise SystemExit(main())
