"""The twin's reads for the reconciler (``WaitingRuns``) and its record of reports (``ReconcilerRecord``)."""

from __future__ import annotations

from datetime import datetime

from duetime.adapters.memory.stored import Tables, to_second
from duetime.domain.models import RunStatus
from duetime.ports import ReconcilerReport


class MemoryReconciler(Tables):
    """``WaitingRuns`` and ``ReconcilerRecord`` in memory (mixed into ``MemoryStore``). What the twin does
    not model: DynamoDB's reap tickets (one entry for the runs of a claim of 3 or more: the twin has an
    entry per run) and the day after which DynamoDB's TTL forgets a report."""

    _reconciliations: dict[datetime, ReconcilerReport]

    def oldest_queued_fire(self, partition: int, limit: int) -> datetime | None:
        with self.lock:
            entries = sorted(
                (reap_at, run_id)
                for run_id, reap_at in self._reap_at.items()
                if self._runs[run_id].partition == partition
            )[:limit]
            fires = [
                self._runs[run_id].fire_at
                for _, run_id in entries
                if self._runs[run_id].status is RunStatus.QUEUED
            ]
        return min(fires, default=None)

    def record_reconciliation(self, report: ReconcilerReport) -> None:
        at = to_second(report.at)
        with self.lock:
            self._reconciliations[at] = ReconcilerReport(at, dict(report.values))

    def recent_reconciliations(self, limit: int) -> list[ReconcilerReport]:
        with self.lock:
            newest = sorted(self._reconciliations, reverse=True)[:limit]
            return [self._reconciliations[at] for at in newest]
