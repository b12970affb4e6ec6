"""Jobs for the tests that run on the in-memory twin as well as on DynamoDB (``adapters.memory``): built
with their schedule state as a store would hold it, so a test controls the fire time to the second."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.domain.ids import new_job_id
from duetime.domain.models import Job

T0 = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def a_job(fire_at: datetime, job_id: str | None = None, team: str = "team-a", **spec: Any) -> Job:
    """An exact 1-minute job (2 attempts, 5 s backoff) whose next run fires at ``fire_at``, at version 0."""
    return Job.model_validate(
        {
            "name": "twin",
            "schedule": {"rate": "1 minute"},
            "target": {"url": "https://example.com/hook"},
            "exact": True,
            "retry": {"max_attempts": 2, "backoff_seconds": [5]},
            **spec,
            "id": job_id or new_job_id(),
            "team": team,
            "created_at": fire_at - timedelta(minutes=10),
            "updated_at": fire_at - timedelta(minutes=10),
            "state": {"next_nominal_at": fire_at, "next_fire_at": fire_at, "version": 0},
        }
    )
