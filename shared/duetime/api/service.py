"""What the API does, apart from HTTP: jobs and runs of one team, with validation and isolation.

Another team's job or run answers exactly as a missing one (``NotFound``), so ids leak nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, cast

from pydantic import ValidationError

from duetime.api.calendars import CalendarService
from duetime.api.previews import Preview, preview_of
from duetime.api.team_admin import TeamAdmin, hash_token
from duetime.domain.aws_targets import AwsTarget, SqsTarget
from duetime.domain.catalog import (
    CalendarGone,
    IdempotencyMismatch,
    IdempotencyRecord,
    InvalidCursor,
    KeyTaken,
    Page,
)
from duetime.domain.catalog import QuotaExceeded as StoreQuotaExceeded
from duetime.domain.claim_plan import (
    DEFAULT_MISFIRE_GRACE,
    DEFAULT_QUEUE_DEADLINE,
    PlannedRun,
    initial_state,
    new_run,
    replanned_state,
)
from duetime.domain.clock import Clock
from duetime.domain.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    PreconditionFailed,
    QuotaExceeded,
    RateLimited,
    Unauthorized,
    from_validation_error,
)
from duetime.domain.ids import make_manual_run_id, new_job_id, partition_of
from duetime.domain.job_history import change
from duetime.domain.job_keys import etag_of, if_match_holds
from duetime.domain.labels import label_filter, query_words
from duetime.domain.models import (
    MAX_BACKFILL_RUNS,
    MAX_SQS_DELAY_SECONDS,
    BackfillWindow,
    HttpTarget,
    Job,
    JobSpec,
    Run,
    StoredSecretsWithheld,
    Target,
    Team,
    WebhookChannel,
)
from duetime.domain.run_budget import InMemoryRunBudget, RunBudget, Spend
from duetime.domain.schedule import (
    fire_time,
    first_nominal,
    next_nominal_after,
    nominals_between,
    rate_anchor,
)
from duetime.domain.signing import JobSigningKey, job_signing_keys
from duetime.domain.target_guard import TargetRefused, check_target_url
from duetime.domain.timeutil import ceil_seconds, minute_bucket, whole_seconds
from duetime.domain.tokens import ApiToken, Caller, TokenIn
from duetime.ports import Catalog, JobAndRunStore, RoleTrustProbe, RunMessage, RunQueue
from duetime.scheduling.calendar_days import CalendarDays
from duetime.scheduling.wake import GroupWaker

RESCHEDULE_FIELDS = {"schedule", "dst", "exclude", "start_at", "end_at", "jitter_seconds", "exact", "paused"}
MAX_CALENDAR_USERS = 10_000  # jobs a calendar change re-plans: a team's job quota's default
REPLAN_THREADS = 8  # jobs re-planned at once after a calendar change (a read and a transaction each)
MAX_LOAD_WINDOW = timedelta(hours=24)
# What GET /v1/load charges (``JobService.load``): one request of the team's API rate per this many jobs read
# and per this many fire times computed (a request itself pays for the first), and the most fire times one
# request may compute (a fire time of a cron costs about 0.15 ms of CPU: 50,000 stay well within 29 s).
LOAD_JOBS_PER_REQUEST = 100
LOAD_FIRE_TIMES_PER_REQUEST = 1_000
MAX_LOAD_FIRE_TIMES = 50_000
MAX_PREVIEW = 100
BACKFILL_SENDERS = 8  # threads sending a backfill's delay groups to the queue


class JobService:
    def __init__(
        self,
        catalog: Catalog,
        marks: JobAndRunStore,
        queue: RunQueue,
        clock: Clock,
        allow_private_targets: bool = False,
        queue_deadline: timedelta = DEFAULT_QUEUE_DEADLINE,
        waker: GroupWaker | None = None,
        aws_targets_without_role: bool = False,
        run_budget: RunBudget | None = None,
        role_trust: RoleTrustProbe | None = None,
        allowed_target_ports: Collection[int] = (),
        misfire_grace: timedelta = DEFAULT_MISFIRE_GRACE,
    ) -> None:
        """``allow_private_targets``: HTTP targets on loopback and private addresses, and LocalStack queue
        URLs, are accepted (a local stack only). ``aws_targets_without_role``: AWS targets need no IAM role,
        and are called with the worker's own credentials (a local stack only). ``role_trust``: roles
        registered or named by targets must require the team's external id (``TeamAdmin``).
        ``allowed_target_ports``: the ports HTTP targets and webhooks may use besides 80, 443 and
        1024-65535 (``target_guard.check_port``)."""
        self.catalog = catalog
        self.waker = waker  # wakes a quiet poller group for a job written due soon (duetime.scheduling.wake)
        self.marks = marks
        self.queue = queue
        self.clock = clock
        self.allow_private_targets = allow_private_targets
        self.allowed_target_ports = frozenset(allowed_target_ports)
        self.aws_targets_without_role = aws_targets_without_role
        self.queue_deadline = queue_deadline
        self.misfire_grace = misfire_grace  # the pollers' catch-up window for jobs without their own
        # Runs made on request (trigger, backfill) count against the team's runs_per_minute: the wiring gives
        # a budget every API Lambda shares (``wiring.run_budget``); by default one of this process's own.
        self.run_budget: RunBudget = run_budget or InMemoryRunBudget()
        self.teams = TeamAdmin(catalog, clock, actor="api", role_trust=role_trust)
        self.calendar_days = CalendarDays(catalog)  # the dates of the calendars a job uses, read when needed
        # the team's calendars, in the catalog's tables; a change re-plans the jobs that use the calendar
        self.calendars = CalendarService(catalog, clock, on_change=self.replan_calendar_users)

    # --- teams ------------------------------------------------------------------------------------------

    def create_team(
        self, team_id: str, max_concurrency: int = 50, exact_quota: int = 100, token: str | None = None
    ) -> tuple[Team, str]:
        """A new team, its API token (returned once, stored only as a hash) and its signing secret."""
        return self.teams.create_team(
            team_id, token, max_concurrency=max_concurrency, exact_quota=exact_quota
        )

    def issue_token(self, team_id: str, name: str = "local") -> str:
        """A new ``admin`` token named ``name`` for an existing team (returned once), in place of its token of
        that name if it has one (``TeamAdmin.replace_token``)."""
        return self.teams.replace_token(team_id, name)[1]

    def team(self, team_id: str) -> Team:
        """A team by id; refused if it is unknown or disabled."""
        return _usable(self.catalog.get_team(team_id), "unknown team")

    def authenticate(self, authorization: str | None) -> Caller:
        """The team and token ``authorization`` carries (``Bearer <token>``): a token issued and not revoked,
        of the team's current generation, of a team that is not disabled."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("send Authorization: Bearer <token>")
        computed = hash_token(token.strip())
        record = self.catalog.token_record(computed)
        if record is None or not hmac.compare_digest(record.token_hash, computed):
            raise Unauthorized("unknown or revoked token")
        team = self.catalog.get_team(record.team_id)
        if team is not None and record.generation != team.token_generation:
            raise Unauthorized("this token was rotated out")
        return Caller(_usable(team, "unknown token"), record)

    def tokens(self, caller: Caller) -> list[ApiToken]:
        """The caller's team's tokens (what is kept of them, never a token)."""
        return self.teams.list_tokens(caller.team.team_id)

    def issue_token_for(self, caller: Caller, wanted: TokenIn) -> tuple[ApiToken, str]:
        """A new token of the caller's team (returned once); the audit trail names the caller's token."""
        admin = TeamAdmin(self.catalog, self.clock, actor=caller.token.token_id)
        return admin.issue_token(caller.team.team_id, wanted.name, wanted.scope)

    def revoke_token(self, caller: Caller, token_id: str) -> ApiToken:
        """Revoke one of the caller's team's tokens by id (``TeamAdmin.revoke_token``)."""
        admin = TeamAdmin(self.catalog, self.clock, actor=caller.token.token_id)
        return admin.revoke_token(caller.team.team_id, token_id)

    def set_aws_role(self, team: Team, role_arn: str | None, actor: str = "api") -> Team:
        """Register (None: remove) the role ``team``'s AWS targets are called under (``TeamAdmin``); the
        audit trail names ``actor`` (the token's id)."""
        admin = TeamAdmin(self.catalog, self.clock, actor=actor, role_trust=self.teams.role_trust)
        return admin.set_aws_role(team.team_id, role_arn)

    # --- jobs -------------------------------------------------------------------------------------------

    def _validate(self, body: dict[str, Any], now: datetime, team: Team, new_target: bool = True) -> JobSpec:
        """``body`` as a job's spec. ``new_target``: the target is sent (a create, a PATCH of it) and is
        checked against the team's role; a change that keeps the target (a pause) is never refused for it."""
        try:
            spec = JobSpec.model_validate(body, context={"now": now})
        except ValidationError as exc:
            raise from_validation_error(exc) from exc
        if isinstance(spec.target, AwsTarget) and new_target:
            self._check_aws_target(spec.target, team)
        urls = [("target.url", spec.target.url)] if isinstance(spec.target, HttpTarget) else []
        urls += [
            (f"notify.{i}.url", channel.url)
            for i, channel in enumerate(spec.notify)
            if isinstance(channel, WebhookChannel)
        ]
        for field, url in urls:
            try:
                check_target_url(url, self.allow_private_targets, extra_ports=self.allowed_target_ports)
            except TargetRefused as exc:
                raise InvalidInput(str(exc), field) from exc
        return spec

    def _check_aws_target(self, target: AwsTarget, team: Team) -> None:
        """What an AWS target needs beyond its shape: a role to be called under (the target's or the team's)
        unless this stack calls without one, a LocalStack queue URL only where local targets are, and a
        role of its own that requires the team's external id (``TeamAdmin.check_role_trust``: a role any
        team could name would otherwise let it act through another's)."""
        if target.role_arn is None and team.aws_role_arn is None and not self.aws_targets_without_role:
            raise InvalidInput(
                "target.role_arn: an AWS target is called under an IAM role: register your team's "
                "(PUT /v1/team/aws-role) or name one here",
                "target.role_arn",
            )
        if isinstance(target, SqsTarget) and target.local and not self.allow_private_targets:
            raise InvalidInput(
                "target.queue_url: a LocalStack queue URL is accepted on a local stack only; give "
                "https://sqs.<region>.amazonaws.com/<account>/<queue name>",
                "target.queue_url",
            )
        if target.role_arn is not None and target.role_arn != team.aws_role_arn:
            self.teams.check_role_trust(team.team_id, target.role_arn, "target.role_arn")
        if target.role_arn is not None and team.aws_external_id is None:
            self.teams.assign_external_id(team.team_id)

    def create_job(
        self, team: Team, body: dict[str, Any], idempotency_key: str | None = None, actor: str = "api"
    ) -> Job:
        """A new job of ``team``'s; ``actor`` (the token's id) is who the job's history says created it."""
        now = self.clock.now()
        stamp = ceil_seconds(now)  # the job is scheduled from here: its checks read the same instant
        spec = self._validate(body, stamp, team)
        job = Job(**spec.model_dump(), id=new_job_id(), team=team.team_id, created_at=stamp, updated_at=stamp)
        job = self._with_calendars(job)
        job = job.model_copy(update={"state": initial_state(job, stamp)})
        _check_exclusion_leaves_runs(job, stamp)
        record = None
        if idempotency_key:
            if len(idempotency_key) > 255:
                raise InvalidInput("Idempotency-Key is longer than 255 characters", "Idempotency-Key")
            digest = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()
            record = IdempotencyRecord(team.team_id, idempotency_key, digest, job.id)
        self.marks.ensure_low_water_mark(partition_of(job.id), minute_bucket(stamp))
        try:
            job_id = self.catalog.insert_job(job, team, now, record, change(None, job, now, actor))
        except StoreQuotaExceeded as exc:
            raise _quota_error(team, exc) from exc
        except CalendarGone as exc:
            raise _unknown_calendar(job, exc.name) from exc
        except KeyTaken as exc:
            raise _key_taken(exc.key) from exc
        except IdempotencyMismatch as exc:
            raise Conflict("Idempotency-Key was used with a different request", "Idempotency-Key") from exc
        if job_id != job.id:  # the same request again: the first one woke the group if it had to
            return self.get_job(team, job_id)
        self._wake_if_due_soon(job, now)
        return job

    def get_job(self, team: Team, job_id: str) -> Job:
        job = self.catalog.get_job(job_id) if len(job_id) <= 64 else None
        if job is None or job.team != team.team_id:
            raise NotFound(f"no job {job_id}")
        return job

    def job_signing_keys(self, team: Team, job_id: str) -> list[JobSigningKey]:
        """The keys the job's calls are signed with now, its target's to verify with
        (``signing.job_signing_keys``: the current one, and a rotated-out one during its overlap). Raises
        NotFound for a job not of ``team``."""
        return job_signing_keys(team, self.get_job(team, job_id).id, self.clock.now())

    def missing_since(self, jobs: Sequence[Job]) -> dict[str, datetime]:
        """The success-deadline flags of ``jobs`` (``duetime.execution.deadlines``): job id -> the nominal
        time of its first missed time since it last recovered, for the jobs flagged (one batch read)."""
        watched = [job.id for job in jobs if job.success_deadline_seconds is not None]
        return self.marks.missing_flags(watched) if watched else {}

    def list_jobs(
        self, team: Team, limit: int, cursor: str | None, label: str | None = None, q: str | None = None
    ) -> Page:
        """A page of the team's jobs, all of them by id, or those labelled ``label`` (``key:value``) and/or
        with a name word beginning with each word of ``q`` (``duetime.domain.labels``), from their index
        items."""
        try:
            pair = label_filter(label) if label is not None else None
        except ValueError as exc:
            raise InvalidInput(f"label: {exc}", "label") from exc
        try:
            words = query_words(q) if q is not None else []
        except ValueError as exc:
            raise InvalidInput(f"q: {exc}", "q") from exc
        if q is not None and not words:  # nothing to look for: no name word begins with punctuation
            return Page([], None)
        try:
            if pair is None and not words:
                return self.catalog.team_jobs(team.team_id, limit, cursor)
            return self.catalog.search_jobs(team.team_id, limit, cursor, pair, words)
        except InvalidCursor as exc:
            raise BadRequest(str(exc), "cursor") from exc

    def job_counts(self, team: Team) -> tuple[int, int]:
        """(jobs, exact-time jobs) the team has."""
        return self.catalog.job_counts(team.team_id)

    def last_runs(self, jobs: Sequence[Job]) -> dict[str, Run]:
        """Each job's latest run (by scheduled time), for the jobs that have one: a one-item Query per job,
        eight at a time."""
        with ThreadPoolExecutor(max_workers=8) as pool:
            pages = list(pool.map(lambda job: self.catalog.job_runs(job.id, 1, None), jobs))
        return {job.id: page.items[0] for job, page in zip(jobs, pages, strict=True) if page.items}

    def job_history(self, team: Team, job_id: str, limit: int, cursor: str | None) -> Page:
        """The job's changes of the last 90 days, newest first; a deleted job's too, until they expire."""
        job = self.catalog.get_job(job_id) if len(job_id) <= 64 else None
        if job is not None and job.team != team.team_id:
            raise NotFound(f"no job {job_id}")
        try:
            page = self.catalog.job_history(job_id, limit, cursor) if len(job_id) <= 64 else Page([], None)
        except InvalidCursor as exc:
            raise BadRequest(str(exc), "cursor") from exc
        mine = [c for c in page.items if c.team == team.team_id]
        if job is None and not mine:
            raise NotFound(f"no job {job_id}")
        return Page(mine, page.cursor)

    def update_job(
        self,
        team: Team,
        job_id: str,
        changes: dict[str, Any],
        actor: str = "api",
        if_match: str | None = None,
    ) -> Job:
        """Apply ``changes`` (top-level fields; nested objects are replaced whole). Anything that moves
        the schedule reschedules from now; the run history is kept. Header values and URL secrets are
        write-only: in a new ``target``, a value of ``REDACTED`` keeps the value stored under that name
        while the URL's origin stays the same (another origin: 422 naming each such header, nothing
        written), and the URL as answers show it keeps the stored URL (``HttpTarget.restore_redacted``).
        A job's ``key`` is set once (422 on a change; 409 when another job has it). ``if_match``: the job's
        ETag as the caller read it (``job_keys``): 412 once the job changed, nothing written."""
        _readable_if_match(if_match)
        for _ in range(5):
            job = self.get_job(team, job_id)
            if job.key is not None and "key" in changes and changes["key"] != job.key:
                raise InvalidInput(f"key: the job's key is {job.key!r} and never changes", "key")
            now = self.clock.now()
            current = job.model_dump(mode="json", include=set(JobSpec.model_fields))
            try:
                sent = (
                    {**changes, "target": job.target.restore_redacted(changes["target"])}
                    if "target" in changes
                    else changes
                )
            except StoredSecretsWithheld as exc:
                raise InvalidInput(str(exc), exc.fields[0]) from exc
            stamp = ceil_seconds(now)  # a rescheduled job starts from here: its checks read the same instant
            spec = self._validate({**current, **sent}, stamp, team, new_target="target" in changes)
            _check_if_match(job, if_match)  # after the body's checks: a bad body is a 422 whatever the job is
            updated = Job(
                **spec.model_dump(),
                id=job.id,
                team=job.team,
                created_at=job.created_at,
                updated_at=stamp,
                state=job.state,
            )
            updated = self._with_calendars(updated)
            version = job.state.version + 1
            if any(field in changes for field in RESCHEDULE_FIELDS):
                state = initial_state(updated, stamp, version)
                _check_exclusion_leaves_runs(updated.model_copy(update={"state": state}), stamp)
            else:
                state = job.state.model_copy(update={"version": version})
            updated = updated.model_copy(update={"state": state})
            try:
                if self.catalog.replace_job(job, updated, team, now, change(job, updated, now, actor)):
                    self._wake_if_due_soon(updated, now)
                    return updated
            except StoreQuotaExceeded as exc:
                raise _quota_error(team, exc) from exc
            except CalendarGone as exc:
                raise _unknown_calendar(updated, exc.name) from exc
            except KeyTaken as exc:
                raise _key_taken(exc.key) from exc
        raise Conflict("the job kept changing while being updated; try again")

    def _with_calendars(self, job: Job) -> Job:
        """``job`` with the current dates of the calendars it uses; a name the team has no calendar by is a
        422 naming it (``exclude.calendars.<i>`` or ``schedule.calendars.<i>``)."""
        if not job.calendar_names:
            return job
        current = self.calendar_days.current(job.team, job.calendar_names)
        for name in job.calendar_names:
            if current[name] is None:
                raise _unknown_calendar(job, name)
        return self.calendar_days.with_calendars(job, [current[name] for name in job.calendar_names])

    def _resolved(self, job: Job) -> Job:
        """A stored job ready for schedule math: its calendars' dates as they are now."""
        return self.calendar_days.resolve([job])[0] if job.calendar_names else job

    def replan_calendar_users(self, team_id: str, name: str) -> None:
        """Re-plan every job of the team that uses calendar ``name`` (just changed) with its dates as they are
        now (``claim_plan.replanned_state``): the job's next time moves if the change moved it; a claimed run
        is never touched. Each job is written under JOB_VERSION_IS and read again after a lost race (a claim
        or an edit came first; either already used the new dates, being read after the change)."""
        team = self.catalog.get_team(team_id)
        if team is None:
            return
        users = self.catalog.calendar_users(team_id, name, MAX_CALENDAR_USERS)
        with ThreadPoolExecutor(max_workers=REPLAN_THREADS) as pool:
            list(pool.map(lambda job_id: self._replan(team, job_id), users))

    def _replan(self, team: Team, job_id: str) -> None:
        """Re-plan one job of ``team`` with its calendars' current dates, read again after a lost race."""
        for _ in range(5):
            job = self.catalog.get_job(job_id)
            if job is None or job.team != team.team_id:
                return
            now = self.clock.now()
            job = self._resolved(job)
            state = replanned_state(job, now)
            moved = (state.next_nominal_at, state.next_fire_at) != (
                job.state.next_nominal_at,
                job.state.next_fire_at,
            )
            if not moved:
                return
            updated = job.model_copy(update={"state": state})
            if self.catalog.replace_job(job, updated, team, now):
                self._wake_if_due_soon(updated, now)
                return

    def _wake_if_due_soon(self, job: Job, now: datetime) -> None:
        if self.waker is not None:
            self.waker.job_written(job, now)

    def delete_job(self, team: Team, job_id: str, actor: str = "api", if_match: str | None = None) -> None:
        """Delete the job (its key goes with it); ``if_match``: its ETag as read (412 once it changed)."""
        _readable_if_match(if_match)
        for _ in range(5):
            job = self.get_job(team, job_id)
            _check_if_match(job, if_match)
            if self.catalog.remove_job(job, team, change(job, None, self.clock.now(), actor)):
                return
        raise Conflict("the job kept changing while being deleted; try again")

    # --- jobs by key (jobs as code) ---------------------------------------------------------------------

    def job_id_by_key(self, team: Team, key: str) -> str:
        """The id of the team's job with ``key``; NotFound when none has it."""
        job_id = self.catalog.job_id_by_key(team.team_id, key)
        if job_id is None:
            raise NotFound(f"no job has key {key}")
        return job_id

    def put_job_by_key(
        self, team: Team, key: str, body: Any, if_match: str | None = None, actor: str = "api"
    ) -> tuple[Job, bool]:
        """Create the job of ``key`` or replace it whole with ``body`` (a job spec; its ``key``, if sent, must
        be ``key``): (the job, whether it was created). ``if_match``: the ETag the caller read: 412 when the
        job changed since, or when there is no job to match (``*`` matches any job). Replacing is an update
        of every field (``update_job``: a field left out takes its default)."""
        _readable_if_match(if_match)
        if not isinstance(body, dict):
            raise InvalidInput("the request body must be a JSON object: a job", "body")
        if body.get("key", key) != key:
            raise InvalidInput(f"key: the body names key {body['key']!r}, the path {key!r}", "key")
        body = {**body, "key": key}
        # Validated once (its target's address is resolved): a job that cannot be is a 422 before all else.
        spec = self._validate(body, self.clock.now(), team)
        full = spec.model_dump(mode="json", include=set(JobSpec.model_fields))
        for _ in range(5):
            job_id = self.catalog.job_id_by_key(team.team_id, key)
            if job_id is None:
                if if_match is not None:
                    raise PreconditionFailed(f"If-Match: no job has key {key}", "If-Match")
                try:
                    return self.create_job(team, body, actor=actor), True
                except Conflict as exc:
                    if exc.field != "key":
                        raise
                    continue  # created meanwhile by another request: replace it
            job = self.get_job(team, job_id)
            if job.model_dump(mode="json", include=set(JobSpec.model_fields)) == full:
                _check_if_match(job, if_match)
                return job, False  # the same job again: nothing to write
            return self.update_job(team, job_id, {**full, **body}, actor, if_match), False
        raise Conflict(f"the job of key {key} kept changing; try again")

    def trigger(self, team: Team, job_id: str, request: Any = None) -> Run:
        """Run the job now under a manual run id (``<job id>@<now>~manual-<nonce>``, never a scheduled
        run's id); the schedule is not touched. ``request`` is the trigger's JSON body, if any
        (``TriggerIn``): its ``body`` is this run's request body instead of the job's (the run carries its
        own copy of the target, so the job is not changed). The run counts against the team's
        ``runs_per_minute`` (``_spend_runs``), given back if it is not created."""
        body = _trigger_body(request)
        job = self.get_job(team, job_id)
        now = self.clock.now()
        nominal = whole_seconds(now)
        run_id = make_manual_run_id(job.id, nominal)
        run = new_run(job, PlannedRun(nominal, nominal), now, now + self.queue_deadline, run_id)
        if body is not None:
            run = run.model_copy(update={"target": _with_trigger_body(run.target, body)})
        spent = self._spend_runs(team, 1, now)
        if not self.catalog.insert_run(run):  # 40 random bits met another trigger's in the same second
            self.run_budget.give_back(team, spent, 1)
            raise Conflict(f"run {run.run_id} exists; trigger again")
        self.queue.send([RunMessage(run.run_id, run.attempt)])
        return run

    def backfill(self, team: Team, job_id: str, body: dict[str, Any]) -> int:
        """Create the runs of the job's nominal times in the window ``body`` names (``BackfillWindow``), under
        their scheduled run ids, and queue them paced (``backfill_plan``); how many were created. A time that
        already has a run keeps it, untouched and uncounted, so the same request again creates nothing. The
        job row is not written: the schedule goes on as it was (a paused job stays paused). The window's
        runs count against the team's ``runs_per_minute`` all at once, before any is written: refused, none
        is created (429, ``_spend_runs``); those whose time already had a run are given back."""
        now = self.clock.now()
        try:
            window = BackfillWindow.model_validate(body, context={"now": now})
        except ValidationError as exc:
            raise from_validation_error(exc) from exc
        job = self._resolved(self.get_job(team, job_id))
        anchor = rate_anchor(job, job.created_at)
        nominals = nominals_between(job, anchor, window.start, window.end, MAX_BACKFILL_RUNS + 1)
        if len(nominals) > MAX_BACKFILL_RUNS:
            raise InvalidInput(
                f"the window holds more than {MAX_BACKFILL_RUNS:,} of the job's times; backfill it in parts",
                "to",
            )
        if len(nominals) > team.runs_per_minute:
            raise InvalidInput(
                f"the window holds {len(nominals):,} of the job's times, more than the team may create in a "
                f"minute (runs_per_minute: {team.runs_per_minute:,}); backfill it in parts",
                "to",
            )
        runs = [
            new_run(job, planned, now, planned.fire_at + self.queue_deadline)
            for planned in backfill_plan(nominals, now, backfill_pace(team))
        ]
        spent = self._spend_runs(team, len(runs), now)
        created = self.catalog.insert_runs(runs)
        self.run_budget.give_back(team, spent, len(runs) - len(created))
        # Only the runs written are sent, each delayed to its fire time. Should sending fail now, the rows
        # are still safe: a run still queued at its queue deadline is sent by the reaper.
        by_delay: dict[int, list[RunMessage]] = {}
        for run in created:
            delay = round((run.fire_at - now).total_seconds())
            by_delay.setdefault(delay, []).append(RunMessage(run.run_id, run.attempt))
        with ThreadPoolExecutor(BACKFILL_SENDERS, thread_name_prefix="backfill-send") as senders:
            sent = [senders.submit(self.queue.send, group, delay) for delay, group in by_delay.items()]
            for future in sent:
                future.result()
        return len(created)

    def _spend_runs(self, team: Team, runs: int, now: datetime) -> Spend:
        """Count ``runs`` runs about to be created on request against the team's ``runs_per_minute``
        (``duetime.domain.run_budget``), all or none, on the store's clock; over it ``RateLimited`` naming the
        setting, before anything is written."""
        spent = self.run_budget.spend(team, runs, now)
        if not spent.allowed:
            raise RateLimited(
                f"too many runs: team {team.team_id} may create {team.runs_per_minute:,} runs a minute by "
                f"trigger and backfill together (runs_per_minute); {spent.left:,} are left this minute and "
                f"this request needs {runs:,}; try again in {spent.retry_after_seconds} s",
                spent.retry_after_seconds,
                "runs_per_minute",
            )
        return spent

    # --- runs -------------------------------------------------------------------------------------------

    def list_runs(self, team: Team, job_id: str, limit: int, cursor: str | None) -> Page:
        self.get_job(team, job_id)
        try:
            return self.catalog.job_runs(job_id, limit, cursor)
        except InvalidCursor as exc:
            raise BadRequest(str(exc), "cursor") from exc

    def get_run(self, team: Team, run_id: str) -> Run:
        run = self.catalog.get_run(run_id) if len(run_id) <= 128 else None
        if run is None or run.team != team.team_id:
            raise NotFound(f"no run {run_id}")
        return run

    def retry_run(self, team: Team, run_id: str) -> Run:
        run = self.get_run(team, run_id)
        now = self.clock.now()
        queued = self.catalog.requeue_run(run, now, now + self.queue_deadline)
        if queued is None:
            raise Conflict(f"run {run_id} is {run.status.value}; only failed or dead runs can be retried")
        self.queue.send([RunMessage(queued.run_id, queued.attempt)])
        return queued

    def cancel_run(self, team: Team, run_id: str) -> Run:
        """A queued, retry-waiting or running run becomes cancelled at once (``RunStore.cancel_run``); a
        finished one is a conflict."""
        run = self.get_run(team, run_id)
        cancelled = self.marks.cancel_run(run.run_id, self.clock.now())
        if cancelled is None:
            current = self.get_run(team, run_id)  # it finished meanwhile, or was already finished
            raise Conflict(f"run {run_id} is {current.status.value}; only an unfinished run can be cancelled")
        return cancelled

    # --- forecasts --------------------------------------------------------------------------------------

    def preview(self, team: Team, job_id: str, count: int) -> Preview:
        job = self.get_job(team, job_id)
        after = (
            job.state.next_nominal_at - timedelta(seconds=1)
            if job.state.next_nominal_at
            else self.clock.now()
        )
        return preview_of(self._resolved(job), job.id, job.created_at, after, min(count, MAX_PREVIEW))

    def load(
        self, team: Team, start: datetime, end: datetime, pay: Callable[[int, int], None] | None = None
    ) -> dict[str, int]:
        """Due runs per minute (by fire time) over the team's active jobs, for the window [start, end).

        Its cost grows with the team's jobs and their runs in the window (10,000 jobs of a run a minute over
        24 hours: 14 million fire times), so it is charged by the work done: ``pay(jobs read, fire times
        computed)`` is called once per ``LOAD_JOBS_PER_REQUEST`` jobs and per ``LOAD_FIRE_TIMES_PER_REQUEST``
        fire times past the first of each, as the walk goes (the api counts each call as one request against
        the team's API rate, and a refusal ends the walk: 429). A window holding more than
        ``MAX_LOAD_FIRE_TIMES`` fire times is refused (422 naming ``to``) rather than answered in part or
        after the api function's 29 s. Weighed: an answer kept per team and minute (its size would not grow
        with the jobs) needs every job write and every claim to move it, and is wrong whenever one of them
        is lost; a cap on the jobs walked would answer wrong for big teams; charging by jobs alone would
        let a team of busy crons have 14 million fire times for 100 requests. Fire times are computed one
        at a time up to ``end`` (not a day's worth per job), so a short window costs little."""
        if end <= start:
            raise InvalidInput("to must be after from", "to")
        if end - start > MAX_LOAD_WINDOW:
            raise InvalidInput("the window may be at most 24 hours", "to")
        counts: Counter[str] = Counter()
        cursor: str | None = None
        jobs = fire_times = paid = 0
        while True:
            page = self.catalog.team_jobs(team.team_id, LOAD_JOBS_PER_REQUEST, cursor)
            for job in self.calendar_days.resolve(page.items):
                jobs += 1
                active = not job.paused and job.state.next_nominal_at is not None
                for fire_at in _fire_times(job, start, end) if active else ():
                    fire_times += 1
                    if fire_at >= start:
                        counts[minute_bucket(fire_at)] += 1
                if fire_times > MAX_LOAD_FIRE_TIMES:
                    raise InvalidInput(
                        f"the window holds more than {MAX_LOAD_FIRE_TIMES:,} runs of your jobs; ask for a "
                        "shorter one",
                        "to",
                    )
                for _ in range(paid, load_cost(jobs, fire_times) - 1):
                    if pay is not None:
                        pay(jobs, fire_times)
                    paid += 1
            cursor = page.cursor
            if not cursor:
                return dict(sorted(counts.items()))


def load_cost(jobs: int, fire_times: int) -> int:
    """What a load walk of ``jobs`` jobs and ``fire_times`` fire times costs, in requests of the API rate:
    one for each ``LOAD_JOBS_PER_REQUEST`` jobs begun, and one more for each ``LOAD_FIRE_TIMES_PER_REQUEST``
    fire times begun past the first of them (at least 1, the request itself)."""
    return max(1, -(-jobs // LOAD_JOBS_PER_REQUEST)) + max(0, fire_times - 1) // LOAD_FIRE_TIMES_PER_REQUEST


def _fire_times(job: Job, start: datetime, end: datetime) -> Iterator[datetime]:
    """The fire times of the job's runs from its next one on (``start`` if later), before ``end``: as
    ``upcoming_runs`` gives them, one at a time and without DST marks, at most a day's minutes of them."""
    assert job.state.next_nominal_at is not None
    anchor = rate_anchor(job, job.created_at)
    nominal = next_nominal_after(job, anchor, max(start, job.state.next_nominal_at) - timedelta(seconds=1))
    for _ in range(24 * 60 + 1):
        if nominal is None:
            return
        following = next_nominal_after(job, anchor, nominal)
        fire_at = fire_time(job.id, job, nominal, following)
        if fire_at >= end:
            return
        yield fire_at
        nominal = following


def _trigger_body(request: Any) -> str | None:
    """The body a trigger request asks for (None: the job's own), validated as ``TriggerIn``."""
    from duetime.api.schemas import TriggerIn  # the API's shapes import this module

    if request is None:
        return None
    if not isinstance(request, dict):
        raise InvalidInput('the request body must be a JSON object, e.g. {"body": ...}', "body")
    try:
        body: str | None = TriggerIn.model_validate(request).body  # the model's validator made it text
        return body
    except ValidationError as exc:
        raise from_validation_error(exc) from exc


def _with_trigger_body(target: Target, body: str) -> Target:
    """``target`` sending a trigger's ``body``: an HTTP target's body; an AWS target's message, payload,
    detail or input (``AwsTarget.with_trigger_body``), validated as the job's would be."""
    if isinstance(target, HttpTarget):
        return target.model_copy(update={"body": body})
    try:
        return cast(Target, target.with_trigger_body(body))
    except ValidationError as exc:
        message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise InvalidInput(f"body: {message}", "body") from exc


def backfill_pace(team: Team) -> int:
    """Backfilled runs that become due per second: half the team's concurrency (at least 2), so that a
    backfill leaves room for the team's other jobs."""
    return max(2, team.max_concurrency // 2)


def backfill_plan(nominals: list[datetime], now: datetime, pace: int) -> list[PlannedRun]:
    """Backfill runs for ``nominals`` (in order): the i-th fires ``i // pace`` seconds after ``now``, its
    message delayed as long. At most ``MAX_BACKFILL_RUNS`` times at 2 a second or more stay within SQS's
    longest delay."""
    assert pace >= 2 and (len(nominals) - 1) // pace <= MAX_SQS_DELAY_SECONDS, (len(nominals), pace)
    return [PlannedRun(nominal, now + timedelta(seconds=i // pace)) for i, nominal in enumerate(nominals)]


def _quota_error(team: Team, exc: StoreQuotaExceeded) -> QuotaExceeded:
    """The API's answer to a write the team's quota refused, naming the quota (and the field it is about)."""
    if exc.which == "jobs":
        return QuotaExceeded(f"the team's job quota ({team.max_jobs} jobs) is used up", "max_jobs")
    return QuotaExceeded(f"the team's exact-time quota ({team.exact_quota}) is used up", "exact")


def _usable(team: Team | None, missing: str) -> Team:
    if team is None:
        raise Unauthorized(missing)
    if team.disabled:
        raise Forbidden(f"team {team.team_id} is disabled")
    return team


def _unknown_calendar(job: JobSpec, name: str) -> InvalidInput:
    """The 422 for a job naming a calendar its team does not have, naming the field that names it."""
    where = "exclude.calendars" if job.exclude is not None else "schedule.calendars"
    index = job.calendar_names.index(name)
    return InvalidInput(
        f"{where}.{index}: your team has no calendar {name!r}; create it first (POST /v1/calendars)",
        f"{where}.{index}",
    )


def _key_taken(key: str) -> Conflict:
    return Conflict(f"key: another job of your team has key {key!r}", "key")


EXCLUSION_HORIZON = timedelta(days=10 * 366)  # a cron whose calendars exclude every time this far: refused


def _check_exclusion_leaves_runs(job: Job, now: datetime) -> None:
    """422 naming ``exclude`` for a cron that runs, but on no date its calendars leave within
    ``EXCLUSION_HORIZON`` (``0 9 25 12 *`` excluding a country's holidays: every time is on one; a holidays
    calendar holds nothing past the years its package knows, so the next run would be a century on)."""
    if job.exclude is None:
        return
    nominal = job.state.next_nominal_at
    if nominal is not None and nominal <= now + EXCLUSION_HORIZON:
        return
    plain = job.model_copy(update={"exclude": None})
    if first_nominal(plain, job.created_at, now) is None:
        return  # the cron itself has ended: not the calendars' doing
    raise InvalidInput(
        "exclude: every time of the cron in the next ten years falls on a date of "
        + ", ".join(job.calendar_names),
        "exclude",
    )


MAX_IF_MATCH = 512  # characters of an If-Match header: a few ETags


def _readable_if_match(if_match: str | None) -> None:
    if if_match is not None and len(if_match) > MAX_IF_MATCH:
        raise InvalidInput(f"If-Match is longer than {MAX_IF_MATCH} characters", "If-Match")


def _check_if_match(job: Job, if_match: str | None) -> None:
    """412 when ``if_match`` names an ETag the job is no longer at (``job_keys.if_match_holds``)."""
    if not if_match_holds(if_match, etag_of(job)):
        raise PreconditionFailed(
            f"If-Match: job {job.id} changed since it was read (it is at {etag_of(job)} now): read it again "
            "and decide",
            "If-Match",
        )
