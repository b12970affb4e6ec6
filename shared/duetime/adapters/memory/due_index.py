"""The twin's jobs table as rows with their due-index keys, the index kept sorted per bucket.

A row is a job as stored with its ``due`` GSI keys (``duetime.domain.due_index``), or none while
it is not scheduled or paused. ``DueIndexedJobs`` keeps each bucket's keys sorted as rows are written, so
a Query page of one bucket (``rows_between``) is a bisection, not a scan of every job (the midnight
simulation's 500,000 jobs are read a page at a time).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from duetime.domain.due_index import due_bucket, due_key
from duetime.domain.models import Job


@dataclass(frozen=True)
class JobRow:
    job: Job
    bucket: str | None  # the due index's partition key, "<partition:02d>#<minute>"; None: not due
    key: str | None  # the due index's sort key, "<fire time>#<job id>"
    # Set: the row's payload cannot be read (this error, as ``ports.unreadable_error`` names it); its due
    # keys are those ``job`` gives (``MemoryStore.put_unreadable_job``, the twin of a corrupt item).
    unreadable: str | None = None


def job_row(job: Job, written_at: datetime, unreadable: str | None = None) -> JobRow:
    """``job``'s row as a write at ``written_at`` leaves it (its due bucket depends on the write's time)."""
    fire_at = job.state.next_fire_at
    if fire_at is None or job.paused:
        return JobRow(job, None, None, unreadable)
    return JobRow(job, due_bucket(job.id, fire_at, written_at), due_key(job.id, fire_at), unreadable)


@dataclass
class _Bucket:
    """One due-index partition key's rows, by sort key, with the keys sorted."""

    keys: list[str] = field(default_factory=list)
    rows: dict[str, JobRow] = field(default_factory=dict)


class DueIndexedJobs(dict[str, JobRow]):
    """The jobs table by job id, with its due index kept sorted per bucket as rows are set and deleted
    (with ``[]`` and ``del``: the dict's other ways of changing it would leave the index behind)."""

    def __init__(self) -> None:
        super().__init__()
        self._buckets: dict[str, _Bucket] = defaultdict(_Bucket)

    def __setitem__(self, job_id: str, row: JobRow) -> None:
        self._unindex(job_id)
        if row.bucket is not None and row.key is not None:
            bucket = self._buckets[row.bucket]
            bisect.insort(bucket.keys, row.key)
            bucket.rows[row.key] = row
        super().__setitem__(job_id, row)

    def __delitem__(self, job_id: str) -> None:
        self._unindex(job_id)
        super().__delitem__(job_id)

    def _unindex(self, job_id: str) -> None:
        old = self.get(job_id)
        if old is not None and old.bucket is not None and old.key is not None:
            bucket = self._buckets[old.bucket]
            del bucket.keys[bisect.bisect_left(bucket.keys, old.key)]
            del bucket.rows[old.key]

    def rows_between(self, bucket: str, low: str, high: str, limit: int) -> list[JobRow]:
        """Up to ``limit`` rows of ``bucket`` with ``low <= key <= high``, in key order."""
        rows = self._buckets.get(bucket)
        if rows is None:
            return []
        start = bisect.bisect_left(rows.keys, low)
        end = min(bisect.bisect_right(rows.keys, high), start + limit)
        return [rows.rows[key] for key in rows.keys[start:end]]

    def count(self, bucket: str) -> int:
        """How many rows ``bucket`` holds."""
        rows = self._buckets.get(bucket)
        return 0 if rows is None else len(rows.keys)

    def bucket_counts(self) -> dict[tuple[int, str], int]:
        """How many rows each (partition, minute bucket) holds, over the whole index."""
        counts = {}
        for key, rows in self._buckets.items():
            if rows.keys:
                partition, bucket = key.split("#", 1)
                counts[(int(partition), bucket)] = len(rows.keys)
        return counts
