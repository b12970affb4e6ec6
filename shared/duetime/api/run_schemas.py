"""The API's shapes of runs: a run, listings, a backfill's answer, a job's fires and the audit of them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from duetime.api.fires import MAX_AUDIT_FIRES_PER_JOB, MISSES_LISTED, AuditPage
from duetime.api.schema_base import Out
from duetime.domain.fire_ledger import Fire, FireLabel, Ledger
from duetime.domain.models import (
    Run,
    RunResult,
    RunStatus,
)


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
    waits_for: str | None = Field(
        default=None,
        description="overlap buffer_one: the run this one starts after (it waits until that one ends)",
    )
    success_by: datetime | None = Field(
        default=None,
        description="success_deadline_seconds: the run must have succeeded by then (nominal + deadline), or "
        "a `missed` alert is raised for its time; null for runs not watched (manual runs, backfills)",
    )
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
                "waits_for",
                "success_by",
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


class BackfillOut(Out):
    runs: int = Field(description="runs created; times that already had a run are left alone and not counted")


class FireOut(Out):
    scheduled_at: datetime = Field(description="the nominal time the job should have fired for")
    fire_at: datetime = Field(description="when its run should start: the nominal time plus the job's jitter")
    label: FireLabel = Field(
        description="on_time, late (started more than `late_after_seconds` after `fire_at`), repeated (the "
        "target was called more than once under the run id), skipped (no call, for `reason`), missed (no run "
        "past the catch-up window, `reason` says why where known) or pending"
    )
    reason: str | None = Field(
        description="skipped: misfire, overlap, calendar, paused, team_disabled, dst, cancelled or other; "
        "missed: not_claimed, no_run_recorded, edited_before_claim, calendar_changed, or the status of a run "
        "that died before it started; else null"
    )
    detail: str = Field(description="what happened, in words")
    run_id: str = Field(description="the fire's run id (the target's idempotency key), run or not")
    status: RunStatus | None = Field(description="its run's status; null: no run")
    started_at: datetime | None
    late_seconds: float | None = Field(description="started_at - fire_at, for a run that started")
    attempts: int = Field(description="calls the target got")

    @classmethod
    def of(cls, fire: Fire) -> FireOut:
        return cls(
            scheduled_at=fire.nominal_at,
            fire_at=fire.fire_at,
            label=fire.label,
            reason=fire.reason,
            detail=fire.detail,
            run_id=fire.run_id,
            status=fire.status,
            started_at=fire.started_at,
            late_seconds=fire.late_seconds,
            attempts=fire.attempts,
        )


class FiresOut(Out):
    job_id: str
    window_start: datetime = Field(description="the window's start, after any cut `notes` explain")
    window_end: datetime
    counts: dict[str, int] = Field(description="fires listed, by label")
    fires: list[FireOut] = Field(description="in time order")
    next_from: datetime | None = Field(
        description="more fires follow the last listed: ask again with `from` set to this; null: none"
    )
    notes: list[str] = Field(description="why the window starts later than asked, if it does")

    @classmethod
    def of(cls, ledger: Ledger) -> FiresOut:
        return cls(
            job_id=ledger.job_id,
            window_start=ledger.start,
            window_end=ledger.end,
            counts=ledger.counts,
            fires=[FireOut.of(fire) for fire in ledger.fires],
            next_from=ledger.next_from,
            notes=ledger.notes,
        )


class JobAuditOut(Out):
    job_id: str
    name: str
    key: str | None
    labels: dict[str, str]
    counts: dict[str, int] = Field(description="the job's fires in the window, by label")
    missed: int = Field(
        description="its misses: fires `missed`, or `skipped` by the misfire policy (due while nothing "
        "claimed them, past the catch-up window); a pause, a calendar, an overlap or a disabled team are "
        "not misses"
    )
    misses: list[FireOut] = Field(description=f"its first {MISSES_LISTED} misses")
    complete: bool = Field(
        description="false: the job has more fires in the window than an audit reads "
        f"({MAX_AUDIT_FIRES_PER_JOB:,}); read them with GET /v1/jobs/{{id}}/fires"
    )


class AuditOut(Out):
    window_start: datetime
    window_end: datetime
    counts: dict[str, int] = Field(description="the fires of this page's jobs, by label")
    jobs_checked: int
    jobs_with_misses: list[JobAuditOut] = Field(description="this page's jobs with a miss (`missed`)")
    jobs: list[JobAuditOut] = Field(description="every job of this page, with its counts")
    next_cursor: str | None

    @classmethod
    def of(cls, page: AuditPage) -> AuditOut:
        jobs = [
            JobAuditOut(
                job_id=one.job.id,
                name=one.job.name,
                key=one.job.key,
                labels=dict(one.job.labels),
                counts=one.counts,
                missed=one.missed,
                misses=[FireOut.of(fire) for fire in one.misses],
                complete=one.complete,
            )
            for one in page.jobs
        ]
        return cls(
            window_start=page.start,
            window_end=page.end,
            counts=page.counts,
            jobs_checked=len(jobs),
            jobs_with_misses=[job for job in jobs if job.missed],
            jobs=jobs,
            next_cursor=page.cursor,
        )
