"""A run: one per job and nominal time, its status and its result.

A part of ``duetime.domain.models`` (which exports every name of these modules).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import ConfigDict, Field

from duetime.domain.http_target import Target
from duetime.domain.policies import RetryPolicy
from duetime.domain.stored_format import ReadsStoredTolerantly


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    RETRY_WAIT = "retry_wait"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DEAD = "dead"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"  # a due time that got no call (a misfire, a disabled team): recorded, never queued

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.DEAD, RunStatus.CANCELLED, RunStatus.SKIPPED}
)


class RunResult(ReadsStoredTolerantly):
    model_config = ConfigDict(extra="forbid")

    status_code: int | None = None
    duration_ms: int
    error: str | None = None
    body: str | None = None  # truncated
    retryable: bool = False


class Run(ReadsStoredTolerantly):
    """One execution of a job for one nominal time. The run id is the target's idempotency key."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    job_id: str
    team: str
    partition: int
    nominal_at: datetime
    fire_at: datetime
    status: RunStatus
    attempt: int = 1
    max_attempts: int
    owner: str | None = None
    lease_expires_at: datetime | None = None
    queue_deadline: datetime | None = None
    retry_at: datetime | None = None
    # buffer_one: the run this one waits for (the job's previous run); a worker starts it only once that run
    # has finished, and gives its lease back until then (``Worker``).
    waits_for: str | None = None
    # A scheduled run of a job with ``success_deadline_seconds``: the instant by which it must have succeeded
    # (nominal + deadline), watched by ``duetime.execution.deadlines``; None: not watched (manual runs,
    # backfills).
    success_by: datetime | None = None
    target: Target
    timeout_seconds: int
    retry: RetryPolicy
    result: RunResult | None = None
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime
    expires_at_epoch: int  # DynamoDB TTL: 30 days after creation
    # Whether the run has an entry of its own in the store's reap index as last read (a store that covers the
    # runs of a claim by one reap ticket leaves their rows without one): its result then leaves the index.
    in_reap_index: bool = Field(default=True, exclude=True)
