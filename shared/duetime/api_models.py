"""The API's response shapes (requests are ``JobSpec``). Kept apart so the OpenAPI document is stable."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from duetime.models import (
    AtSchedule,
    CronSchedule,
    HttpTarget,
    Job,
    JobSpec,
    MisfirePolicy,
    RateSchedule,
    RetryPolicy,
    Run,
    RunResult,
    RunStatus,
)
from duetime.service import UpcomingRun


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorDetail(Out):
    code: str
    message: str
    field: str | None = None


class ErrorOut(Out):
    error: ErrorDetail


class JobPatch(BaseModel):
    """Fields to change; nested objects (schedule, target, retry) are replaced whole."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    schedule: CronSchedule | RateSchedule | AtSchedule | None = None
    target: HttpTarget | None = None
    jitter_seconds: int | None = Field(default=None, ge=0, le=3600)
    exact: bool | None = None
    misfire: MisfirePolicy | None = None
    retry: RetryPolicy | None = None
    timeout_seconds: int | None = Field(default=None, ge=1, le=600)
    start_at: datetime | None = None
    end_at: datetime | None = None
    paused: bool | None = None


class JobOut(JobSpec):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    next_run_at: datetime | None = Field(description="when the next run fires (nominal + jitter)")
    next_nominal_at: datetime | None = Field(description="the next scheduled time the run id will carry")
    last_scheduled_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, job: Job) -> JobOut:
        spec = job.model_dump(include=set(JobSpec.model_fields))
        scheduled = not job.paused  # a paused job keeps its place but has no next run
        return cls(
            **spec,
            id=job.id,
            next_run_at=job.state.next_fire_at if scheduled else None,
            next_nominal_at=job.state.next_nominal_at if scheduled else None,
            last_scheduled_at=job.state.last_scheduled_at,
            created_at=job.created_at,
            updated_at=job.updated_at,
        )


class JobList(Out):
    jobs: list[JobOut]
    next_cursor: str | None


class RunOut(Out):
    run_id: str
    job_id: str
    status: RunStatus
    attempt: int
    max_attempts: int
    scheduled_at: datetime = Field(description="the nominal time (in the run id)")
    fire_at: datetime
    queue_deadline: datetime | None
    lease_expires_at: datetime | None
    retry_at: datetime | None
    result: RunResult | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime

    @classmethod
    def of(cls, run: Run) -> RunOut:
        data: dict[str, Any] = run.model_dump(
            include={
                "run_id",
                "job_id",
                "status",
                "attempt",
                "max_attempts",
                "fire_at",
                "queue_deadline",
                "lease_expires_at",
                "retry_at",
                "result",
                "created_at",
                "started_at",
                "finished_at",
                "updated_at",
            }
        )
        return cls(**data, scheduled_at=run.nominal_at)


class RunList(Out):
    runs: list[RunOut]
    next_cursor: str | None


class PreviewRun(Out):
    nominal_at: datetime
    fire_at: datetime
    dst_shifted: bool = Field(description="moved off its wall-clock time by a daylight-saving rule")

    @classmethod
    def of(cls, upcoming: UpcomingRun) -> PreviewRun:
        return cls(nominal_at=upcoming.nominal_at, fire_at=upcoming.fire_at, dst_shifted=upcoming.dst_shifted)


class PreviewOut(Out):
    job_id: str
    runs: list[PreviewRun]


class LoadMinute(Out):
    minute: str
    runs: int


class LoadOut(Out):
    window_start: datetime
    window_end: datetime
    total: int
    minutes: list[LoadMinute]


class Health(Out):
    status: str
    version: str
