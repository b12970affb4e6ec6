"""``MemoryStore``: the in-memory twin of ``DynamoStore`` (see the package docstring for what it is for)."""

from __future__ import annotations

import threading

from duetime.adapters.memory.jobs import MemoryJobs
from duetime.adapters.memory.poller_leases import MemoryPollerLeases
from duetime.adapters.memory.runs import MemoryRuns
from duetime.adapters.memory.teams import MemoryTeams
from duetime.ports import JobStore, PollerLeaseStore, RunStore, TeamStore


class MemoryStore(MemoryJobs, MemoryRuns, MemoryTeams, MemoryPollerLeases):
    """Implements ``JobStore``, ``RunStore``, ``TeamStore`` and ``PollerLeaseStore`` (``duetime.ports``) in
    memory, thread-safe (one lock). Jobs are written with ``put_job`` (the API catalog's part)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._jobs = {}
        self._marks = {}
        self._runs = {}
        self._reap_at = {}
        self._teams = {}
        self._slots = {}
        self._poller_leases = {}


def _implements_the_ports(store: MemoryStore) -> tuple[JobStore, RunStore, TeamStore, PollerLeaseStore]:
    """Never called: mypy checks here that ``MemoryStore`` keeps every port's signatures."""
    return store, store, store, store
