"""``MemoryProvisionedWorkers``: the twin of the worker alias's provisioned concurrency, which keeps what was
asked for (and when, by its clock) so a test or ``duetime local`` can see what the prescaler did."""

from __future__ import annotations

import threading
from datetime import datetime

from duetime.clock import Clock
from duetime.ports import ProvisionedWorkers


class MemoryProvisionedWorkers:
    """Implements ``duetime.ports.ProvisionedWorkers``. Allocation is instant (on AWS it takes minutes)."""

    def __init__(self, clock: Clock, workers: int = 0) -> None:
        self.clock = clock
        self._workers = workers
        self._lock = threading.Lock()
        self.history: list[tuple[datetime, int]] = []  # (when, workers) for every change asked for

    def provisioned(self) -> int:
        with self._lock:
            return self._workers

    def provision(self, workers: int) -> None:
        if workers < 0:
            raise ValueError(f"provisioned workers must be 0 or more, not {workers}")
        with self._lock:
            self._workers = workers
            self.history.append((self.clock.now(), workers))


def _implements_the_port(workers: MemoryProvisionedWorkers) -> ProvisionedWorkers:
    """Never called: mypy checks here that the twin keeps ``ProvisionedWorkers``' signature."""
    return workers
