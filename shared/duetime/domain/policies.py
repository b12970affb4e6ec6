"""What a job does when runs are missed, overlap or fail: misfire, overlap and retry policies.

A part of ``duetime.domain.models`` (which exports every name of these modules).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from duetime.domain.model_base import Strict

MAX_SQS_DELAY_SECONDS = 900  # a retry's backoff is carried by an SQS message delay


class MisfirePolicy(StrEnum):
    """What to do with runs whose fire time passed more than the grace ago (scheduler down, paused poller)."""

    RUN_ONCE = "run_once"  # one run, for the latest missed time
    RUN_ALL = "run_all"  # one run per missed time (capped)
    SKIP = "skip"  # none; continue with the next future time


class OverlapPolicy(StrEnum):
    """What a scheduled time does while the job's previous scheduled run is unfinished (queued, running or
    waiting to retry). Decided by the claim from the job's active run (``JobState.active_run``)."""

    ALLOW = "allow"  # it runs anyway: runs of one job may overlap
    SKIP = "skip"  # it gets a run with status skipped (recorded, never called)
    BUFFER_ONE = "buffer_one"  # it waits for the previous run to end; a time while one already waits: skipped


class RetryPolicy(Strict):
    max_attempts: int = Field(default=4, ge=1, le=20)
    backoff_seconds: list[Annotated[int, Field(ge=0, le=MAX_SQS_DELAY_SECONDS)]] = Field(
        default_factory=lambda: [10, 30, 120], min_length=1, max_length=20
    )

    def backoff_for(self, failed_attempt: int) -> int:
        """Backoff after attempt ``failed_attempt`` (1-based); the last value repeats."""
        return self.backoff_seconds[min(failed_attempt, len(self.backoff_seconds)) - 1]
