"""Resolving the calendars of the jobs a poller claims (or the API plans): each job gets the dates its
calendars hold now (``JobSpec.with_days_off``), read from the team's calendars.

Every resolve reads each calendar it needs again, consistently, *after* the jobs were read: a calendar
change writes the calendar first and then re-plans the jobs that use it (``duetime.api.calendar_jobs``), so a
job read after its re-plan is resolved with the calendar that re-plan used or a newer one, never an older one.
The dates are those stored with the calendar when it was written (``Calendar.stored_days``): a claim decodes
them and never expands an iCalendar (a year not stored is computed within bounds, ``domain.calendars``).
The dates of a calendar version are cached for good ((team, name, version) names one content). Jobs that use
no calendar cost nothing here.

A calendar a job names but the team no longer has (a delete is refused while a job uses it, so only by a
fault) resolves to no dates: the job runs as if it excluded nothing, rather than not at all; it is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TypeVar

from duetime.domain.calendar_rules import no_days_off
from duetime.domain.calendars import Calendar, CalendarDates
from duetime.domain.models import Job, JobSpec
from duetime.ports import CalendarReader

log = logging.getLogger(__name__)

MAX_CACHED = 1_024  # sets of calendar versions whose dates are kept
J = TypeVar("J", bound=Job)
S = TypeVar("S", bound=JobSpec)


class CalendarDays:
    """Resolves jobs' calendars from ``reader`` (the catalog's calendars)."""

    def __init__(self, reader: CalendarReader) -> None:
        self.reader = reader
        self._dates: dict[tuple[tuple[str, str, int], ...], CalendarDates] = {}

    def current(self, team_id: str, names: Sequence[str]) -> dict[str, Calendar | None]:
        """The team's live calendars of ``names``, one consistent read each."""
        return {name: self.reader.get_calendar(team_id, name) for name in dict.fromkeys(names)}

    def resolve(self, jobs: Sequence[J]) -> list[J]:
        """``jobs``, each that uses calendars with their current dates; the others as they are."""
        wanted = sorted({(job.team, name) for job in jobs for name in job.calendar_names})
        if not wanted:
            return list(jobs)
        live = {(team, name): self.reader.get_calendar(team, name) for team, name in wanted}
        return [
            self.with_calendars(job, [live[job.team, name] for name in job.calendar_names])
            if job.calendar_names
            else job
            for job in jobs
        ]

    def with_calendars(self, job: S, calendars: Sequence[Calendar | None]) -> S:
        """``job`` with the dates of ``calendars`` (its calendars, in order; None for one that is gone)."""
        held = [calendar for calendar in calendars if calendar is not None]
        if len(held) != len(calendars):
            missing = [n for n, c in zip(job.calendar_names, calendars, strict=True) if c is None]
            log.error(
                "job's calendars are gone: it runs as if they held no dates", extra={"calendars": missing}
            )
        key = tuple(calendar.key for calendar in held)
        dates = self._dates.get(key)
        if dates is None:
            if len(self._dates) >= MAX_CACHED:
                self._dates.clear()
            dates = self._dates[key] = CalendarDates(held)
        return job.with_days_off(dates)


def resolve_calendars(jobs: list[Job], calendars: CalendarDays | None) -> list[Job]:
    """``jobs`` ready for their claims: those that use calendars with the dates they hold now; with no
    ``calendars`` to read, with no dates (logged: such a job runs rather than not at all)."""
    if not any(job.calendar_names for job in jobs):
        return jobs
    if calendars is None:
        log.error("jobs use calendars but this poller reads none: they run as if they excluded nothing")
        return [job.with_days_off(no_days_off) if job.calendar_names else job for job in jobs]
    return calendars.resolve(jobs)
