"""The API's shapes of jobs: a job as answered, its patch, listings, previews, load and history; a trigger."""

from __future__ import annotations

import datetime as dt
import json
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from duetime.api.previews import ExcludedTime, Preview, UpcomingRun
from duetime.api.schema_base import Out, no_defaults
from duetime.domain.dst import DstEffect, DstPolicy
from duetime.domain.job_history import JobChange
from duetime.domain.job_keys import etag_of
from duetime.domain.labels import Labels
from duetime.domain.models import (
    JOB_KEY_PATTERN,
    CatchupWindowSeconds,
    EndAt,
    Exclusion,
    JitterSeconds,
    Job,
    JobName,
    JobSpec,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
    Run,
    RunStatus,
    Schedule,
    StartAt,
    Target,
    TimeoutSeconds,
)


class JobPatch(BaseModel):
    """Fields to change; nested objects (schedule, dst, exclude, target, retry) are replaced whole. Only
    start_at and end_at (no bound), catchup_window_seconds (the installation's default), dst (Vixie cron's
    rule) and exclude (no excluded dates) take null; the rest are left out to keep them."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=no_defaults)

    name: JobName | SkipJsonSchema[None] = None
    key: Annotated[str, Field(max_length=129, pattern=JOB_KEY_PATTERN)] | SkipJsonSchema[None] = Field(
        default=None, description="set the job's key, if it has none (a key never changes: 422)"
    )
    schedule: Schedule | SkipJsonSchema[None] = None
    dst: DstPolicy | None = None
    exclude: Exclusion | None = None
    target: Target | SkipJsonSchema[None] = None
    jitter_seconds: JitterSeconds | SkipJsonSchema[None] = None
    exact: bool | SkipJsonSchema[None] = None
    misfire: MisfirePolicy | SkipJsonSchema[None] = None
    catchup_window_seconds: CatchupWindowSeconds | None = None
    overlap: OverlapPolicy | SkipJsonSchema[None] = None
    retry: RetryPolicy | SkipJsonSchema[None] = None
    timeout_seconds: TimeoutSeconds | SkipJsonSchema[None] = None
    start_at: StartAt | None = None
    end_at: EndAt | None = None
    paused: bool | SkipJsonSchema[None] = None
    labels: Labels | SkipJsonSchema[None] = None


class RunSummary(Out):
    run_id: str
    status: RunStatus
    scheduled_at: datetime
    finished_at: datetime | None

    @classmethod
    def of(cls, run: Run) -> RunSummary:
        return cls(
            run_id=run.run_id, status=run.status, scheduled_at=run.nominal_at, finished_at=run.finished_at
        )


class JobOut(JobSpec):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    next_run_at: datetime | None = Field(description="when the next run fires (nominal + jitter)")
    next_nominal_at: datetime | None = Field(description="the next scheduled time the run id will carry")
    last_scheduled_at: datetime | None
    missing_since: datetime | None = Field(
        default=None,
        description="success_deadline_seconds: the nominal time of the first scheduled time missed since the "
        "job last recovered (a `missed` alert was raised for it); null while every watched time is met",
    )
    last_run: RunSummary | None = Field(
        default=None,
        description="the job's latest run (by scheduled time), when asked for "
        "(`GET /v1/jobs?last_run=true`); null otherwise, or before its first run",
    )
    created_at: datetime
    updated_at: datetime
    etag: str = Field(
        description="the job's ETag (also the `ETag` header of a single job's answer): it changes with every "
        "edit of the job and with nothing else; send it as `If-Match` to change or delete the job only if "
        "nobody did since (412 otherwise)"
    )

    @classmethod
    def of(cls, job: Job, missing_since: datetime | None = None, last_run: Run | None = None) -> JobOut:
        """The job as answers show it; header values and URL secrets are write-only (``JobSpec.redacted``)."""
        spec = job.redacted().model_dump(include=set(JobSpec.model_fields))
        scheduled = not job.paused  # a paused job keeps its place but has no next run
        return cls(
            **spec,
            id=job.id,
            next_run_at=job.state.next_fire_at if scheduled else None,
            next_nominal_at=job.state.next_nominal_at if scheduled else None,
            last_scheduled_at=job.state.last_scheduled_at,
            missing_since=missing_since,
            last_run=RunSummary.of(last_run) if last_run is not None else None,
            created_at=job.created_at,
            updated_at=job.updated_at,
            etag=etag_of(job),
        )


MAX_TRIGGER_BODY = 64 * 1024  # as a target's stored body (``HttpTarget.body``)


class TriggerIn(BaseModel):
    """``POST /v1/jobs/{id}/trigger``'s optional body: what this one run sends instead of the job's body."""

    model_config = ConfigDict(extra="forbid")

    body: Any = Field(
        default=None,
        description="The request body of this run only (the job's stored target is not changed). A string "
        "is sent as it is; any other JSON value (object, array, number, true/false) is sent as its compact "
        "JSON text. Left out or null: the job's own body. At most 64 KiB once encoded (longer: 422 naming "
        "`body`). For an AWS target it is the run's message (sqs, sns), or its payload (lambda), input "
        "(stepfunctions) or detail (eventbridge: a JSON object), as the JSON the text holds, else as the "
        "text.",
    )

    @field_validator("body")
    @classmethod
    def _as_text(cls, value: Any) -> str | None:
        if value is None:
            return None
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        if len(text.encode()) > MAX_TRIGGER_BODY:
            raise ValueError(f"body is longer than {MAX_TRIGGER_BODY} bytes once encoded")
        return text


class JobList(Out):
    jobs: list[JobOut]
    next_cursor: str | None


class PreviewRun(Out):
    nominal_at: datetime
    fire_at: datetime
    dst_shifted: bool = Field(
        description="moved off its wall-clock time by a daylight-saving rule: true exactly when "
        "`dst_effect` is `moved`"
    )
    dst_effect: DstEffect | None = Field(
        description="what daylight saving did to this run under the job's `dst` policy: `moved` (it stands "
        "for a wall time spring-forward skipped, run at the first valid minute after the gap), `doubled` "
        "(its wall time repeats at fall-back and runs at both occurrences; both runs are marked), "
        "`first_only` / `last_only` (its wall time repeats and this occurrence is its only run); null: none"
    )

    rolled_from: list[dt.date] = Field(
        default_factory=list,
        description="the excluded dates (local to the cron's zone) whose time rolled onto this run "
        "(`exclude.on_excluded` next_business_day or previous_business_day); empty: none",
    )

    @classmethod
    def of(cls, upcoming: UpcomingRun) -> PreviewRun:
        return cls(
            nominal_at=upcoming.nominal_at,
            fire_at=upcoming.fire_at,
            dst_shifted=upcoming.dst_shifted,
            dst_effect=upcoming.dst_effect,
            rolled_from=list(upcoming.rolled_from),
        )


class ExcludedTimeOut(Out):
    scheduled_at: datetime = Field(description="the cron's own time on the excluded date")
    date: dt.date = Field(description="the excluded date, local to the cron's zone")
    calendars: list[str] = Field(description="the job's calendars that hold the date")
    holiday: str | None = Field(
        description="the date's name in the calendar (a holiday's, an event's), if any"
    )
    rolled_to: datetime | None = Field(description="the run the time rolled to; null: skipped")
    runs_at: list[datetime] = Field(
        description="every run the time became: empty when skipped; under `rolled: each`, the second it was "
        "spread to; two under the DST overlap policy `both`"
    )

    @classmethod
    def of(cls, time: ExcludedTime) -> ExcludedTimeOut:
        return cls(
            scheduled_at=time.scheduled_at,
            date=time.day,
            calendars=list(time.calendars),
            holiday=time.holiday,
            rolled_to=time.rolled_to,
            runs_at=list(time.runs_at),
        )


class SkippedWallTime(Out):
    wall_time: str = Field(
        description="the local wall time, without offset (it has none: the clock jumped over it), e.g. "
        "2026-03-08T02:30:00"
    )


class PreviewOut(Out):
    job_id: str
    runs: list[PreviewRun]
    skipped: list[SkippedWallTime] = Field(
        description="wall times of the schedule that spring-forward skipped between now and the last run "
        "listed and that get no run (`dst.gap` `skip`, the rule of hourly crons): not runs, so not in "
        "`runs`; in time order"
    )
    excluded: list[ExcludedTimeOut] = Field(
        default_factory=list,
        description="the cron's times on dates its calendars exclude (`exclude`), up to the last run listed: "
        "each skipped or rolled to a run; in time order",
    )

    @classmethod
    def of(cls, job_id: str, preview: Preview) -> PreviewOut:
        return cls(
            job_id=job_id,
            runs=[PreviewRun.of(run) for run in preview.runs],
            skipped=[SkippedWallTime(wall_time=naive.isoformat()) for naive in preview.skipped],
            excluded=[ExcludedTimeOut.of(time) for time in preview.excluded],
        )


class LoadMinute(Out):
    minute: str
    runs: int


class LoadOut(Out):
    window_start: datetime
    window_end: datetime
    total: int
    minutes: list[LoadMinute]


class JobChangeOut(Out):
    at: datetime
    action: str = Field(description="create, update, pause, resume or delete")
    token_id: str = Field(description="the id of the token that made the change (tok_...), never the token")
    fields: dict[str, dict[str, Any]] = Field(
        description='each changed field: {"from": old, "to": new} (header values redacted; a value longer '
        "than 512 characters of JSON is shown by its size)"
    )

    @classmethod
    def of(cls, change: JobChange) -> JobChangeOut:
        return cls(at=change.at, action=change.action, token_id=change.actor, fields=change.fields)


class JobHistory(Out):
    changes: list[JobChangeOut]
    next_cursor: str | None
