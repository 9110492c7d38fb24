"""Foreign text in the studio's widgets (offscreen Qt, the real tool runtime): a worker's
object names and error messages carrying OSC sequences, bidi overrides and HTML are shown
escaped and as plain text."""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # these tests never need a display

import pytest  # noqa: E402
from studio_support import fresh_scene, send, send_ok, studio_window  # noqa: E402

from .conftest import payload  # noqa: E402

HOSTILE = "\x1b]0;pwned\x07\x1b]52;c;cHduZWQ=\x07\u202e<img src=x>"
RAW = "\x1b\x07\u202e"


@pytest.fixture(scope="module")
def studio(qapp, worker_pool, tmp_path_factory, request):
    with studio_window(worker_pool, tmp_path_factory.mktemp("studio"), request) as window:
        yield window


def test_worker_names_and_errors_reach_widgets_escaped_and_plain(studio, qtbot):
    from PySide6.QtCore import Qt

    w = fresh_scene(studio, qtbot)
    send_ok(qtbot, w, "add_primitive", kind="cube", name="A", dimensions="1, 1, 1")
    rename = ("import bpy\nob = bpy.data.objects['A']\n"
              f"ob.name = {HOSTILE[:40]!r}\n")
    send_ok(qtbot, w, "cadquery_script", code=payload(rename, "/dev/null", {}), name="P")
    qtbot.waitUntil(lambda: len(w.outliner.names()) == 2, timeout=120_000)
    shown = [n for n in w.outliner.names() if n != "P"][0]
    assert not any(c in shown for c in RAW) and shown.startswith("\\x1b]0;pwned\\x07")
    item = w.outliner._find(HOSTILE[:40])  # found by its real name
    assert item is not None and item.text(0) == shown

    with qtbot.waitSignal(w.controller.sig_error, timeout=120_000):
        result = send(qtbot, w, "cadquery_script", code=f"raise ValueError({HOSTILE!r})", name="Q")
    assert not result.ok
    label = w.errors.text
    assert w.errors.isVisible() and label.textFormat() == Qt.TextFormat.PlainText
    assert "\\x1b]52;c;" in label.text() and "\\u202e<img src=x>" in label.text()
    assert not any(c in label.text() for c in RAW)
    assert w.palette.error.textFormat() == Qt.TextFormat.PlainText
