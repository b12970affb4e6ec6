"""Schedules that use a team's calendars: a cron's excluded dates, and the n-th business day of a month.

Pure: the days a job's calendars exclude come in as ``DaysOff`` (a year -> its excluded dates), resolved by
whoever read the job (``duetime.scheduling.calendar_days``); nothing here reads a store or a clock.

**A cron that excludes calendars** (``Exclusion``): a nominal time whose *local date* (in the cron's zone) is
an excluded date is

- ``skip``: dropped;
- ``next_business_day`` / ``previous_business_day``: moved to the same wall time on the nearest business day
  after / before it (``business_days.roll``: Monday to Friday, not excluded). The wall time on that day
  follows the job's DST policy like any other (a rolled 02:30 onto a spring-forward day runs at 03:00 under
  ``shift``).

Only excluded dates move: a cron that runs on a Saturday that no calendar holds still runs then. Every day
of a cron has the same wall times, so times rolled onto a day fall on that day's own times or on each other's:
with ``rolled: once`` (the default) each such instant runs once (the job never fires twice on a day because
dates rolled onto it); with ``rolled: each`` every date that rolled keeps a run of its own, the k-th extra
one k seconds after the instant (at most ``MAX_ROLLED_APART`` apart: further dates share the last one), so
each has its own run id. A roll to a time at or before the time the schedule is computed from is not run
(``previous_business_day`` onto a time already past).

**The n-th business day of a month** (``BusinessDaySchedule``): n = 1, 2, ... from the month's start, -1, -2,
... from its end, at a local time in a zone; a month with fewer than ``abs(n)`` business days has no run.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from datetime import date, datetime, time, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

from duetime.domain.business_days import (
    MAX_ROLL_DAYS,
    NoBusinessDay,
    Roll,
    is_business_day,
    nth_business_day,
    roll,
)
from duetime.domain.dst import WallTimeRules, instants_of_wall_time

DaysOff = Callable[[int], Container[date]]  # a year -> the dates a job's calendars exclude in it
# A cron time -> the wall times of the cron it stands for: its own local time, or, for a time a spring-forward
# shifted to the gap's end, the cron's times in the gap (and the gap's end if the cron names it too).
WallTimesOf = Callable[[datetime], list[time]]
MAX_ROLLED_APART = 59  # seconds: rolled runs of one instant stay within its minute
MAX_CRON_MATCHES = 20_000  # cron times one step examines: 13 years of a daily cron all excluded
MAX_MONTHS = 1_200  # months a business-day step walks before it says the schedule ended (100 years)
_LOOKBACK = timedelta(hours=3)  # before a local midnight: longer than any UTC offset change


def no_days_off(year: int) -> frozenset[date]:
    """``DaysOff`` of no calendar: Monday to Friday are all business days."""
    return frozenset()


class OnExcluded(StrEnum):
    """What a cron's time on an excluded date does."""

    SKIP = "skip"
    NEXT_BUSINESS_DAY = "next_business_day"
    PREVIOUS_BUSINESS_DAY = "previous_business_day"


class RolledRuns(StrEnum):
    """Runs rolled onto one instant: one run (``once``), or one per date rolled (``each``)."""

    ONCE = "once"
    EACH = "each"


class YearDays:
    """``DaysOff`` over any date: ``days(date.year)`` looked up per year, each year's container kept."""

    def __init__(self, days: DaysOff) -> None:
        self._days = days
        self._years: dict[int, Container[date]] = {}

    def __contains__(self, day: object) -> bool:
        if not isinstance(day, date):
            return False
        year = self._years.get(day.year)
        if year is None:
            year = self._years[day.year] = self._days(day.year)
        return day in year


def _local(instant: datetime, zone: ZoneInfo) -> datetime:
    return instant.astimezone(zone).replace(tzinfo=None)


def _day_start(day: date, zone: ZoneInfo) -> datetime:
    """An instant before every instant of ``day`` in ``zone`` (its local midnight, less a margin)."""
    return datetime.combine(day, time(), tzinfo=zone) - _LOOKBACK


def _rolled(
    nominal: datetime,
    zone: ZoneInfo,
    excluded: YearDays,
    on_excluded: OnExcluded,
    rules: WallTimeRules,
    wall_times: WallTimesOf | None,
) -> list[datetime]:
    """The instants a cron time ``nominal`` runs at under the exclusion: itself, none, or the cron's wall
    times it stands for (``wall_times``) on the business day it rolls to (two under the ``both`` overlap
    policy)."""
    local = _local(nominal, zone)
    if local.date() not in excluded:
        return [nominal]
    if on_excluded is OnExcluded.SKIP:
        return []
    direction = Roll.NEXT if on_excluded is OnExcluded.NEXT_BUSINESS_DAY else Roll.PREVIOUS
    try:
        day = roll(local.date(), excluded, direction)
    except NoBusinessDay:
        return []
    # A time a spring-forward shifted to the gap's end stands for the cron's wall time in the gap: that
    # wall time is what rolls (the day it lands on has it too), not the gap's end.
    stood_for = wall_times(nominal) if wall_times is not None else [local.time()]
    return sorted(
        {
            instant
            for wall in stood_for
            for instant in instants_of_wall_time(datetime.combine(day, wall), zone, rules)
        }
    )


def excluded_next_after(
    cron_next: Callable[[datetime], datetime | None],
    zone: ZoneInfo,
    days: DaysOff,
    on_excluded: OnExcluded,
    rolled: RolledRuns,
    rules: WallTimeRules,
    after: datetime,
    wall_times: WallTimesOf | None = None,
) -> datetime | None:
    """The first instant strictly after ``after`` at which a cron that excludes ``days`` runs (module rules);
    ``cron_next(t)`` is the cron's own next time after ``t``, None when it has ended; ``wall_times(t)`` the
    cron's wall times its time ``t`` stands for (default: t's local time). None: no run follows (within
    ``MAX_CRON_MATCHES`` of the cron's times)."""
    excluded = YearDays(days)
    if on_excluded is OnExcluded.SKIP:
        nominal = cron_next(after)
        for _ in range(MAX_CRON_MATCHES):
            if nominal is None or _local(nominal, zone).date() not in excluded:
                return nominal
            nominal = cron_next(nominal)
        return None
    # Which cron times may run after ``after``: rolling forward, those from the run of days off just before
    # after's date on; rolling back, those from after's date on. The walk ends past the day of the best
    # instant found (forward: later times roll to later days) or at the first business day after it (back: a
    # later time rolls no further back than that day; a cron of weekends only never runs on one itself).
    start = _local(after, zone).date()
    forward = on_excluded is OnExcluded.NEXT_BUSINESS_DAY
    if forward:
        for _ in range(MAX_ROLL_DAYS):
            if is_business_day(start - timedelta(days=1), excluded):
                break
            start -= timedelta(days=1)
    found: list[tuple[datetime, datetime]] = []  # (instant it runs at, cron time), every one walked
    best: date | None = None  # the day of the earliest instant found after ``after``
    stop = date.max  # cron times from this day on cannot run before ``best``'s day ends
    nominal = cron_next(_day_start(start, zone))
    for _ in range(MAX_CRON_MATCHES):
        if nominal is None:
            break
        day = _local(nominal, zone).date()
        if day >= stop:
            break
        for instant in _rolled(nominal, zone, excluded, on_excluded, rules, wall_times):
            found.append((instant, nominal))
            if instant > after and (best is None or _local(instant, zone).date() < best):
                best = _local(instant, zone).date()
                stop = _walk_end(best, forward, excluded)
        nominal = cron_next(nominal)
    runs = [run for run in _spread(found, rolled) if run > after]
    return min(runs) if runs else None


def _walk_end(best: date, forward: bool, excluded: YearDays) -> date:
    """The first day whose cron times all run after ``best`` (a day a run was found on): rolling forward, the
    day after it; rolling back, the first business day after it (a time on it or later rolls back to it at
    the earliest)."""
    following = best + timedelta(days=1) if best < date.max else best
    if forward:
        return following
    try:
        return roll(following, excluded, Roll.NEXT)
    except (NoBusinessDay, OverflowError):  # no business day after it: walk on to the limit
        return date.max


def _spread(found: list[tuple[datetime, datetime]], rolled: RolledRuns) -> list[datetime]:
    """The run instants of ``found`` (``_runs_of``)."""
    return sorted(set(_runs_of(found, rolled).values()))


def _runs_of(
    found: list[tuple[datetime, datetime]], rolled: RolledRuns
) -> dict[tuple[datetime, datetime], datetime]:
    """Each (instant, cron time) of ``found`` -> the instant it runs at: the instant itself (``once``: one
    run however many times fall on it), or under ``each`` the instant for the instant's own cron time and k
    seconds after it for the k-th other cron time rolled onto it."""
    if rolled is RolledRuns.ONCE:
        return {pair: pair[0] for pair in found}
    runs: dict[tuple[datetime, datetime], datetime] = {}
    extra: dict[datetime, int] = {}
    for pair in sorted(set(found), key=lambda pair: (pair[0], pair[1] != pair[0], pair[1])):
        k = extra[pair[0]] = extra.get(pair[0], -1) + 1
        runs[pair] = pair[0] + timedelta(seconds=min(k, MAX_ROLLED_APART))
    return runs


def excluded_runs(
    cron_times: list[datetime],
    zone: ZoneInfo,
    days: DaysOff,
    on_excluded: OnExcluded,
    rolled: RolledRuns,
    rules: WallTimeRules,
    wall_times: WallTimesOf | None = None,
) -> dict[datetime, list[datetime]]:
    """Of the cron's own times ``cron_times`` (consecutive, in order), those on excluded dates -> the instants
    they run at instead: none (skipped, or no business day to roll to), or where they rolled (under ``each``,
    the second they were spread to). For previews: ``cron_times`` should start before the run of days off
    that rolls into the times shown, so each's spreading counts every time rolled onto an instant."""
    excluded = YearDays(days)
    found = [
        (instant, nominal)
        for nominal in cron_times
        for instant in _rolled(nominal, zone, excluded, on_excluded, rules, wall_times)
    ]
    runs = _runs_of(found, rolled)
    out: dict[datetime, list[datetime]] = {
        nominal: [] for nominal in cron_times if _local(nominal, zone).date() in excluded
    }
    for (_, nominal), run in runs.items():
        if nominal in out:
            out[nominal].append(run)
    return {nominal: sorted(set(moved)) for nominal, moved in out.items()}


def business_day_next_after(
    n: int, at: time, zone: ZoneInfo, days: DaysOff, rules: WallTimeRules, after: datetime
) -> datetime | None:
    """The first instant strictly after ``after`` that is the ``n``-th business day of its month at the
    local time ``at`` (module rules); None when no month within ``MAX_MONTHS`` has one."""
    local = _local(after, zone)
    year, month = local.year, local.month
    for _ in range(MAX_MONTHS):
        day = nth_business_day(year, month, n, days(year))
        if day is not None:
            for instant in instants_of_wall_time(datetime.combine(day, at), zone, rules):
                if instant > after:
                    return instant
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
        if year > 9998:
            return None
    return None
