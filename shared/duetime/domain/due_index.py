"""The due index's keys: the bucket (partition of 64 and minute) and the sort key a job's due time is filed
under, so that "what is due now" is a range read of one bucket. DynamoDB's ``due`` index and the in-memory
twin file rows the same way (``DueRow.key`` is the sort key, the cursor of ``JobStore.due_rows``)."""

from __future__ import annotations

from datetime import datetime

from duetime.domain.ids import partition_of
from duetime.domain.timeutil import iso_z, minute_bucket


def due_bucket(job_id: str, fire_at: datetime, written_at: datetime) -> str:
    """The due-index partition key. A row is never filed in a bucket older than the minute it is
    written in, so buckets behind the low-water mark stay empty (see ``poller``)."""
    return f"{partition_of(job_id):02d}#{minute_bucket(max(fire_at, written_at))}"


def due_key(job_id: str, fire_at: datetime) -> str:
    return f"{iso_z(fire_at)}#{job_id}"
