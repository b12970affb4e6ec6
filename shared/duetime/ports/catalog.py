"""Teams, their slots, tokens, calendars and the catalog of jobs and runs the API reads.

A part of ``duetime.ports``: every port, its docstrings the contract every adapter keeps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

from duetime.domain.calendars import Calendar, CalendarChange
from duetime.domain.catalog import AuditEvent, IdempotencyRecord, Page
from duetime.domain.job_history import JobChange
from duetime.domain.models import Job, Run, Team
from duetime.domain.tokens import ApiToken


class TeamStore(Protocol):
    def get_team(self, team_id: str) -> Team | None: ...

    def put_team(self, team: Team) -> None: ...

    def acquire_slot(self, team: Team, run_id: str, now: datetime, lease_until: datetime) -> int | None:
        """Take one of the team's ``max_concurrency`` slots for ``run_id`` until ``lease_until``.

        A slot is free when nobody holds it or its holder's lease has expired, so a dead worker's slot
        comes back by itself. Never more than ``max_concurrency`` holders at once. None when no free slot
        was found: for caps up to 100 that means every slot is held; for bigger caps only a few groups of
        slots are searched, so None may come a little before the cap (the caller retries a few seconds
        later), never after it.
        """
        ...

    def extend_slot(self, team_id: str, slot: int, run_id: str, lease_until: datetime) -> bool: ...

    def release_slot(self, team_id: str, slot: int, run_id: str) -> None:
        """Free the slot if ``run_id`` still holds it."""
        ...

    def acquire_slots(
        self, team: Team, run_ids: Sequence[str], now: datetime, lease_until: datetime
    ) -> dict[str, int]:
        """``acquire_slot`` for each run (distinct slots): the slot each run that got one holds, by run id.
        The runs left out found no free slot (as ``acquire_slot``'s None)."""
        ...

    def extend_slots(self, team_id: str, slots: Mapping[str, int], lease_until: datetime) -> set[str]:
        """``extend_slot`` for each run id -> slot: the run ids that still held theirs."""
        ...

    def release_slots(self, team_id: str, slots: Mapping[str, int]) -> None:
        """``release_slot`` for each run id -> slot."""
        ...


class TeamCatalog(Protocol):
    """Teams as the API and the operator keep them: settings with a revision, named tokens and the audit
    trail (what ``duetime.api.team_admin.TeamAdmin`` needs). Every change of a team is one atomic write of its
    settings, its token rows and its audit row, conditioned on what it was computed from: a lost race is
    ``False``, and nothing of it is written."""

    def create_team(self, team: Team, token: ApiToken, audit: AuditEvent | None = None) -> bool:
        """Write a new team at revision 1, its first token (both the row ``token_record`` finds and its row
        in ``team_tokens``), its place in ``list_teams`` and ``audit`` (the row of revision 1), with job
        counts of 0, all at once; False, and nothing written, when the team id is taken (TEAM_IS_NEW)."""
        ...

    def token_record(self, token_hash: str) -> ApiToken | None:
        """The token whose SHA-256 is ``token_hash``, if one was issued and not revoked (of any generation:
        the caller compares it with the team's ``token_generation``). May be slightly stale."""
        ...

    def team_tokens(self, team_id: str) -> list[ApiToken]:
        """Every listed token of the team, of any generation, by token id, read consistently (what issuing
        and revoking start from). ``created_at`` as stored: to the second; ``created_by`` ``"unknown"``
        when it was empty."""
        ...

    def get_team(self, team_id: str) -> Team | None:
        """The team's settings (None: no such team). May be slightly stale."""
        ...

    def team_revision(self, team_id: str) -> tuple[Team, int] | None:
        """The team and its revision, read consistently: what an administrative change starts from."""
        ...

    def list_teams(self) -> list[Team]:
        """Every team ``create_team`` made, by id."""
        ...

    def replace_team(
        self,
        before: Team,
        revision: int,
        after: Team,
        audit: AuditEvent,
        issue: ApiToken | None = None,
        revoke: ApiToken | None = None,
    ) -> bool:
        """Write ``after`` over ``before`` as revision ``revision + 1``, all at once with: the audit row of
        that revision, the rows of the token ``issue`` and the removal of the token ``revoke``. Written only
        if the stored settings are still ``before`` (TEAM_UNCHANGED_SINCE_READ), no audit row of revision
        ``revision + 1`` exists (so of two changes from one read, even two that agree on the settings, such
        as two token changes, one loses), the issued token's rows are new (TEAM_IS_NEW) and the revoked
        token's rows are there (TOKEN_EXISTS). False, and nothing written, otherwise."""
        ...

    def audit_events(self, team_id: str, limit: int = 100) -> list[AuditEvent]:
        """The team's administrative changes (those of the last 90 days), newest first (by revision), at
        most ``limit``. ``at`` to the second; ``detail`` as JSON gives it back (tuples as lists, values
        JSON does not know as text)."""
        ...


class CalendarStore(Protocol):
    """A team's calendars (``duetime.domain.calendars``), each change written at once with its history entry
    (``CalendarChange``): all of it or none of it. A lost race is ``False``, and nothing of it is written.

    A name's versions count up from 1 and are never reused, not even after a delete (a deleted calendar
    leaves its last version behind, and a calendar created again under its name continues from there), so
    (team, name, version) names one content for good: what a reader derives from a version (its dates of a
    year) it may cache forever. Instants are stored to the whole second."""

    def last_version(self, team_id: str, name: str) -> int:
        """The highest version the team's calendar ``name`` has had, live or deleted; 0 for a name never
        used. Read consistently: what a create starts from."""
        ...

    def create_calendar(self, calendar: Calendar, change: CalendarChange) -> bool:
        """Write a new calendar with its history entry, only if the team has no calendar of that name and
        ``calendar.version`` is one above the name's ``last_version`` (CALENDAR_IS_NEW for a name never
        used, CALENDAR_NAME_FREED for a deleted one's). False otherwise: the name is taken, or another
        create or delete came first (read ``last_version`` again)."""
        ...

    def replace_calendar(self, before: Calendar, after: Calendar, change: CalendarChange) -> bool:
        """Write ``after`` (``before.version + 1``) over ``before`` with its history entry, only if the stored
        calendar is still ``before``'s version (CALENDAR_VERSION_IS: optimistic concurrency). False on a lost
        race (another change, or a delete, came first)."""
        ...

    def remove_calendar(self, calendar: Calendar, change: CalendarChange) -> bool:
        """Delete the calendar with its history entry, only if the stored one is still ``calendar``'s version
        and no job uses it (CALENDAR_UNUSED); its version stays taken (``last_version``). False otherwise: a
        lost race, or jobs use it (``calendar_users``)."""
        ...

    def calendar_users(self, team_id: str, name: str, limit: int) -> list[str]:
        """Ids of the team's jobs that use calendar ``name`` (``JobSpec.calendar_names``), at most ``limit``,
        by id, read consistently. A job write keeps them in the same atomic write as the job: a job that
        starts using a calendar the team does not have is refused (``CalendarGone``), and a calendar is
        deleted only while it has none."""
        ...

    def get_calendar(self, team_id: str, name: str) -> Calendar | None:
        """The team's live calendar ``name`` as stored, read consistently; None when there is none."""
        ...

    def team_calendars(self, team_id: str, limit: int, cursor: str | None) -> Page:
        """A page of the team's live calendars, by name, from ``cursor`` (None: the first). A page may hold
        fewer than ``limit`` while its cursor says more may follow (deleted names are skipped)."""
        ...

    def calendar_history(self, team_id: str, name: str, limit: int, cursor: str | None) -> Page:
        """A page of the changes (``CalendarChange``) of the team's calendar ``name`` of the last 90 days,
        newest first; a deleted calendar's too."""
        ...


class Catalog(TeamCatalog, CalendarStore, Protocol):
    """What the API reads and writes beside the scheduling hot path (``duetime.api.service.JobService``):
    teams (``TeamCatalog``), their calendars (``CalendarStore``), a team's jobs with their quotas, idempotency
    keys, search index and history, and a job's runs. It shares its jobs and runs with the store
    (``JobAndRunStore``): a job the catalog writes is one the poller claims, a run it creates one the worker
    leases.

    Job writes keep the team's counts in the same atomic write as the job: ``job_counts`` never drifts from
    the jobs. Listings page with opaque cursors (``Page``): a cursor is taken back only by the listing that
    returned it (the same team, job or search); any other raises ``InvalidCursor``. Instants are stored to
    the whole second, as the store keeps them."""

    def job_counts(self, team_id: str) -> tuple[int, int]:
        """(jobs, exact-time jobs) the team holds, as the job writes counted them, read consistently."""
        ...

    def exact_jobs(self, team_id: str) -> int:
        """The team's exact-time jobs (``job_counts``' second)."""
        ...

    def insert_job(
        self,
        job: Job,
        team: Team,
        now: datetime,
        idempotency: IdempotencyRecord | None,
        change: JobChange | None = None,
    ) -> str:
        """Write the new ``job`` (JOB_IS_NEW) with its search index entries, its history entry ``change``, the
        team's counts one job (and one exact-time job, if ``job.exact``) up, and ``idempotency``'s key, all
        at once or none of it.

        Returns the id of the job the request stands for: ``job.id``, or, when ``idempotency``'s key was
        used before with the same ``request_hash``, the id of the job that request created (nothing is
        written). Raises ``IdempotencyMismatch`` for a key used with another request hash (checked first),
        ``QuotaExceeded`` (``which`` ``"jobs"`` or ``"exact"``) when the team holds ``max_jobs`` jobs or
        ``exact_quota`` exact-time jobs already (JOB_QUOTA_LEFT, EXACT_QUOTA_LEFT) or does not exist, and
        ``CalendarGone`` when the team has no calendar of a name the job uses (CALENDAR_IS_LIVE; the calendars
        count the job among their users in the same write: ``calendar_users``)."""
        ...

    def get_job(self, job_id: str) -> Job | None:
        """The job as stored (instants to the second), of any team; None when there is none."""
        ...

    def job_id_by_key(self, team_id: str, key: str) -> str | None:
        """The id of the team's job that has ``key`` (``JobSpec.key``), read consistently; None if none has.
        Keys are unique in a team: a job write that gives a job a key another job has raises ``KeyTaken``
        and writes nothing; the key goes with the job when it is deleted."""
        ...

    def replace_job(
        self, before: Job, after: Job, team: Team, now: datetime, change: JobChange | None = None
    ) -> bool:
        """Write ``after`` over ``before`` only if the stored job is still ``before``'s version of
        ``before``'s team (JOB_VERSION_IS), with its search index entries moved, its history entry
        ``change``, and the team's exact-time count moved when ``exact`` changes, all at once. False (a lost
        race: nothing written) otherwise. Raises ``QuotaExceeded`` (``"exact"``) when the job becomes
        exact-time and the team holds ``exact_quota`` such jobs already, and ``CalendarGone`` when ``after``
        starts using a calendar the team does not have (the calendars' users move in the same write)."""
        ...

    def remove_job(self, job: Job, team: Team, change: JobChange | None = None) -> bool:
        """Delete the job only if the stored one is still ``job``'s version of its team (JOB_VERSION_IS),
        with its search index entries, with the history entry ``change`` (kept after the job), the team's
        counts one down and its calendars' users less it, all at once; False (nothing written) on a lost
        race. Its runs stay."""
        ...

    def team_jobs(self, team_id: str, limit: int, cursor: str | None) -> Page:
        """A page of at most ``limit`` of the team's jobs, by job id, from ``cursor`` (None: the first)."""
        ...

    def search_jobs(
        self, team_id: str, limit: int, cursor: str | None, label: tuple[str, str] | None, words: list[str]
    ) -> Page:
        """A page of the team's jobs labelled ``label`` (key, value) and/or with a name word beginning with
        each of ``words`` (lowercase, ``duetime.domain.labels``): at least one of the two is given. It walks
        at most ``limit`` index entries (the label's, by job id; else the longest word's, by word), so a page
        may hold fewer jobs than ``limit`` while its cursor says more may follow, and a job two of whose
        name words begin with the longest search word may come on two pages."""
        ...

    def job_history(self, job_id: str, limit: int, cursor: str | None) -> Page:
        """A page of the job's recorded changes (``JobChange``, those of the last 90 days), newest first,
        a deleted job's too; any team's (the caller filters)."""
        ...

    def get_run(self, run_id: str) -> Run | None:
        """The run as stored (instants to the second), of any team; None when there is none."""
        ...

    def job_runs(self, job_id: str, limit: int, cursor: str | None) -> Page:
        """A page of the job's runs, newest first (by occurrence: the part of the run id after ``@``), read
        consistently."""
        ...

    def insert_run(self, run: Run) -> bool:
        """Create a run made on request (a trigger), queued; False, and the run there left alone, when its
        run id exists (RUN_IS_NEW)."""
        ...

    def insert_runs(self, runs: Sequence[Run]) -> list[Run]:
        """Create runs made together (a backfill), each unless its run id exists (RUN_IS_NEW: the run there
        is left alone); the runs written, in order. The ids must be distinct."""
        ...

    def requeue_run(self, run: Run, now: datetime, queue_deadline: datetime) -> Run | None:
        """A failed or dead run back to queued for one more attempt (RUN_ENDED_UNSUCCESSFULLY): ``attempt``
        one up (``max_attempts`` raised to it if needed), the queue deadline ``queue_deadline``, no owner,
        lease, retry time or finish time. The run as stored after; None when it is not failed or dead (or
        gone)."""
        ...


class CalendarReader(Protocol):
    def get_calendar(self, team_id: str, name: str) -> Calendar | None:
        """The team's live calendar ``name``, read consistently; None when there is none."""
        ...
