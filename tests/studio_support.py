"""What the studio's pytest-qt tests share: a window on the suite's warm worker pool, and a
palette call as a person makes it. Waits are generous: a loaded 2-core machine must meet them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pytestqt.qtbot import QtBot

from tools import ToolSession

WAIT_MS = 120_000


@contextmanager
def studio_window(worker_pool, root: Path, request) -> Iterator:
    """A real studio window with its own store and settings under `root`, closed afterwards."""
    from studio.app import StudioOptions, build

    options = StudioOptions(data_dir=str(root / "data"), settings_file=str(root / "settings.ini"))
    window, controller = build(options, session_factory=lambda: ToolSession(worker_pool, deadline_s=120))
    window.show()
    QtBot(request).waitUntil(lambda: controller.ready, timeout=WAIT_MS)
    try:
        yield window
    finally:
        window.training.shutdown()
        window.close()


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
