"""What the studio's tests share: a window on the suite's warm worker pool, an empty scene in
it, a palette call as a person makes it, and for the real-window tests an Xvfb display and a
child process that runs a script on it. Waits are generous: a loaded 2-core machine must meet
them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from tools import ToolSession

WAIT_MS = 120_000


@contextmanager
def studio_window(worker_pool, root: Path, request, **more) -> Iterator:
    """A real studio window with its own store and settings under `root`, closed afterwards
    (`more`: other StudioOptions, e.g. recover="yes")."""
    from studio.app import StudioOptions, build

    options = StudioOptions(data_dir=str(root / "data"), settings_file=str(root / "settings.ini"), **more)
    window, controller = build(options, session_factory=lambda: ToolSession(worker_pool, deadline_s=120))
    window.show()
    QtBot(request).waitUntil(lambda: controller.ready, timeout=WAIT_MS)
    try:
        yield window
    finally:
        window.training.shutdown()
        window.close()


def fresh_scene(window, qtbot):
    """`window` with an empty scene, no task, no demonstration in progress."""
    c = window.controller
    c.load_task(None)
    c.new_scene()
    qtbot.waitUntil(lambda: not c.scene.objects and not c.undo_stack.count(), timeout=WAIT_MS)
    return window


def send(qtbot, window, tool, /, **values):
    """Fill the palette's form for `tool` and press Send; wait for the call's result."""
    with qtbot.waitSignal(window.controller.sig_call, timeout=WAIT_MS) as blocker:
        window.palette.select(tool, **values)
        assert window.palette.send(), window.palette.error.text()
    return blocker.args[0]


def send_ok(qtbot, window, tool, /, **values):
    """`send`, and the call must have succeeded."""
    result = send(qtbot, window, tool, **values)
    assert result.ok, result.to_text()
    return result


@pytest.fixture
def xvfb_display(request):
    """A fresh Xvfb on a free display number; DISPLAY for the child; stopped afterwards. Its
    screen is 1920x1200 unless a test asks for another (`@pytest.mark.parametrize(
    "xvfb_display", ["1280x720x24"], indirect=True)`)."""
    binary = shutil.which("Xvfb")
    assert binary, "Xvfb is not installed (apt-get install xvfb; see VERIFIED.md)"
    screen = getattr(request, "param", "1920x1200x24")
    number = next(n for n in range(90, 200) if not Path(f"/tmp/.X{n}-lock").exists()
                  and not Path(f"/tmp/.X11-unix/X{n}").exists())
    proc = subprocess.Popen([binary, f":{number}", "-screen", "0", screen, "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    socket = Path(f"/tmp/.X11-unix/X{number}")
    deadline = time.monotonic() + 120
    while not socket.exists():
        assert proc.poll() is None, "Xvfb exited at start"
        assert time.monotonic() < deadline, "Xvfb did not come up"
        time.sleep(0.05)  # waiting for an external process, not timing the code under test
    yield f":{number}"
    proc.terminate()
    proc.wait(10)


def run_on_display(script: str, display: str, *args: str, timeout: int = 300
                   ) -> tuple[subprocess.CompletedProcess, dict]:
    """Run `script` in a child Python on `display` (Qt picks its platform once per process and
    the other studio tests run offscreen); returns the process and the last JSON line it
    printed (the test fails with the child's stderr when it printed none)."""
    env = {**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb"}
    proc = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=Path(__file__).parent.parent)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stderr[-3000:]
    return proc, json.loads(lines[-1])
