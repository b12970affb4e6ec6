"""The twin's installation record (``InstallationRecord``): the record under a lock, each change one step
with the condition ``conditions.py`` names (INSTALLATION_NEVER_FINALIZED, INSTALLATION_FINALIZED_AS_READ).
Instants are kept to the whole second, as the DynamoDB record stores them. Whether the installation holds
nothing is asked of the store it watches (``MemoryStore``: no partition has a low-water mark)."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime

from duetime.adapters.memory.store import MemoryStore
from duetime.adapters.memory.stored import to_second
from duetime.domain.installation import Installation, ReleaseSeen


class MemoryInstallation:
    """Implements ``duetime.ports.InstallationRecord`` beside a ``MemoryStore``'s tables."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self.store = store
        self.lock = threading.Lock()
        self.record = Installation()

    def read_installation(self) -> Installation:
        with self.lock:
            return self.record

    def record_release(self, release: str, now: datetime) -> Installation:
        now = to_second(now)
        with self.lock:
            seen = self.record.seen(release)
            others = tuple(r for r in self.record.releases if r.release != release)
            mine = ReleaseSeen(release, seen.first_seen if seen else now, now)
            releases = tuple(sorted((*others, mine), key=lambda r: r.first_seen))
            self.record = replace(self.record, releases=releases)
            return self.record

    def start_installation(self, stored_format: int, release: str, now: datetime) -> bool:
        with self.lock:
            if self.record.finalized_release is not None:  # INSTALLATION_NEVER_FINALIZED
                return False
            self._finalized(stored_format, release, now)
            return True

    def finalize_installation(self, stored_format: int, release: str, now: datetime, was: int) -> bool:
        with self.lock:
            if self.record.finalized_format != was:  # INSTALLATION_FINALIZED_AS_READ
                return False
            self._finalized(stored_format, release, now)
            return True

    def _finalized(self, stored_format: int, release: str, now: datetime) -> None:
        self.record = replace(
            self.record,
            finalized_format=stored_format,
            finalized_release=release,
            finalized_at=to_second(now),
        )

    def holds_nothing(self) -> bool:
        if self.store is None:
            return True
        with self.store.lock:  # no partition has a mark: no job was ever written (``DynamoInstallation``)
            return not self.store._marks
