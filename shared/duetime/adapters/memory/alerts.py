"""``MemoryAlerts``: an ``AlertSink`` that keeps what it is given, in order, for a test to read."""

from __future__ import annotations

import threading

from duetime.ports import Alert


class MemoryAlerts:
    """Implements ``duetime.ports.AlertSink``; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._published: list[Alert] = []

    def publish(self, alert: Alert) -> None:
        with self._lock:
            self._published.append(alert)

    @property
    def published(self) -> list[Alert]:
        with self._lock:
            return list(self._published)
