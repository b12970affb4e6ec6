"""``MemoryProvisionedWorkers``: the twin of the worker alias's provisioned concurrency, and
``MemoryEventPollers``: the twin of the worker event source's provisioned mode. Each keeps what was asked for
(and when, by its clock) so a test or ``duetime local`` can see what the prescaler did."""

from __future__ import annotations

import threading
from datetime import datetime

from duetime.domain.clock import Clock
from duetime.ports import ProvisionedEventPollers, ProvisionedWorkers


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


class MemoryEventPollers:
    """Implements ``duetime.ports.ProvisionedEventPollers``; starts in standard mode (0). ``refuse`` makes the
    next ``refuse`` requests fail as AWS's API may (throttled, the mapping being updated), changing nothing.
    Pollers come up at once (AWS does not say how long it takes)."""

    def __init__(self, clock: Clock, minimum: int = 0) -> None:
        self.clock = clock
        self._minimum = minimum
        self._lock = threading.Lock()
        self.refuse = 0
        self.history: list[tuple[datetime, int]] = []  # (when, minimum pollers) for every change made

    def minimum_pollers(self) -> int:
        with self._lock:
            return self._minimum

    def provision_pollers(self, minimum: int) -> None:
        if minimum < 0 or minimum == 1:
            raise ValueError(f"an SQS event source takes 0 (standard mode) or 2+ pollers, not {minimum}")
        with self._lock:
            if self.refuse:
                self.refuse -= 1
                raise RuntimeError("refused: the event source mapping is being updated")
            self._minimum = minimum
            self.history.append((self.clock.now(), minimum))


def _implements_the_pollers_port(pollers: MemoryEventPollers) -> ProvisionedEventPollers:
    """Never called: mypy checks here that the twin keeps ``ProvisionedEventPollers``' signature."""
    return pollers
