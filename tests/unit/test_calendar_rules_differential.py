"""Schedules that read calendars against answers built here without duetime's calendar code: the n-th business
day of a month from the ``holidays`` package and ``numpy.busday_offset``, and a cron's excluded dates from the
cron's own times (the same job without ``exclude``) mapped one by one with numpy's roll. Random countries,
years 2000 to 2040, zones, times; hypothesis derandomized, so every run tries the same examples."""

from __future__ import annotations

import calendar
import warnings
from collections import defaultdict
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import holidays
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.domain.calendar_rules import MAX_ROLLED_APART
from duetime.domain.calendars import CalendarDates, CalendarSpec
from duetime.domain.models import JobSpec
from duetime.domain.schedule import next_nominal_after, nominals_between

COUNTRIES = ["FR", "DE", "US", "GB", "JP", "BR", "IN", "AU", "ZA", "ES", "IT", "PL"]
# Zones whose clocks change on weekdays (Jerusalem on a Friday, Cairo on a Thursday or Friday) or at
# midnight (Santiago, Cairo), a 30-minute change (Lord Howe), none (Kolkata, UTC), and the usual ones.
ZONES = [
    "UTC",
    "Europe/Paris",
    "America/New_York",
    "Asia/Tokyo",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "Asia/Jerusalem",
    "Africa/Cairo",
    "America/Santiago",
    "America/Sao_Paulo",
    "Asia/Kolkata",
    "Pacific/Auckland",
]
TARGET = {"url": "https://example.com/hook"}
SEARCH = settings(max_examples=300, deadline=None, derandomize=True)


def public_holidays(country: str, years: range) -> list[date]:
    """The country's holidays straight from the ``holidays`` package (numpy's ``holidays=``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return sorted(holidays.country_holidays(country, years=list(years)))


def resolved(body: dict[str, Any], country: str, extra: list[date]) -> JobSpec:
    """The job, its calendars the country's holidays and the ``extra`` dates."""
    sources: list[dict[str, Any]] = [{"holidays": {"country": country}}]
    if extra:
        sources.append({"dates": [day.isoformat() for day in extra]})
    specs = [CalendarSpec.model_validate({"name": f"c{n}", "source": s}) for n, s in enumerate(sources)]
    return JobSpec.model_validate({"name": "j", "target": TARGET, **body}).with_days_off(CalendarDates(specs))


def job_times(spec: JobSpec, after: datetime, end: datetime) -> list[datetime]:
    """The job's times in (after, end), by ``next_nominal_after`` one after another."""
    out: list[datetime] = []
    at: datetime | None = after
    while at is not None and (at := next_nominal_after(spec, after, at)) is not None and at < end:
        out.append(at)
    return out


def wall_time_instant(day: date, wall: time, zone: ZoneInfo) -> datetime:
    """Where a schedule naming ``wall`` on ``day`` runs by default: the wall time's first occurrence, or, if
    spring-forward skipped it, the first whole minute after it that exists."""
    naive = datetime.combine(day, wall)
    while (exists := naive.replace(tzinfo=zone)).astimezone(UTC).astimezone(zone).replace(
        tzinfo=None
    ) != naive:
        naive += timedelta(minutes=1)
    return exists.replace(fold=0).astimezone(UTC)


def numpy_nth_business_day(year: int, month: int, n: int, days_off: list[date]) -> date | None:
    first, last = date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])
    if n > 0:
        found = np.busday_offset(first, n - 1, roll="forward", holidays=days_off)
    else:
        found = np.busday_offset(last, n + 1, roll="backward", holidays=days_off)
    day: date = found.astype(object)
    return day if first <= day <= last else None


def months(year: int, month: int, count: int) -> list[tuple[int, int]]:
    return [(year + (month - 1 + k) // 12, (month - 1 + k) % 12 + 1) for k in range(count)]


@SEARCH
@given(
    country=st.sampled_from(COUNTRIES),
    year=st.integers(2000, 2040),
    month=st.integers(1, 12),
    n=st.integers(1, 23) | st.integers(-23, -1),
    zone_name=st.sampled_from(ZONES),
    hour=st.integers(0, 23),
    minute=st.sampled_from([0, 15, 30, 45, 59]),
)
def test_the_nth_business_day_over_24_months_is_numpys_count(
    country: str, year: int, month: int, n: int, zone_name: str, hour: int, minute: int
) -> None:
    zone, wall = ZoneInfo(zone_name), time(hour, minute)
    schedule = {"business_day": n, "at": wall.strftime("%H:%M"), "timezone": zone_name, "calendars": ["c0"]}
    spec = resolved({"schedule": schedule}, country, [])
    window = months(year, month, 25)
    start = datetime(*window[0], 1, tzinfo=zone).astimezone(UTC) - timedelta(seconds=1)
    end = datetime(*window[-1], 1, tzinfo=zone).astimezone(UTC)
    days_off = public_holidays(country, range(year, year + 3))
    expected = [
        wall_time_instant(day, wall, zone)
        for y, m in window[:-1]
        if (day := numpy_nth_business_day(y, m, n, days_off)) is not None
    ]
    assert job_times(spec, start, end) == expected


# --- a cron's excluded dates ------------------------------------------------------------------------------
# The crons run between 04:00 and 22:59, where no zone here changes its clocks: a rolled wall time is one
# instant, so the answer below needs no DST rule (test_calendar_rules has the rolls through DST).

CRONS = [
    "{m} {h} * * *",
    "{m} {h} * * 1-5",
    "{m} {h} * * MON",
    "{m} {h} * * 5",
    "{m} {h} * * SAT,SUN",
    "{m} {h},22 * * *",
    "{m} {h} 1,15,31 * *",
    "*/30 8-10 * * *",
]
MARGIN = timedelta(days=40)  # longer than any run of days off here, so every roll into the window is seen


def by_the_rule(
    own: list[datetime], zone: ZoneInfo, days_off: list[date], on_excluded: str, rolled: str
) -> list[datetime]:
    """The runs of the cron's own times ``own`` under the exclusion: a time on a date off dropped or moved to
    its wall time on numpy's next/previous business day; instants one run each (``once``), or a run per time
    (``each``: the day's own time first, then the rolled ones in order, the k-th k seconds later)."""
    off = set(days_off)
    onto: dict[datetime, list[tuple[bool, datetime]]] = defaultdict(list)
    for at in own:
        local = at.astimezone(zone)
        if local.date() not in off:
            onto[at].append((False, at))
        elif on_excluded != "skip":
            way = "forward" if on_excluded == "next_business_day" else "backward"
            day = np.busday_offset(local.date(), 0, roll=way, holidays=days_off).astype(object)
            moved = datetime.combine(day, local.time(), tzinfo=zone).astimezone(UTC)
            onto[moved].append((True, at))
    if rolled == "once":
        return sorted(onto)
    return sorted(
        instant + timedelta(seconds=min(k, MAX_ROLLED_APART))
        for instant, times in onto.items()
        for k, _ in enumerate(sorted(times))
    )


@SEARCH
@given(
    country=st.sampled_from(COUNTRIES),
    first=st.dates(min_value=date(2000, 2, 1), max_value=date(2040, 10, 31)),
    cron=st.sampled_from(CRONS),
    hour=st.integers(4, 21),
    minute=st.integers(0, 59),
    zone_name=st.sampled_from(ZONES),
    on_excluded=st.sampled_from(["skip", "next_business_day", "previous_business_day"]),
    rolled=st.sampled_from(["once", "each"]),
    block=st.tuples(st.integers(0, 50), st.integers(0, 6)),
)
def test_a_crons_excluded_dates_follow_numpys_roll_of_its_own_times(
    country: str,
    first: date,
    cron: str,
    hour: int,
    minute: int,
    zone_name: str,
    on_excluded: str,
    rolled: str,
    block: tuple[int, int],
) -> None:
    zone = ZoneInfo(zone_name)
    schedule = {"cron": cron.format(m=minute, h=hour), "timezone": zone_name}
    exclude = {"calendars": ["c0", "c1"], "on_excluded": on_excluded, "rolled": rolled}
    # Besides the holidays, a run of 0 to 6 days off of its own (with a weekend, up to 10 in a row).
    extra = [first + timedelta(days=block[0] + k) for k in range(block[1])]
    spec = resolved({"schedule": schedule, "exclude": exclude}, country, extra)
    plain = JobSpec.model_validate({"name": "j", "target": TARGET, "schedule": schedule})
    start = datetime.combine(first, time(), tzinfo=zone).astimezone(UTC)
    end = start + timedelta(days=60)
    own = nominals_between(plain, start, start - MARGIN, end + MARGIN, 100_000)
    days_off = sorted({*public_holidays(country, range(first.year - 1, first.year + 2)), *extra})
    expected = [at for at in by_the_rule(own, zone, days_off, on_excluded, rolled) if start < at < end]
    assert job_times(spec, start, end) == expected
