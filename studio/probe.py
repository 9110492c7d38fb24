"""Event-loop lateness: a timer on the GUI thread notes how late each tick fires.

A tick that fires long after it was due means the GUI thread was busy (a frozen window);
the test guards against multi-second freezes, the benchmark reports p50/p99.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, Qt, QTimer


class LatenessProbe(QObject):
    def __init__(self, interval_ms: int = 20, parent=None) -> None:
        super().__init__(parent)
        self.interval_ms = interval_ms
        self.samples_ms: list[float] = []
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._tick)
        self._last = 0.0

    def start(self) -> None:
        self.samples_ms.clear()
        self._last = time.perf_counter()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    def _tick(self) -> None:
        now = time.perf_counter()
        self.samples_ms.append(max(0.0, (now - self._last) * 1e3 - self.interval_ms))
        self._last = now

    def percentile(self, q: float) -> float:
        if not self.samples_ms:
            return 0.0
        ordered = sorted(self.samples_ms)
        return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]

    @property
    def worst_ms(self) -> float:
        return max(self.samples_ms, default=0.0)
