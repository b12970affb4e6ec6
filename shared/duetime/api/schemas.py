"""The API's response shapes (requests are ``JobSpec``). Kept apart so the OpenAPI document is stable."""

from __future__ import annotations

import datetime as dt
import json
import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from duetime.api.fires import MAX_AUDIT_FIRES_PER_JOB, MISSES_LISTED, AuditPage
from duetime.api.previews import ExcludedTime, Preview, UpcomingRun
from duetime.domain.aws_targets import ROLE_ARN_PATTERN, ROLE_NAME_PREFIX
from duetime.domain.dst import DstEffect, DstPolicy
from duetime.domain.fire_ledger import Fire, FireLabel, Ledger
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
    RunResult,
    RunStatus,
    Schedule,
    StartAt,
    Target,
    Team,
    TimeoutSeconds,
)
from duetime.domain.signing import JobSigningKey
from duetime.domain.stored_format import ReadsStoredTolerantly
from duetime.domain.tokens import ApiToken, TokenScope


class Out(ReadsStoredTolerantly):
    """An answer. The API writes exactly its fields; a client reading an answer (``duetime.client``, context
    ``STORED``) ignores a field it does not know, which a later release of the server may add."""

    model_config = ConfigDict(extra="forbid")


class ErrorDetail(Out):
    code: str
    message: str
    field: str | None = None


class ErrorOut(Out):
    error: ErrorDetail


def _no_defaults(schema: dict[str, Any]) -> None:
    """A field left out of a PATCH is left alone: the document shows no default for it."""
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for field in properties.values():
            if isinstance(field, dict):
                field.pop("default", None)


class JobPatch(BaseModel):
    """Fields to change; nested objects (schedule, dst, exclude, target, retry) are replaced whole. Only
    start_at and end_at (no bound), catchup_window_seconds (the installation's default), dst (Vixie cron's
    rule) and exclude (no excluded dates) take null; the rest are left out to keep them."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_no_defaults)

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


class BackfillOut(Out):
    runs: int = Field(description="runs created; times that already had a run are left alone and not counted")


class Health(Out):
    status: str
    version: str = Field(description="duetime's version (semantic versioning)")
    commit: str = Field(
        description="the commit it was built from: a git short sha, -dirty with uncommitted changes, unknown"
    )


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


class TeamOut(Out):
    team_id: str
    name: str
    max_concurrency: int = Field(description="the cap on your runs at once")
    exact_quota: int = Field(description="how many exact-time jobs you may have")
    exact_jobs: int = Field(description="exact-time jobs you have")
    max_jobs: int = Field(description="how many jobs you may have")
    jobs: int = Field(description="jobs you have")
    runs_per_minute: int = Field(
        description="how many runs your triggers and backfills may create together in a minute"
    )
    aws_role_arn: str | None = Field(
        description="the IAM role your AWS targets are called under (`PUT /v1/team/aws-role`); null: none"
    )
    aws_external_id: str | None = Field(
        description="the external id duetime sends when it assumes your roles: their trust policy must "
        "require it (`sts:ExternalId`). Assigned by duetime; null until your first role is registered, for "
        "a team created before AWS targets"
    )

    @classmethod
    def of(cls, team: Team, jobs: int, exact_jobs: int) -> TeamOut:
        return cls(
            team_id=team.team_id,
            name=team.name,
            max_concurrency=team.max_concurrency,
            exact_quota=team.exact_quota,
            exact_jobs=exact_jobs,
            max_jobs=team.max_jobs,
            jobs=jobs,
            runs_per_minute=team.runs_per_minute,
            aws_role_arn=team.aws_role_arn,
            aws_external_id=team.aws_external_id,
        )


class SigningKeyOut(Out):
    key_id: str = Field(description="the id of the team's signing secret it is derived from (s1, s2, ...)")
    secret: str = Field(
        description="`whsec_<base64 key>`, as Standard Webhooks libraries take it: `Webhook(secret).verify("
        "body, headers)`"
    )
    until: datetime | None = Field(
        description="when it stops signing: the end of a rotated-out secret's overlap; null for the current "
        "key"
    )

    @classmethod
    def of(cls, key: JobSigningKey) -> SigningKeyOut:
        return cls(key_id=key.key_id, secret=key.secret, until=key.until)


class SigningKeysOut(Out):
    job_id: str
    keys: list[SigningKeyOut] = Field(
        description="the keys the job's calls are signed with now, the current one first; during a "
        "rotation's overlap also the rotated-out one (`webhook-signature` holds one `v1,...` per key). Empty "
        "when the team has no signing secret"
    )


class AwsRoleIn(BaseModel):
    """``PUT /v1/team/aws-role``: the role the team's AWS targets are called under."""

    model_config = ConfigDict(extra="forbid")

    role_arn: str = Field(
        pattern=ROLE_ARN_PATTERN,
        description=f"an IAM role named `{ROLE_NAME_PREFIX}...` (no path), in any account, whose trust "
        "policy lets duetime's worker role assume it with your team's external id "
        "(docs/guide/targets.md, AWS targets)",
    )
    external_id: SkipJsonSchema[None] = Field(default=None, exclude=True)

    @field_validator("role_arn", mode="before")
    @classmethod
    def _role_shape(cls, value: Any) -> Any:
        if isinstance(value, str) and not re.fullmatch(ROLE_ARN_PATTERN, value):
            raise ValueError(f"must look like arn:aws:iam::<account>:role/{ROLE_NAME_PREFIX}<name> (no path)")
        return value

    @field_validator("external_id", mode="before")
    @classmethod
    def _not_yours(cls, value: Any) -> Any:
        raise ValueError("the external id is assigned by duetime (GET /v1/team shows it); send role_arn only")


class TokenOut(Out):
    """What duetime keeps of one of your tokens: never the token itself."""

    token_id: str = Field(description="its id (tok_...): what job histories and the audit trail name it by")
    name: str
    scope: TokenScope
    created_at: datetime | None = Field(description="null for a token issued before tokens had names")
    created_by: str = Field(description="the id of the token that issued it, or the operator (cli:...)")
    in_use: bool = Field(description="true for the token this request came with")

    @classmethod
    def of(cls, token: ApiToken, current: ApiToken) -> TokenOut:
        return cls(
            token_id=token.token_id,
            name=token.name,
            scope=token.scope,
            created_at=token.created_at,
            created_by=token.created_by,
            in_use=token.token_hash == current.token_hash,
        )


class TokenList(Out):
    tokens: list[TokenOut]


class TokenIssued(TokenOut):
    token: str = Field(description="the token, shown this once: duetime keeps only its SHA-256")
