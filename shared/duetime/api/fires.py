"""The fire ledger as the API serves it: one job's fires in a window (``GET /v1/jobs/{id}/fires``) and a
team's audit (``GET /v1/audit``: counts per label and the jobs with misses), both read from the stored runs
and the jobs' change history (``duetime.domain.fire_ledger``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from duetime.api.service import JobService
from duetime.domain.catalog import InvalidCursor
from duetime.domain.errors import BadRequest, InvalidInput
from duetime.domain.fire_ledger import DEFAULT_LATE_AFTER, MAX_FIRES, Fire, FireLabel, Ledger, is_miss, ledger
from duetime.domain.job_history import JobChange
from duetime.domain.models import Job, Team

HISTORY_PAGE = 100
MAX_HISTORY_PAGES = 50  # 5,000 changes: more than a job's 90 days hold in practice
AUDIT_JOBS_PER_PAGE = 10
MAX_AUDIT_JOBS_PER_PAGE = 25
MAX_AUDIT_FIRES_PER_JOB = 2_000  # a minutely job's day and a third; the rest are counted from the next page
MISSES_LISTED = 10  # a job's misses an audit names (its counts count them all)
READERS = 8  # jobs an audit reads at once


@dataclass(frozen=True)
class JobAudit:
    job: Job
    counts: dict[str, int]
    misses: list[Fire]  # the first MISSES_LISTED (``fire_ledger.is_miss``)
    complete: bool  # False: the job had more fires in the window than one audit reads
    missed: int = 0  # all its misses


@dataclass
class AuditPage:
    start: datetime
    end: datetime
    jobs: list[JobAudit]
    cursor: str | None
    counts: dict[str, int] = field(default_factory=dict)


class FireLedgerService:
    def __init__(self, jobs: JobService) -> None:
        self.jobs = jobs
        self.misfire_grace = jobs.misfire_grace  # the catch-up window of jobs without their own

    def fires(
        self,
        team: Team,
        job_id: str,
        start: datetime | None,
        end: datetime | None,
        late_after: timedelta = DEFAULT_LATE_AFTER,
        limit: int = MAX_FIRES,
    ) -> Ledger:
        """The job's fires in [start, end) (default: the last 24 hours up to now), in time order."""
        (job,) = self.jobs.calendar_days.resolve([self.jobs.get_job(team, job_id)])
        start, end = self._window(start, end)
        return self._ledger(job, start, end, late_after, limit, self._calendars_changed([job]))

    def audit(
        self,
        team: Team,
        start: datetime | None,
        end: datetime | None,
        limit: int = AUDIT_JOBS_PER_PAGE,
        cursor: str | None = None,
        late_after: timedelta = DEFAULT_LATE_AFTER,
    ) -> AuditPage:
        """One page of the team's jobs (in the listing's order), each with its fires in the window counted
        by label and its misses named; ``cursor`` goes on to the next page."""
        start, end = self._window(start, end)
        try:
            page = self.jobs.catalog.team_jobs(team.team_id, limit, cursor)
        except InvalidCursor as exc:
            raise BadRequest(str(exc), "cursor") from exc
        jobs: Sequence[Job] = self.jobs.calendar_days.resolve(page.items)
        changed = self._calendars_changed(jobs)

        def audited(job: Job) -> JobAudit:
            found = self._ledger(job, start, end, late_after, MAX_AUDIT_FIRES_PER_JOB, changed)
            misses = [fire for fire in found.fires if is_miss(fire)]
            return JobAudit(job, found.counts, misses[:MISSES_LISTED], found.next_from is None, len(misses))

        with ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="audit") as readers:
            audits = list(readers.map(audited, jobs))
        totals: Counter[str] = Counter()
        for one in audits:
            totals.update(one.counts)
        counts = {label.value: totals.get(label.value, 0) for label in FireLabel}
        return AuditPage(start, end, audits, page.cursor, counts)

    def _window(self, start: datetime | None, end: datetime | None) -> tuple[datetime, datetime]:
        now = self.jobs.clock.now()
        end = end or now
        start = start or end - timedelta(days=1)
        if start >= end:
            raise InvalidInput("from: must be before to", "from")
        return start, end

    def _ledger(
        self,
        job: Job,
        start: datetime,
        end: datetime,
        late_after: timedelta,
        limit: int,
        calendars_changed: dict[tuple[str, str], datetime],
    ) -> Ledger:
        now = self.jobs.clock.now()
        changes = self._changes_since(job.id, start)
        latest = max((calendars_changed[job.team, name] for name in job.calendar_names), default=None)
        return ledger(
            job,
            changes,
            self.jobs.marks.get_runs,
            start,
            end,
            now,
            late_after,
            self.misfire_grace,
            limit,
            latest,
        )

    def _calendars_changed(self, jobs: Sequence[Job]) -> dict[tuple[str, str], datetime]:
        """When each calendar the jobs use last changed (read once each): a calendar's earlier dates are not
        kept, so the ledger says which times it read with dates that changed since. One that is gone: now."""
        now = self.jobs.clock.now()
        changed: dict[tuple[str, str], datetime] = {}
        for team, name in sorted({(job.team, name) for job in jobs for name in job.calendar_names}):
            calendar = self.jobs.catalog.get_calendar(team, name)
            changed[team, name] = calendar.updated_at if calendar is not None else now
        return changed

    def _changes_since(self, job_id: str, start: datetime) -> list[JobChange]:
        """The job's changes after ``start`` (newest first, as the history lists them)."""
        changes: list[JobChange] = []
        cursor: str | None = None
        for _ in range(MAX_HISTORY_PAGES):
            page = self.jobs.catalog.job_history(job_id, HISTORY_PAGE, cursor)
            changes += page.items
            cursor = page.cursor
            if cursor is None or (changes and changes[-1].at <= start):
                break
        return [change for change in changes if change.at > start]
