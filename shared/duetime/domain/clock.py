"""Clocks. Logic never calls ``datetime.now()``: it is handed a ``Clock``.

* ``SystemClock``: this machine's clock (used by the API for display stamps only).
* ``ManualClock``: a settable clock for deterministic tests.
* Lease and claim decisions use the store's clock (``duetime.adapters.aws.store_clock.StoreClock``), which is
  derived from the ``Date`` header of DynamoDB's responses, so a worker with a skewed clock cannot steal
  or keep a lease.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant as an aware UTC datetime."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that only moves when told to. Thread-safe."""

    def __init__(self, start: datetime) -> None:
        self._now = start.astimezone(UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def set(self, value: datetime) -> None:
        with self._lock:
            self._now = value.astimezone(UTC)

    def advance(self, seconds: float) -> datetime:
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now
