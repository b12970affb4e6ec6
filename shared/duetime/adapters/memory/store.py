"""``MemoryStore``: the in-memory twin of ``DynamoStore`` (see the package docstring for what it is for)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from datetime import datetime

from duetime.adapters.memory.deadlines import MemoryDeadlines
from duetime.adapters.memory.due_index import DueIndexedJobs
from duetime.adapters.memory.jobs import MemoryJobs
from duetime.adapters.memory.outbox import MemoryOutbox
from duetime.adapters.memory.poller_leases import MemoryPollerLeases
from duetime.adapters.memory.quarantine_record import MemoryQuarantineRecord
from duetime.adapters.memory.reconciler import MemoryReconciler
from duetime.adapters.memory.runs import MemoryRuns
from duetime.adapters.memory.teams import MemoryTeams
from duetime.ports import (
    DeadlineStore,
    JobStore,
    NotificationOutbox,
    PollerLeaseStore,
    ResultWrite,
    RunStore,
    TeamStore,
)


class MemoryStore(
    MemoryJobs,
    MemoryRuns,
    MemoryTeams,
    MemoryPollerLeases,
    MemoryDeadlines,
    MemoryOutbox,
    MemoryQuarantineRecord,
    MemoryReconciler,
):
    """Implements ``JobStore``, ``RunStore``, ``TeamStore``, ``PollerLeaseStore``, ``DeadlineStore`` and
    ``NotificationOutbox`` (``duetime.ports``) in memory, thread-safe (one lock). Jobs are written with
    ``put_job`` (the API catalog's part).

    ``copies``: whether models are deep-copied as they go in and out (as items are encoded and decoded), so
    a caller that changes a model it gave or got changes nothing stored. False is for a caller that never
    changes a model in place and needs the speed (the midnight simulation's 500,000 jobs): ``get_run``,
    ``due_jobs``, ``due_rows`` and the run writes then hand out and keep the models as stored."""

    def __init__(self, copies: bool = True) -> None:
        self.lock = threading.RLock()
        self.copies = copies
        self._jobs = DueIndexedJobs()
        self._marks = {}
        self._quarantined = {}
        self._runs = {}
        self._reap_at = {}
        self._teams = {}
        self._slots = {}
        self._poller_leases = {}
        self._watches = {}
        self._missing = {}
        self._outbox = {}
        self._reconciliations = {}

    def record_results_and_free_slots(
        self,
        results: Sequence[ResultWrite],
        owner: str,
        now: datetime,
        slots: Mapping[str, Mapping[str, int]],
    ) -> set[str]:
        try:
            return self.record_results(results, owner, now)
        finally:
            for team_id, team_slots in slots.items():
                self.release_slots(team_id, team_slots)


def _implements_the_ports(
    store: MemoryStore,
) -> tuple[JobStore, RunStore, TeamStore, PollerLeaseStore, DeadlineStore, NotificationOutbox]:
    """Never called: mypy checks here that ``MemoryStore`` keeps every port's signatures."""
    return store, store, store, store, store, store
