"""The twin's success-deadline watches and missing flags (``ports.DeadlineStore``), each write under the
condition ``adapters/dynamodb/deadline_watches.py`` names. Deadlines compare to the second, as DynamoDB
compares ``iso_z`` strings."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from duetime.adapters.memory.stored import Tables, to_second
from duetime.domain.models import Run
from duetime.ports import DeadlineWatch


class MemoryDeadlines(Tables):
    """``DeadlineStore`` in memory (mixed into ``MemoryStore``)."""

    _watches: dict[str, DeadlineWatch]  # run id -> its watch
    _missing: dict[str, datetime]  # job id -> missing since

    def _write_watches(self, runs: Sequence[Run]) -> int:
        """The watches of the watched ``runs`` (WATCH_IS_NEW); how many were asked for."""
        watches = [watch for run in runs if (watch := DeadlineWatch.of(run)) is not None]
        with self.lock:
            for watch in watches:
                stored = DeadlineWatch(
                    watch.run_id,
                    watch.job_id,
                    watch.partition,
                    to_second(watch.nominal_at),
                    to_second(watch.deadline_at),
                )
                self._watches.setdefault(watch.run_id, stored)
        return len(watches)

    def due_watches(self, partition: int, now: datetime, limit: int) -> list[DeadlineWatch]:
        with self.lock:
            cutoff = to_second(now)
            due = [w for w in self._watches.values() if w.partition == partition and w.deadline_at < cutoff]
        return sorted(due, key=lambda w: (w.deadline_at, w.run_id))[:limit]

    def drop_watch(self, watch: DeadlineWatch) -> bool:
        with self.lock:  # WATCH_EXISTS
            return self._watches.pop(watch.run_id, None) is not None

    def missing_since(self, job_id: str) -> datetime | None:
        with self.lock:
            return self._missing.get(job_id)

    def missing_flags(self, job_ids: Sequence[str]) -> dict[str, datetime]:
        with self.lock:
            return {job_id: self._missing[job_id] for job_id in job_ids if job_id in self._missing}

    def flag_missing(self, job_id: str, since: datetime) -> bool:
        with self.lock:  # JOB_NOT_MISSING
            if job_id in self._missing:
                return False
            self._missing[job_id] = to_second(since)
            return True

    def clear_missing(self, job_id: str, since: datetime) -> bool:
        with self.lock:  # JOB_MISSING_AS_READ
            if self._missing.get(job_id) != to_second(since):
                return False
            del self._missing[job_id]
            return True
