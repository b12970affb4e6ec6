"""Previews: a job's next runs as the scheduler will give them, and what daylight saving and the job's
calendars did to them (``GET /v1/jobs/{id}/preview``, ``duetime preview``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from duetime.domain.calendar_rules import MAX_ROLLED_APART
from duetime.domain.calendars import CalendarDates, named_days_of_year
from duetime.domain.dst import DstEffect
from duetime.domain.models import CronSchedule, JobSpec
from duetime.domain.schedule import (
    dst_effect,
    excluded_times_between,
    fire_time,
    next_nominal_after,
    rate_anchor,
    skipped_wall_times,
)

EXCLUDED_LOOKBACK = timedelta(days=15)  # a preview's first run may stand for excluded times this far back
MAX_EXCLUDED_SCAN = 5_000  # the cron's own times a preview examines for excluded dates


@dataclass(frozen=True)
class UpcomingRun:
    nominal_at: datetime
    fire_at: datetime
    dst_effect: DstEffect | None = None  # what daylight saving did to it, if anything
    rolled_from: tuple[date, ...] = ()  # excluded dates whose time rolled onto this run

    @property
    def dst_shifted(self) -> bool:
        """Moved out of a spring-forward gap (the ``moved`` effect), as clients have long read it."""
        return self.dst_effect is DstEffect.MOVED


@dataclass(frozen=True)
class ExcludedTime:
    """A time of the cron on a date its calendars exclude, and what became of it."""

    scheduled_at: datetime  # the cron's own time on that date
    day: date  # the date, local to the cron's zone
    calendars: tuple[str, ...]  # the job's calendars that hold it
    holiday: str | None  # its name in the first of them that names it
    runs_at: tuple[datetime, ...]  # the runs it rolled to (two under the overlap policy both); none: skipped

    @property
    def rolled_to(self) -> datetime | None:
        """The (first) run it rolled to; None: skipped."""
        return self.runs_at[0] if self.runs_at else None


@dataclass(frozen=True)
class Preview:
    runs: list[UpcomingRun]
    skipped: list[datetime]  # wall times (naive, local) a gap skipped among the runs, that get no run
    # the cron's times on dates its calendars exclude, up to the last run
    excluded: list[ExcludedTime] = dataclasses.field(default_factory=list)


def upcoming_runs(
    job: JobSpec, job_id: str | None, created_at: datetime, after: datetime, count: int
) -> list[UpcomingRun]:
    """The next ``count`` nominal times strictly after ``after``, with fire times when the id is known."""
    anchor = rate_anchor(job, created_at)
    out: list[UpcomingRun] = []
    nominal = next_nominal_after(job, anchor, after)
    while nominal is not None and len(out) < count:
        following = next_nominal_after(job, anchor, nominal)
        fire = fire_time(job_id, job, nominal, following) if job_id else nominal
        out.append(UpcomingRun(nominal, fire, dst_effect(job, nominal)))
        nominal = following
    return out


def preview_of(
    job: JobSpec, job_id: str | None, created_at: datetime, after: datetime, count: int
) -> Preview:
    """``upcoming_runs``, the wall times spring-forward skipped between ``after`` and the last of them that
    the job's DST policy does not run, and the cron's times on dates its calendars exclude (a job that uses
    calendars must have them resolved: ``JobSpec.with_days_off``)."""
    runs = upcoming_runs(job, job_id, created_at, after, count)
    skipped = skipped_wall_times(job, after, runs[-1].nominal_at) if runs else []
    excluded = _excluded_times(job, after, runs[-1].nominal_at if runs else after)
    rolled: dict[datetime, list[date]] = {}
    for time in excluded:
        for run in time.runs_at:
            rolled.setdefault(run, []).append(time.day)
    runs = [replace(run, rolled_from=tuple(rolled.get(run.nominal_at, ()))) for run in runs]
    return Preview(runs, skipped, excluded)


def _excluded_times(job: JobSpec, after: datetime, last: datetime) -> list[ExcludedTime]:
    """The cron's own times on excluded dates whose runs (or, skipped, themselves) fall in (after, last],
    named by their calendars."""
    if job.exclude is None:
        return []
    # A time rolled forward onto the first run may come from days before ``after``: look back a while.
    found = excluded_times_between(
        job, after - EXCLUDED_LOOKBACK, last + timedelta(seconds=MAX_ROLLED_APART + 1), MAX_EXCLUDED_SCAN
    )
    days = job.days_off()
    calendars = days.calendars if isinstance(days, CalendarDates) else ()
    zone = ZoneInfo(job.schedule.timezone) if isinstance(job.schedule, CronSchedule) else UTC
    out: list[ExcludedTime] = []
    for nominal, runs_at in sorted(found.items()):
        shown = runs_at[0] if runs_at else nominal
        if not after < shown <= last:
            continue
        day = nominal.astimezone(zone).date()
        named = [(c.name, named_days_of_year(c, day.year)) for c in calendars]
        holding = tuple(name for name, held in named if day in held)
        holiday = next((held[day] for _, held in named if held.get(day)), None)
        out.append(ExcludedTime(nominal, day, holding, holiday, tuple(runs_at)))
    return out
