"""Schedules that read a team's calendars, through ``next_nominal_after`` (the rules of
``duetime.domain.calendar_rules``): a cron's excluded dates skipped or rolled to the next or previous business
day, rolled runs ``once`` or ``each``, rolled wall times through daylight saving, the n-th business day of a
month, and the 422s that name the field. Dates used (2026 unless said): 25 Dec a Friday, 6 Apr (Easter
Monday in France) a Monday, 15 Aug (Assumption) a Saturday, 31 Dec 2025 a Wednesday."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from duetime.domain.calendar_rules import MAX_ROLLED_APART
from duetime.domain.calendars import CalendarDates, CalendarSpec
from duetime.domain.errors import from_validation_error
from duetime.domain.models import CalendarsNotResolved, JobSpec
from duetime.domain.schedule import next_nominal_after

PARIS, NY, JERUSALEM, CAIRO = "Europe/Paris", "America/New_York", "Asia/Jerusalem", "Africa/Cairo"
TARGET = {"url": "https://example.com/hook"}


def calendars(*sources: dict[str, Any]) -> CalendarDates:
    """The union of calendars of these sources (``{"holidays": {"country": "FR"}}``, ``{"dates": [...]}``)."""
    return CalendarDates(
        [CalendarSpec.model_validate({"name": f"c{n}", "source": s}) for n, s in enumerate(sources)]
    )


def french(*extra: str) -> CalendarDates:
    """France's public holidays, and ``extra`` dates (YYYY-MM-DD) besides."""
    sources: list[dict[str, Any]] = [{"holidays": {"country": "FR"}}]
    return calendars(*sources, {"dates": list(extra)}) if extra else calendars(*sources)


def dates(*days: str) -> CalendarDates:
    return calendars({"dates": list(days)})


def cron_job(
    cron: str, zone: str, days: CalendarDates, on_excluded: str = "skip", rolled: str = "once", **more: Any
) -> JobSpec:
    exclude = {"calendars": ["holidays"], "on_excluded": on_excluded, "rolled": rolled}
    body = {"name": "j", "schedule": {"cron": cron, "timezone": zone}, "exclude": exclude, "target": TARGET}
    return JobSpec.model_validate({**body, **more}).with_days_off(days)


def business_day_job(n: int, at: str, zone: str, days: CalendarDates | None = None, **more: Any) -> JobSpec:
    schedule = {"business_day": n, "at": at, "timezone": zone, "calendars": ["holidays"] if days else []}
    spec = JobSpec.model_validate({"name": "j", "schedule": schedule, "target": TARGET, **more})
    return spec.with_days_off(days) if days is not None else spec


def instant(text: str) -> datetime:
    """``2026-12-28T09:00+01:00`` (a local time with its offset) as a UTC instant."""
    return datetime.fromisoformat(text).astimezone(UTC)


def runs(spec: JobSpec, after: str, count: int) -> list[datetime]:
    """The job's next ``count`` times strictly after ``after`` (fewer if it ends)."""
    out: list[datetime] = []
    anchor = at = instant(after)
    while len(out) < count:
        found = next_nominal_after(spec, anchor, at)
        if found is None:
            break
        out.append(at := found)
    return out


def local(times: Iterable[datetime], zone: str) -> list[str]:
    """Times as local ``MM-DDTHH:MM[:SS]+HH:MM`` text (seconds only when not 0)."""
    shown = []
    for at in times:
        text = at.astimezone(ZoneInfo(zone)).isoformat()[5:]
        shown.append(text.replace(":00+", "+").replace(":00-", "-") if at.second == 0 else text)
    return shown


# --- skip --------------------------------------------------------------------------------------------------


def test_a_cron_that_skips_holidays_does_not_run_on_them() -> None:
    weekdays = cron_job("0 9 * * 1-5", PARIS, french())
    assert local(runs(weekdays, "2026-12-23T12:00+01:00", 3), PARIS) == [
        "12-24T09:00+01:00",
        "12-28T09:00+01:00",  # Friday 25 December is Christmas
        "12-29T09:00+01:00",
    ]


def test_skip_looks_at_the_local_date_in_the_crons_zone_not_at_utc() -> None:
    # 00:30 in Paris on 25 December is 23:30 UTC on the 24th: it is Christmas there, so it does not run.
    nightly = cron_job("30 0 * * *", PARIS, french())
    assert local(runs(nightly, "2026-12-24T01:00+01:00", 2), PARIS) == [
        "12-26T00:30+01:00",
        "12-27T00:30+01:00",
    ]


def test_a_skipped_run_of_holidays_only_ends_with_the_next_day_the_calendars_do_not_hold() -> None:
    fortnight = [(date(2026, 8, 1) + timedelta(days=n)).isoformat() for n in range(14)]
    daily = cron_job("0 6 * * *", "UTC", dates(*fortnight))
    assert local(runs(daily, "2026-07-31T12:00+00:00", 1), "UTC") == ["08-15T06:00+00:00"]


# --- next and previous business day ------------------------------------------------------------------------


def test_a_friday_holiday_rolls_to_monday() -> None:
    daily = cron_job("0 9 * * 1-5", PARIS, french(), "next_business_day")
    assert local(runs(daily, "2026-12-24T12:00+01:00", 2), PARIS) == [
        "12-28T09:00+01:00",
        "12-29T09:00+01:00",
    ]


def test_a_monday_holiday_rolls_back_to_friday() -> None:
    weekly = cron_job("0 9 * * MON", PARIS, french(), "previous_business_day")
    assert local(runs(weekly, "2026-03-30T12:00+02:00", 2), PARIS) == [
        "04-03T09:00+02:00",  # Easter Monday, 6 April, run the Friday before
        "04-13T09:00+02:00",
    ]


def test_a_run_of_holidays_and_a_weekend_rolls_to_the_first_business_day_after_them() -> None:
    # 24 (Thu), 25 (Fri) and 26 (Sat) December held, then a weekend: both weekdays run on Monday 28, once.
    weekdays = cron_job(
        "0 9 * * 1-5", PARIS, dates("2026-12-24", "2026-12-25", "2026-12-26"), "next_business_day"
    )
    assert local(runs(weekdays, "2026-12-23T12:00+01:00", 3), PARIS) == [
        "12-28T09:00+01:00",
        "12-29T09:00+01:00",
        "12-30T09:00+01:00",
    ]


def test_a_saturday_the_calendars_do_not_hold_still_runs_and_one_they_hold_rolls() -> None:
    saturdays = cron_job("0 10 * * SAT", PARIS, french(), "next_business_day")
    assert local(runs(saturdays, "2026-08-14T12:00+02:00", 3), PARIS) == [
        "08-17T10:00+02:00",  # Saturday 15 August (Assumption) rolls to Monday
        "08-22T10:00+02:00",  # an ordinary Saturday runs as the cron says
        "08-29T10:00+02:00",
    ]


def test_a_roll_across_the_year_end_reads_both_years_holidays() -> None:
    # 31 Dec 2025 (a Wednesday, held by a dates calendar) -> 1 Jan 2026 (France's holiday) -> Friday 2 Jan.
    daily = cron_job("0 18 * * *", PARIS, french("2025-12-31"), "next_business_day")
    assert local(runs(daily, "2025-12-30T19:00+01:00", 2), PARIS) == [
        "01-02T18:00+01:00",
        "01-03T18:00+01:00",
    ]
    back = cron_job("0 18 * * *", PARIS, french("2026-01-02"), "previous_business_day")
    assert local(runs(back, "2025-12-30T19:00+01:00", 2), PARIS) == [
        "12-31T18:00+01:00",  # its own time; 1 and 2 January roll back onto it, the same instant: once
        "01-03T18:00+01:00",
    ]


def test_a_weekend_cron_rolled_back_finds_its_next_run_without_walking_its_times_for_years() -> None:
    # Its times are never on a business day, so the walk ends at the first business day after the run found.
    weekends = cron_job("0 10 * * SAT,SUN", PARIS, french(), "previous_business_day")
    assert local(runs(weekends, "2026-08-13T12:00+02:00", 3), PARIS) == [
        "08-14T10:00+02:00",  # Saturday 15 August (Assumption) rolled back to Friday
        "08-16T10:00+02:00",
        "08-22T10:00+02:00",
    ]


def test_a_roll_back_onto_a_time_already_past_is_not_run() -> None:
    weekly = cron_job("0 9 * * MON", PARIS, french(), "previous_business_day")
    # Computed from Friday 3 April at 10:00: Monday 6's run rolled to 09:00 that Friday, already past.
    assert local(runs(weekly, "2026-04-03T10:00+02:00", 1), PARIS) == ["04-13T09:00+02:00"]


def test_a_time_whose_roll_finds_no_business_day_within_ten_years_is_dropped_not_hung_on() -> None:
    # Every day from 2026 to 13 December 2036 held: no roll from mid-2026 reaches a business day within
    # ten years (MAX_ROLL_DAYS), so those times are dropped; the first run is the first day not held.
    every_day = dates(*[(date(2026, 1, 1) + timedelta(days=n)).isoformat() for n in range(4_000)])
    daily = cron_job("0 9 * * *", "UTC", every_day, "next_business_day")
    assert local(runs(daily, "2026-06-01T00:00+00:00", 1), "UTC") == ["12-14T09:00+00:00"]
    assert runs(daily, "2026-06-01T00:00+00:00", 1)[0].year == 2036


# --- rolled: once or each ----------------------------------------------------------------------------------


def test_rolled_once_never_runs_twice_on_one_day_because_dates_rolled_onto_it() -> None:
    daily = cron_job("0 9,17 * * *", PARIS, dates("2026-12-24", "2026-12-25"), "next_business_day")
    shown = local(runs(daily, "2026-12-23T18:00+01:00", 6), PARIS)
    # The weekend runs as the cron says; Thursday's and Friday's times join Monday's own, once each.
    assert shown == [
        "12-26T09:00+01:00",
        "12-26T17:00+01:00",
        "12-27T09:00+01:00",
        "12-27T17:00+01:00",
        "12-28T09:00+01:00",
        "12-28T17:00+01:00",
    ]
    assert len(set(shown)) == len(shown)


def test_rolled_once_onto_a_day_the_cron_does_not_run_is_one_run() -> None:
    weekly = cron_job("0 9 * * THU,FRI", PARIS, dates("2026-12-24", "2026-12-25"), "next_business_day")
    assert local(runs(weekly, "2026-12-23T12:00+01:00", 2), PARIS) == [
        "12-28T09:00+01:00",
        "12-31T09:00+01:00",
    ]


def test_rolled_each_gives_every_date_its_own_run_the_kth_extra_k_seconds_later() -> None:
    weekdays = cron_job(
        "0 9 * * 1-5", PARIS, dates("2026-12-24", "2026-12-25", "2026-12-26"), "next_business_day", "each"
    )
    shown = runs(weekdays, "2026-12-23T12:00+01:00", 4)
    assert local(shown, PARIS) == [
        "12-28T09:00+01:00",  # Monday's own time keeps the instant
        "12-28T09:00:01+01:00",  # Thursday 24's
        "12-28T09:00:02+01:00",  # Friday 25's (Saturday 26 is held but the cron does not run then)
        "12-29T09:00+01:00",
    ]
    assert len(set(shown)) == len(shown)


def test_rolled_each_back_onto_a_day_spreads_the_same_way() -> None:
    monday_tuesday = cron_job(
        "0 9 * * 1-5", PARIS, dates("2026-12-28", "2026-12-29"), "previous_business_day", "each"
    )
    assert local(runs(monday_tuesday, "2026-12-24T12:00+01:00", 4), PARIS) == [
        "12-25T09:00+01:00",
        "12-25T09:00:01+01:00",
        "12-25T09:00:02+01:00",
        "12-30T09:00+01:00",
    ]


def test_rolled_each_keeps_every_run_within_its_minute() -> None:
    days = [(date(2026, 6, 1) + timedelta(days=n)).isoformat() for n in range(90)]
    daily = cron_job("0 9 * * *", "UTC", dates(*days), "next_business_day", "each")
    shown = runs(daily, "2026-08-30T12:00+00:00", 62)
    assert shown[0] == instant("2026-08-31T09:00+00:00")  # Monday 31 August: its own run and 90 rolled
    assert shown[MAX_ROLLED_APART] == shown[0] + timedelta(seconds=MAX_ROLLED_APART)
    assert shown[MAX_ROLLED_APART + 1] == instant("2026-09-01T09:00+00:00")  # further dates share the last


def test_rolled_each_with_a_job_that_has_no_roll_is_the_plain_cron() -> None:
    plain = cron_job("0 9 * * 1-5", PARIS, dates("2027-06-01"), "next_business_day", "each")
    assert local(runs(plain, "2026-12-23T12:00+01:00", 3), PARIS) == [
        "12-24T09:00+01:00",
        "12-25T09:00+01:00",
        "12-28T09:00+01:00",
    ]


# --- rolled wall times through daylight saving -------------------------------------------------------------
# Paris and New York change their clocks on Sundays, which are never business days: a roll cannot land on
# their change days. Jerusalem springs forward on a Friday (27 March 2026, 02:00 -> 03:00) and Cairo falls
# back on a Thursday (29 October 2026, 24:00 -> 23:00): real rolls onto a change day.


def test_a_0230_rolled_onto_jerusalems_spring_forward_friday_runs_at_0300_under_shift() -> None:
    daily = cron_job("30 2 * * *", JERUSALEM, dates("2026-03-26"), "next_business_day")
    assert local(runs(daily, "2026-03-25T12:00+02:00", 2), JERUSALEM) == [
        "03-27T03:00+03:00",  # Thursday's 02:30 and Friday's own, both moved to the gap's end: one run
        "03-28T02:30+03:00",
    ]


def test_rolled_each_onto_jerusalems_gap_keeps_a_run_per_date() -> None:
    daily = cron_job("30 2 * * *", JERUSALEM, dates("2026-03-26"), "next_business_day", "each")
    assert local(runs(daily, "2026-03-25T12:00+02:00", 3), JERUSALEM) == [
        "03-27T03:00+03:00",
        "03-27T03:00:01+03:00",
        "03-28T02:30+03:00",
    ]


def test_a_0230_rolled_onto_jerusalems_gap_under_skip_does_not_run() -> None:
    daily = cron_job("30 2 * * *", JERUSALEM, dates("2026-03-26"), "next_business_day", dst={"gap": "skip"})
    assert local(runs(daily, "2026-03-25T12:00+02:00", 1), JERUSALEM) == ["03-28T02:30+03:00"]


@pytest.mark.parametrize(
    ("overlap", "expected"),
    [
        ("first", ["10-29T23:30+03:00", "10-29T23:30:01+03:00", "10-30T23:30+02:00"]),
        ("last", ["10-29T23:30+02:00", "10-29T23:30:01+02:00", "10-30T23:30+02:00"]),
        ("both", ["10-29T23:30+03:00", "10-29T23:30:01+03:00", "10-29T23:30+02:00", "10-29T23:30:01+02:00"]),
    ],
)
def test_a_time_rolled_onto_cairos_repeated_hour_follows_the_overlap_policy(
    overlap: str, expected: list[str]
) -> None:
    daily = cron_job(
        "30 23 * * *", CAIRO, dates("2026-10-28"), "next_business_day", "each", dst={"overlap": overlap}
    )
    assert local(runs(daily, "2026-10-28T12:00+03:00", len(expected)), CAIRO) == expected


def test_a_shifted_time_on_an_excluded_spring_forward_sunday_rolls_as_the_crons_wall_time() -> None:
    # Paris, Sunday 29 March 2026 held: its 02:30 (run at 03:00 under shift) rolls to Monday's 02:30, the
    # cron's own time that day, not to a second run at 03:00.
    daily = cron_job("30 2 * * *", PARIS, dates("2026-03-29"), "next_business_day")
    assert local(runs(daily, "2026-03-28T12:00+01:00", 2), PARIS) == [
        "03-30T02:30+02:00",
        "03-31T02:30+02:00",
    ]
    each = cron_job("30 2 * * *", PARIS, dates("2026-03-29"), "next_business_day", "each")
    assert local(runs(each, "2026-03-28T12:00+01:00", 2), PARIS) == [
        "03-30T02:30+02:00",
        "03-30T02:30:01+02:00",
    ]


def test_an_hourly_crons_shifted_times_on_a_held_spring_forward_sunday_roll_onto_mondays_own() -> None:
    # Under shift, Sunday's 02:00 and 02:30 both run at 03:00; rolled, they are Monday's 02:00 and 02:30.
    half_hourly = cron_job(
        "*/30 * * * *", PARIS, dates("2026-03-29"), "next_business_day", dst={"gap": "shift"}
    )
    monday = runs(half_hourly, "2026-03-28T23:59+01:00", 48)
    assert local(monday[:2], PARIS) == ["03-30T00:00+02:00", "03-30T00:30+02:00"]
    assert len(monday) == len(set(monday)) == 48 and local(monday[-1:], PARIS) == ["03-30T23:30+02:00"]


def test_new_yorks_fall_back_sunday_held_rolls_its_repeated_time_to_monday_once() -> None:
    daily = cron_job("30 1 * * *", NY, dates("2026-11-01"), "next_business_day", dst={"overlap": "both"})
    assert local(runs(daily, "2026-10-31T12:00-04:00", 2), NY) == ["11-02T01:30-05:00", "11-03T01:30-05:00"]


# --- the n-th business day of a month ----------------------------------------------------------------------


def test_the_first_business_day_skips_a_holiday_on_the_first() -> None:
    first = business_day_job(1, "08:00", PARIS, french())
    assert local(runs(first, "2025-12-15T00:00+01:00", 2), PARIS) == [
        "01-02T08:00+01:00",  # 1 January, a Thursday, is a holiday
        "02-02T08:00+01:00",  # 1 February is a Sunday
    ]
    assert local(runs(first, "2026-04-15T00:00+02:00", 1), PARIS) == [
        "05-04T08:00+02:00"
    ]  # Fri 1 May: Labour Day


def test_the_third_business_day_counts_past_weekends_and_holidays() -> None:
    third = business_day_job(3, "09:30", PARIS, french())
    assert local(runs(third, "2026-04-15T00:00+02:00", 2), PARIS) == [
        "05-06T09:30+02:00",
        "06-03T09:30+02:00",
    ]


def test_the_last_and_second_last_business_days_count_from_the_months_end() -> None:
    last = business_day_job(-1, "17:00", PARIS, french())
    assert local(runs(last, "2026-12-01T00:00+01:00", 2), PARIS) == ["12-31T17:00+01:00", "01-29T17:00+01:00"]
    second_last = business_day_job(-2, "17:00", PARIS, french())
    assert local(runs(second_last, "2026-05-01T00:00+02:00", 1), PARIS) == ["05-28T17:00+02:00"]


def test_without_calendars_business_days_are_monday_to_friday() -> None:
    first = business_day_job(1, "08:00", "UTC")
    assert local(runs(first, "2025-12-15T00:00+00:00", 2), "UTC") == [
        "01-01T08:00+00:00",
        "02-02T08:00+00:00",
    ]


def test_a_month_with_fewer_business_days_has_no_run() -> None:
    # February 2026 has 20 weekdays, January 22, March 22.
    twenty_second = business_day_job(22, "09:00", "UTC")
    assert local(runs(twenty_second, "2026-01-01T00:00+00:00", 2), "UTC") == [
        "01-30T09:00+00:00",
        "03-31T09:00+00:00",
    ]
    twenty_third = business_day_job(23, "09:00", "UTC")
    assert local(runs(twenty_third, "2026-01-01T00:00+00:00", 1), "UTC") == ["07-31T09:00+00:00"]
    last_but_nineteen = business_day_job(-20, "09:00", "UTC")
    assert local(runs(last_but_nineteen, "2026-02-01T00:00+00:00", 1), "UTC") == ["02-02T09:00+00:00"]


def test_a_business_day_on_jerusalems_spring_forward_friday_follows_the_gap_policy() -> None:
    # March 2026 with Monday 30 and Tuesday 31 held: its last business day is Friday 27, the change day.
    held = dates("2026-03-30", "2026-03-31")
    shifted = business_day_job(-1, "02:30", JERUSALEM, held)
    assert local(runs(shifted, "2026-03-01T00:00+02:00", 1), JERUSALEM) == ["03-27T03:00+03:00"]
    skipped = business_day_job(-1, "02:30", JERUSALEM, held, dst={"gap": "skip"})
    assert local(runs(skipped, "2026-03-01T00:00+02:00", 1), JERUSALEM) == ["04-30T02:30+03:00"]


def test_a_business_day_on_cairos_fall_back_thursday_follows_the_overlap_policy() -> None:
    second_last = business_day_job(-2, "23:30", CAIRO)  # October 2026: Thursday 29
    assert local(runs(second_last, "2026-10-01T00:00+03:00", 1), CAIRO) == ["10-29T23:30+03:00"]
    both = business_day_job(-2, "23:30", CAIRO, dst={"overlap": "both"})
    assert local(runs(both, "2026-10-01T00:00+03:00", 3), CAIRO) == [
        "10-29T23:30+03:00",
        "10-29T23:30+02:00",
        "11-27T23:30+02:00",
    ]


def test_start_at_and_end_at_bound_a_business_day_schedule() -> None:
    bounded = business_day_job(
        1, "08:00", PARIS, french(), start_at="2026-01-02T08:00:00+01:00", end_at="2026-03-02T08:00:00+01:00"
    )
    assert local(runs(bounded, "2025-06-01T00:00+02:00", 5), PARIS) == [
        "01-02T08:00+01:00",  # a time exactly at start_at counts
        "02-02T08:00+01:00",
        "03-02T08:00+01:00",  # and exactly at end_at
    ]


def test_start_at_and_end_at_bound_an_excluding_cron() -> None:
    bounded = cron_job(
        "0 9 * * 1-5",
        PARIS,
        french(),
        "next_business_day",
        start_at="2026-12-28T09:00:00+01:00",
        end_at="2026-12-29T09:00:00+01:00",
    )
    assert local(runs(bounded, "2026-12-20T00:00+01:00", 5), PARIS) == [
        "12-28T09:00+01:00",
        "12-29T09:00+01:00",
    ]


# --- calendars must be resolved ----------------------------------------------------------------------------


def test_a_job_whose_calendars_were_not_resolved_refuses_to_compute_its_times() -> None:
    unresolved = JobSpec.model_validate(
        {
            "name": "j",
            "schedule": {"cron": "0 9 * * *", "timezone": PARIS},
            "exclude": {"calendars": ["fr"]},
            "target": TARGET,
        }
    )
    with pytest.raises(CalendarsNotResolved, match="fr"):
        next_nominal_after(unresolved, instant("2026-01-01T00:00+00:00"), instant("2026-01-01T00:00+00:00"))
    business = JobSpec.model_validate(
        {"name": "j", "schedule": {"business_day": 1, "at": "08:00", "calendars": ["fr"]}, "target": TARGET}
    )
    with pytest.raises(CalendarsNotResolved):
        next_nominal_after(business, instant("2026-01-01T00:00+00:00"), instant("2026-01-01T00:00+00:00"))


def test_a_copy_keeps_the_resolved_days_and_a_job_rebuilt_from_its_fields_does_not() -> None:
    resolved = cron_job("0 9 * * *", PARIS, french())
    after = instant("2026-12-24T12:00+01:00")
    assert next_nominal_after(resolved.model_copy(), after, after) == instant("2026-12-26T09:00+01:00")
    rebuilt = JobSpec.model_validate(resolved.model_dump())
    with pytest.raises(CalendarsNotResolved):
        next_nominal_after(rebuilt, after, after)


# --- 422s that name the field ------------------------------------------------------------------------------


def refusal(body: dict[str, Any]) -> tuple[str | None, str]:
    """The field and message a job body is refused with (as the API answers its 422)."""
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate({"name": "j", "target": TARGET, **body})
    error = from_validation_error(caught.value)
    assert error.status == 422
    return error.field, error.message


BUSINESS_DAY = {"business_day": 1, "at": "09:00", "timezone": PARIS}
EXCLUDE = {"calendars": ["fr"]}


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"schedule": {"rate": "5 minutes"}, "exclude": EXCLUDE}, "exclude", "cron schedules only"),
        ({"schedule": {"at": "2027-01-01T00:00:00Z"}, "exclude": EXCLUDE}, "exclude", "cron schedules only"),
        ({"schedule": BUSINESS_DAY, "exclude": EXCLUDE}, "exclude", "names its calendars in `calendars`"),
        ({"schedule": {**BUSINESS_DAY, "business_day": 0}}, "schedule.business_day", "never 0"),
        ({"schedule": {**BUSINESS_DAY, "business_day": 24}}, "schedule.business_day", "less than or equal"),
        (
            {"schedule": {**BUSINESS_DAY, "business_day": -24}},
            "schedule.business_day",
            "greater than or equal",
        ),
        ({"schedule": {**BUSINESS_DAY, "at": "24:00"}}, "schedule.at", "pattern"),
        ({"schedule": {**BUSINESS_DAY, "at": "9:00"}}, "schedule.at", "pattern"),
        (
            {"schedule": {**BUSINESS_DAY, "timezone": "Mars/Olympus"}},
            "schedule.timezone",
            "unknown time zone",
        ),
        ({"schedule": {**BUSINESS_DAY, "calendars": ["fr", "fr"]}}, "schedule.calendars", "must not repeat"),
        ({"schedule": {**BUSINESS_DAY, "calendars": list("abcdef")}}, "schedule.calendars", "at most 5"),
        ({"schedule": {**BUSINESS_DAY, "calendars": ["FR"]}}, "schedule.calendars.0", "pattern"),
        (
            {"schedule": {"cron": "0 9 * * *"}, "exclude": {"calendars": []}},
            "exclude.calendars",
            "at least 1",
        ),
        (
            {"schedule": {"cron": "0 9 * * *"}, "exclude": {"calendars": ["a", "a"]}},
            "exclude.calendars",
            "must not repeat",
        ),
        (
            {"schedule": {"cron": "0 9 * * *"}, "exclude": {"calendars": list("abcdef")}},
            "exclude.calendars",
            "at most 5",
        ),
        (
            {"schedule": {"cron": "0 9 * * *"}, "exclude": {"calendars": ["fr holidays"]}},
            "exclude.calendars.0",
            "pattern",
        ),
        (
            {"schedule": {"cron": "0 9 * * *"}, "exclude": {"calendars": ["fr"], "on_excluded": "next_day"}},
            "exclude.on_excluded",
            "skip",
        ),
        (
            {"schedule": {"cron": "0 9 * * *"}, "exclude": {"calendars": ["fr"], "rolled": "twice"}},
            "exclude.rolled",
            "once",
        ),
        (
            {"schedule": {"cron": "0 9 * * *"}, "exclude": {"calendars": ["fr"], "holidays": "FR"}},
            "exclude.holidays",
            "not permitted",
        ),
        ({"schedule": {**BUSINESS_DAY, "cron": "0 9 * * *"}}, "schedule.cron", "not permitted"),
    ],
)
def test_bad_calendar_input_is_a_422_naming_the_field(body: dict[str, Any], field: str, says: str) -> None:
    named, message = refusal(body)
    assert named == field
    assert message.startswith(f"{field}: ")
    assert says in message
