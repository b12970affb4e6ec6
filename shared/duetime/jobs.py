"""Registering jobs: validate, schedule from now, write once."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from duetime.claim_plan import initial_state
from duetime.ids import new_job_id, partition_of
from duetime.models import Job, JobSpec
from duetime.ports import JobStore
from duetime.timeutil import ceil_seconds, minute_bucket


def create_job(
    store: JobStore, team: str, spec: JobSpec | dict[str, Any], now: datetime, job_id: str | None = None
) -> Job:
    """Validate ``spec`` (raises ``pydantic.ValidationError`` naming the field; nothing is written),
    compute its first due time strictly after ``now`` and store it."""
    if not isinstance(spec, JobSpec):
        spec = JobSpec.model_validate(spec, context={"now": now})
    stamp = ceil_seconds(now)
    job = Job(**spec.model_dump(), id=job_id or new_job_id(), team=team, created_at=stamp, updated_at=stamp)
    job = job.model_copy(update={"state": initial_state(job, stamp)})
    store.ensure_low_water_mark(partition_of(job.id), minute_bucket(stamp))
    store.put_new_job(job)
    return job
