"""Routes of a team's jobs: create, read (by id and by key), change, pause, delete; trigger, backfill, a
job's runs, previews, history, fires and signing keys; the audit of fires."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query

from duetime.api.access import needs
from duetime.api.fires import AUDIT_JOBS_PER_PAGE, MAX_AUDIT_JOBS_PER_PAGE
from duetime.api.params import Cursor, JobId
from duetime.api.request_context import actor, caller, check_rate, check_scope, fire_ledger, service, team
from duetime.api.responses import JSON, responses
from duetime.api.routes import new_router
from duetime.api.schemas import (
    AuditOut,
    BackfillOut,
    FiresOut,
    JobChangeOut,
    JobHistory,
    JobList,
    JobOut,
    JobPatch,
    PreviewOut,
    RunList,
    RunOut,
    SigningKeyOut,
    SigningKeysOut,
    TriggerIn,
)
from duetime.domain.errors import InvalidInput
from duetime.domain.fire_ledger import DEFAULT_LATE_AFTER_SECONDS, MAX_FIRES
from duetime.domain.job_keys import etag_of
from duetime.domain.labels import LABEL_FILTER_PATTERN
from duetime.domain.models import MAX_BACKFILL_RUNS, BackfillWindow, Job, JobSpec
from duetime.domain.tokens import TRIGGER_BODY_SCOPE, TokenScope

router = new_router()


def shown(job: Job) -> JobOut:
    """A job as answers show it, with its success-deadline flag."""
    return JobOut.of(job, service().missing_since([job]).get(job.id))


@router.post(
    "/v1/jobs",
    operation_id="createJob",
    tags=["jobs"],
    responses=responses(201, JobOut, 409, 429),
    security=needs(TokenScope.ADMIN),
)
def create_job(
    spec: Annotated[JobSpec, Body()],
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=255)] = None,
) -> Response[JobOut]:
    body = json.loads(router.current_event.body or "{}")  # re-validated with the clock (``at`` in the past)
    job = service().create_job(team(), body, idempotency_key, actor())
    return Response(status_code=201, content_type=JSON, body=shown(job))


@router.get(
    "/v1/jobs",
    operation_id="listJobs",
    tags=["jobs"],
    responses=responses(200, JobList),
    security=needs(TokenScope.READ),
    description="Your jobs, a page at a time. `label=key:value` lists those with that label; `q` those with "
    "a word of their name beginning with each word of `q` (case-insensitive; the first 16 words of a name "
    "count). Both together: both must hold. A filtered page may hold fewer than `limit` jobs while "
    "`next_cursor` says more may follow. `last_run=true` adds each job's latest run (`last_run`).",
)
def list_jobs(
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Cursor = None,
    label: Annotated[
        str | None,
        Query(max_length=127, pattern=LABEL_FILTER_PATTERN, description="key:value, e.g. env:prod"),
    ] = None,
    q: Annotated[str | None, Query(max_length=64, description="words the name's words begin with")] = None,
    last_run: Annotated[bool, Query(description="add each job's latest run")] = False,
) -> JobList:
    page = service().list_jobs(team(), limit, cursor, label, q)
    missing = service().missing_since(page.items)
    latest = service().last_runs(page.items) if last_run else {}
    jobs = [JobOut.of(j, missing.get(j.id), latest.get(j.id)) for j in page.items]
    return JobList(jobs=jobs, next_cursor=page.cursor)


IfMatch = Annotated[
    str | None,
    Header(
        alias="If-Match",
        max_length=512,
        description="the job's ETag as you read it (`etag`, or the `ETag` header): the write happens only if "
        "the job is still at it (412 otherwise); `*`: any existing job",
    ),
]


KeySegment = Annotated[str, Path(min_length=1, max_length=64)]


_BY_KEY = (
    "Jobs as code: a job is named by its `key`, one or two segments (`nightly-export` or "
    "`billing/nightly-export`)."
)


def _with_etag(job: Job, status: int = 200) -> Response[JobOut]:
    return Response(status_code=status, content_type=JSON, body=shown(job), headers={"ETag": etag_of(job)})


def _get_by_key(key: str) -> Response[JobOut]:
    return _with_etag(service().get_job(team(), service().job_id_by_key(team(), key)))


def _put_by_key(key: str, if_match: str | None) -> Response[JobOut]:
    body = json.loads(router.current_event.body or "{}")
    job, created = service().put_job_by_key(team(), key, body, if_match, actor())
    return _with_etag(job, 201 if created else 200)


def _delete_by_key(key: str, if_match: str | None) -> Response[Any]:
    service().delete_job(team(), service().job_id_by_key(team(), key), actor(), if_match)
    return Response(status_code=204, body="")


_GET_BY_KEY: dict[str, Any] = {
    "tags": ["jobs"],
    "responses": responses(200, JobOut, 404),
    "security": needs(TokenScope.READ),
    "description": f"{_BY_KEY} The job with the key, with its `ETag`.",
}


_PUT_BY_KEY: dict[str, Any] = {
    "tags": ["jobs"],
    "responses": {
        **responses(200, JobOut, 404, 409, 412),
        201: {"description": "Created", "content": {JSON: {"model": JobOut}}},
    },
    "security": needs(TokenScope.ADMIN),
    "description": f"{_BY_KEY} Create the job of the key (201), or replace it whole (200; a field left out "
    "takes its default; the same job again writes nothing). With `If-Match`, only if the job is still at "
    "that ETag (412 otherwise, also when no job has the key). The body's `key`, if sent, must be the path's.",
}


_DELETE_BY_KEY: dict[str, Any] = {
    "tags": ["jobs"],
    "responses": responses(204, None, 404, 409, 412),
    "security": needs(TokenScope.ADMIN),
    "description": f"{_BY_KEY} Delete the job with the key (with `If-Match`: only if it is still at that "
    "ETag).",
}


@router.get("/v1/jobs/by-key/<key>", operation_id="getJobByKey", **_GET_BY_KEY)
def get_job_by_key(key: KeySegment) -> Response[JobOut]:
    return _get_by_key(key)


@router.get("/v1/jobs/by-key/<area>/<key>", operation_id="getJobByAreaKey", **_GET_BY_KEY)
def get_job_by_area_key(area: KeySegment, key: KeySegment) -> Response[JobOut]:
    return _get_by_key(f"{area}/{key}")


@router.put("/v1/jobs/by-key/<key>", operation_id="putJobByKey", **_PUT_BY_KEY)
def put_job_by_key(
    key: KeySegment, spec: Annotated[JobSpec, Body()], if_match: IfMatch = None
) -> Response[JobOut]:
    return _put_by_key(key, if_match)


@router.put("/v1/jobs/by-key/<area>/<key>", operation_id="putJobByAreaKey", **_PUT_BY_KEY)
def put_job_by_area_key(
    area: KeySegment, key: KeySegment, spec: Annotated[JobSpec, Body()], if_match: IfMatch = None
) -> Response[JobOut]:
    return _put_by_key(f"{area}/{key}", if_match)


@router.delete("/v1/jobs/by-key/<key>", operation_id="deleteJobByKey", **_DELETE_BY_KEY)
def delete_job_by_key(key: KeySegment, if_match: IfMatch = None) -> Response[Any]:
    return _delete_by_key(key, if_match)


@router.delete("/v1/jobs/by-key/<area>/<key>", operation_id="deleteJobByAreaKey", **_DELETE_BY_KEY)
def delete_job_by_area_key(area: KeySegment, key: KeySegment, if_match: IfMatch = None) -> Response[Any]:
    return _delete_by_key(f"{area}/{key}", if_match)


@router.get(
    "/v1/jobs/<job_id>",
    operation_id="getJob",
    tags=["jobs"],
    responses=responses(200, JobOut, 404),
    security=needs(TokenScope.READ),
)
def get_job(job_id: JobId) -> Response[JobOut]:
    return _with_etag(service().get_job(team(), job_id))


@router.patch(
    "/v1/jobs/<job_id>",
    operation_id="updateJob",
    tags=["jobs"],
    responses=responses(200, JobOut, 404, 409, 412, 429),
    security=needs(TokenScope.ADMIN),
)
def patch_job(
    job_id: JobId, patch: Annotated[JobPatch, Body()], if_match: IfMatch = None
) -> Response[JobOut]:
    changes = json.loads(router.current_event.body or "{}")
    return _with_etag(service().update_job(team(), job_id, changes, actor(), if_match))


@router.delete(
    "/v1/jobs/<job_id>",
    operation_id="deleteJob",
    tags=["jobs"],
    responses=responses(204, None, 404, 409, 412),
    security=needs(TokenScope.ADMIN),
)
def delete_job(job_id: JobId, if_match: IfMatch = None) -> Response[Any]:
    service().delete_job(team(), job_id, actor(), if_match)
    return Response(status_code=204, body="")


@router.post(
    "/v1/jobs/<job_id>/pause",
    operation_id="pauseJob",
    tags=["jobs"],
    responses=responses(200, JobOut, 404, 409),
    security=needs(TokenScope.OPERATE),
)
def pause_job(job_id: JobId) -> JobOut:
    return shown(service().update_job(team(), job_id, {"paused": True}, actor()))


@router.post(
    "/v1/jobs/<job_id>/resume",
    operation_id="resumeJob",
    tags=["jobs"],
    responses=responses(200, JobOut, 404, 409),
    security=needs(TokenScope.OPERATE),
)
def resume_job(job_id: JobId) -> JobOut:
    return shown(service().update_job(team(), job_id, {"paused": False}, actor()))


@router.post(
    "/v1/jobs/<job_id>/trigger",
    operation_id="triggerJob",
    tags=["runs"],
    responses=responses(201, RunOut, 404, 409),
    security=needs(TokenScope.OPERATE),
    description="Run the job now, once, under a manual run id; its schedule is not touched. Without a body "
    "(or with `body` null) the run sends the job's own request. With a `body`, the run sends it instead: "
    "that changes what the job sends its target, under the job's headers and signature, so it needs an "
    "`admin` token (an `operate` token gets 403 naming `body`).",
)
def trigger_job(job_id: JobId, request: Annotated[TriggerIn | None, Body()] = None) -> Response[RunOut]:
    sent = json.loads(router.current_event.body or "null")  # re-read: powertools takes a list's first item
    if isinstance(sent, dict) and sent.get("body") is not None:  # this run's body in place of the job's
        check_scope(caller(), TRIGGER_BODY_SCOPE, "a trigger with a body of its own", "body")
    run = service().trigger(team(), job_id, sent)
    return Response(status_code=201, content_type=JSON, body=RunOut.of(run))


@router.post(
    "/v1/jobs/<job_id>/backfill",
    operation_id="backfillJob",
    tags=["runs"],
    responses=responses(202, BackfillOut, 404),
    security=needs(TokenScope.OPERATE),
    description="Runs for the job's past nominal times in [from, to): one per time its schedule names (cron "
    "in its zone, rate from its anchor, one-time `at`; within start_at and end_at), under the scheduled run "
    "id `<job id>@<nominal time>`. A time that already has a run keeps it and is not counted, so the same "
    "request again creates nothing. `to` must be after `from` and not later than now, and the window may "
    f"hold at most {MAX_BACKFILL_RUNS:,} times (else 422 naming `to`). The runs become due at a pace of "
    "max(2, max_concurrency // 2) a second, in time order (each message delayed to its run's time), so the "
    "team's other runs queue between them, not behind them. The job itself is not changed; a paused job may "
    "be backfilled.",
)
def backfill_job(job_id: JobId, window: Annotated[BackfillWindow, Body()]) -> Response[BackfillOut]:
    body = json.loads(router.current_event.body or "{}")  # re-validated with the clock (`to` in the future)
    runs = service().backfill(team(), job_id, body)
    return Response(status_code=202, content_type=JSON, body=BackfillOut(runs=runs))


@router.get(
    "/v1/jobs/<job_id>/runs",
    operation_id="listJobRuns",
    tags=["runs"],
    responses=responses(200, RunList, 404),
    security=needs(TokenScope.READ),
)
def list_runs(
    job_id: JobId,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Cursor = None,
) -> RunList:
    page = service().list_runs(team(), job_id, limit, cursor)
    return RunList(runs=[RunOut.of(r) for r in page.items], next_cursor=page.cursor)


@router.get(
    "/v1/jobs/<job_id>/preview",
    operation_id="previewJob",
    tags=["jobs"],
    responses=responses(200, PreviewOut, 404),
    security=needs(TokenScope.READ),
    description="The job's next `count` runs (nominal and fire times), each marked with what daylight "
    "saving did to it under the job's `dst` policy (`dst_effect`: moved, doubled, first_only, last_only; "
    "`dst_shifted` is the `moved` case). Wall times spring-forward skipped that get no run are not runs: "
    "they are listed apart, in `skipped`, up to the last run listed.",
)
def preview(job_id: JobId, count: Annotated[int, Query(ge=1, le=100)] = 10) -> PreviewOut:
    return PreviewOut.of(job_id, service().preview(team(), job_id, count))


@router.get(
    "/v1/jobs/<job_id>/history",
    operation_id="getJobHistory",
    tags=["jobs"],
    responses=responses(200, JobHistory, 404),
    security=needs(TokenScope.READ),
    description="What changed in the job, when, and by which token (its id, never the token), newest "
    "first, for 90 days; a deleted job's history stays readable until then.",
)
def job_history(
    job_id: JobId,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Cursor = None,
) -> JobHistory:
    page = service().job_history(team(), job_id, limit, cursor)
    return JobHistory(changes=[JobChangeOut.of(c) for c in page.items], next_cursor=page.cursor)


def _window_bound(value: str | None, name: str) -> datetime | None:
    """A window's end as the query gave it: an ISO-8601 instant with a UTC offset (a number, which pydantic
    would read as seconds since 1970, is not one); else 422 naming ``name``."""
    if value is None:
        return None
    try:
        instant = datetime.fromisoformat(value.upper())
    except ValueError:
        instant = None
    if instant is None or instant.tzinfo is None:
        raise InvalidInput(f"{name}: an ISO-8601 instant with a UTC offset, e.g. 2026-12-01T00:00:00Z", name)
    return instant


_INSTANT = r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})$"


FromQuery = Annotated[
    str | None,
    Query(
        alias="from",
        pattern=_INSTANT,
        json_schema_extra={"format": "date-time"},
        description="window start, with a UTC offset; default: 24 hours before `to`",
    ),
]


ToQuery = Annotated[
    str | None,
    Query(
        alias="to",
        pattern=_INSTANT,
        json_schema_extra={"format": "date-time"},
        description="window end (exclusive), with a UTC offset; default: now",
    ),
]


LateAfter = Annotated[
    int,
    Query(
        ge=0,
        le=86_400,
        description="a run that started more than this many seconds after its fire time is `late`",
    ),
]


@router.get(
    "/v1/jobs/<job_id>/fires",
    operation_id="getJobFires",
    tags=["runs"],
    responses=responses(200, FiresOut, 404),
    security=needs(TokenScope.READ),
    description="The fire ledger: every time the job should have fired in [from, to) (from its schedule as "
    "it stood then: its history of changes, zone, daylight-saving policy, calendars, jitter, start and end, "
    "pauses), each matched to what happened: `on_time`, `late`, `repeated`, `skipped` (with its reason), "
    "`missed` (with why, where known) or `pending`. Computed from the stored runs and the job's history, in "
    f"time order, at most `limit` (up to {MAX_FIRES:,}); `next_from` goes on. Runs are kept 30 days.",
)
def job_fires(
    job_id: JobId,
    start: FromQuery = None,
    end: ToQuery = None,
    late_after_seconds: LateAfter = DEFAULT_LATE_AFTER_SECONDS,
    limit: Annotated[int, Query(ge=1, le=MAX_FIRES)] = MAX_FIRES,
) -> FiresOut:
    window = _window_bound(start, "from"), _window_bound(end, "to")
    late_after = timedelta(seconds=late_after_seconds)
    return FiresOut.of(fire_ledger().fires(team(), job_id, *window, late_after, limit))


@router.get(
    "/v1/audit",
    operation_id="getAudit",
    tags=["runs"],
    responses=responses(200, AuditOut),
    security=needs(TokenScope.READ),
    description="The fire ledger across your jobs, a page of jobs at a time: every job's fires in [from, to) "
    "counted by label, and the jobs with a missed fire, each with its first misses. `next_cursor` goes on "
    "to the next page of jobs. A page costs one request of your API rate per job it may read (`limit`).",
)
def audit(
    start: FromQuery = None,
    end: ToQuery = None,
    late_after_seconds: LateAfter = DEFAULT_LATE_AFTER_SECONDS,
    limit: Annotated[int, Query(ge=1, le=MAX_AUDIT_JOBS_PER_PAGE)] = AUDIT_JOBS_PER_PAGE,
    cursor: Cursor = None,
) -> AuditOut:
    window = _window_bound(start, "from"), _window_bound(end, "to")
    for _ in range(limit - 1):
        check_rate(team(), "GET /v1/audit costs one request per job it reads: ")
    late_after = timedelta(seconds=late_after_seconds)
    return AuditOut.of(fire_ledger().audit(team(), *window, limit, cursor, late_after))


@router.get(
    "/v1/jobs/<job_id>/signing-key",
    operation_id="getJobSigningKeys",
    tags=["jobs"],
    responses=responses(200, SigningKeysOut, 404),
    security=needs(TokenScope.ADMIN),
    description="The keys the job's calls (and its webhook notifications) are signed with, for its target "
    "to verify the Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`) with "
    "any Standard Webhooks library. Each job has keys of its own, so a call to one job's target does not "
    "verify at another's. During a signing-secret rotation's overlap both keys are listed, each with when "
    "it stops signing.",
)
def job_signing_key(job_id: JobId) -> SigningKeysOut:
    keys = service().job_signing_keys(team(), job_id)
    return SigningKeysOut(job_id=job_id, keys=[SigningKeyOut.of(k) for k in keys])
