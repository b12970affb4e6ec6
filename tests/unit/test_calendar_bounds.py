"""What bounds a calendar's cost (issue 48, item 2): an iCalendar's rules checked before anything is
expanded (nothing repeating within a day, nothing that never happens), an expansion bounded by time and by
event days, at most ``MAX_DAYS_A_YEAR`` days in a year, and days stored when written (``days_to_store``) so
that reading them never expands an iCalendar; a year not stored is computed within ``READ_BOUNDS``."""

from __future__ import annotations

import json
import time
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from duetime.domain import ical_days
from duetime.domain.calendars import (
    MAX_DAYS_A_YEAR,
    MAX_ICAL_CHARS,
    MAX_STORED_BYTES,
    WRITE_BOUNDS,
    Calendar,
    CalendarRefused,
    CalendarSource,
    CalendarSpec,
    dates_of_year,
    days_to_store,
    named_days_of_year,
    stored_years,
)
from duetime.domain.ical_days import Bounds
from duetime.domain.stored_days import StoredDays

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
DAILY_EVERY_SECOND = (
    "FREQ=DAILY;BYHOUR=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23;"
    "BYMINUTE=0,5,10,15,20,25,30,35,40,45,50,55;BYSECOND=0,10,20,30,40,50"
)


def ical(*events: str) -> str:
    body = "".join(f"BEGIN:VEVENT\r\nUID:{n}@test\r\n{e}END:VEVENT\r\n" for n, e in enumerate(events))
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\n{body}END:VCALENDAR\r\n"


def rule(text: str, start: str = "DTSTART;VALUE=DATE:20260101", summary: str = "Closed") -> str:
    return f"SUMMARY:{summary}\r\n{start}\r\nRRULE:{text}\r\n"


def refusal(**source: Any) -> str:
    """The first error of a calendar written with ``source``, as the API says it: ``field: message``. Its
    spec's checks first, then what ``days_to_store`` finds (as ``CalendarService`` runs them)."""
    try:
        spec = CalendarSpec.model_validate({"name": "c", "source": source})
    except ValidationError as exc:
        first = exc.errors()[0]
        return ".".join(str(p) for p in first["loc"]) + ": " + str(first["msg"]).removeprefix("Value error, ")
    try:
        days_to_store(spec.source, NOW)
    except CalendarRefused as exc:
        return f"{exc.field}: {exc}"
    raise AssertionError("accepted")


def stored(source: dict[str, Any], now: datetime = NOW) -> Calendar:
    spec = CalendarSpec.model_validate({"name": "c", "source": source})
    return Calendar(
        **dict(spec),
        team="t",
        version=1,
        created_at=now,
        updated_at=now,
        stored_days=days_to_store(spec.source, now),
    )


# --- what a write refuses, and how fast -------------------------------------------------------------------


def test_a_hostile_ical_under_500_characters_repeating_every_ten_seconds_is_refused_at_once() -> None:
    """The issue's calendar: one daily rule with BYHOUR, BYMINUTE and BYSECOND, about 17,000 instants a day.
    Before this, its write took 52 s here and every read of a year 62 s; now it is refused by its rule, before
    anything is expanded."""
    text = ical(rule(DAILY_EVERY_SECOND, "DTSTART:20260101T000000Z", "Tick"))
    assert len(text) < 500
    started = time.perf_counter()
    message = refusal(ical=text)
    assert time.perf_counter() - started < 0.5
    assert message.startswith("source.ical: 'Tick' repeats within a day (BYHOUR=0,1,2")
    assert "a rule repeats at most daily" in message


@pytest.mark.parametrize("part", ["BYHOUR=9,17", "BYMINUTE=0,30", "BYSECOND=0,1"])
def test_any_rule_part_that_repeats_within_a_day_is_refused(part: str) -> None:
    assert "repeats within a day" in refusal(ical=ical(rule(f"FREQ=WEEKLY;{part}")))


def test_a_rule_part_with_one_value_only_sets_the_time_and_is_kept() -> None:
    calendar = stored(
        {"ical": ical(rule("FREQ=WEEKLY;BYDAY=SA;BYHOUR=9;BYMINUTE=0", "DTSTART:20260103T090000Z"))}
    )
    assert len(dates_of_year(calendar, 2027)) == 52


@pytest.mark.parametrize("frequency", ["HOURLY", "MINUTELY", "SECONDLY"])
def test_a_rule_repeating_more_often_than_daily_is_refused(frequency: str) -> None:
    assert f"repeats {frequency}" in refusal(ical=ical(rule(f"FREQ={frequency}")))


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=31",
            "never happens: no month of BYMONTH=2 has a day BYMONTHDAY=31",
        ),
        ("FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30,31", "never happens"),
        ("FREQ=MONTHLY;BYMONTH=4,6,9,11;BYMONTHDAY=-31", "never happens"),
        ("FREQ=DAILY;UNTIL=20200101", "ends (UNTIL=2020-01-01) before it starts (2026-01-01)"),
    ],
)
def test_a_rule_that_can_never_match_is_refused_naming_it_without_expanding(text: str, said: str) -> None:
    """A daily rule of 31 February made ``dateutil`` walk every day to the year 9999: 6 s a year asked."""
    started = time.perf_counter()
    message = refusal(ical=ical(rule(text)))
    assert time.perf_counter() - started < 0.5
    assert message.startswith("source.ical: 'Closed' ") and said in message


def test_february_29_is_a_day_that_happens() -> None:
    calendar = stored({"ical": ical(rule("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29"))})
    assert dates_of_year(calendar, 2028) == {date(2028, 2, 29)} and dates_of_year(calendar, 2027) == set()


def test_a_rule_that_seldom_or_never_matches_past_the_checks_is_stopped_by_the_time_budget() -> None:
    """Week 1 is never in June: no check names it, and ``dateutil`` walks to 9999 (seconds) finding nothing.
    The budget stops the walk where it is, and the write is refused naming the field."""
    source = CalendarSource(ical=ical(rule("FREQ=DAILY;BYWEEKNO=1;BYMONTH=6")))
    started = time.perf_counter()
    with pytest.raises(CalendarRefused) as refused:
        days_to_store(source, NOW, Bounds(seconds=0.2, event_days=10_000, days_a_year=MAX_DAYS_A_YEAR))
    assert time.perf_counter() - started < 1.0
    assert refused.value.field == "source.ical" and "takes over 0.2 s" in str(refused.value)


def test_a_legitimate_calendar_near_the_limits_is_stored_well_within_the_write_budget() -> None:
    """Weekends, Wednesdays, the 1st and 15th and 15 yearly days, all since 2000: 183 days a year, 0.3 s here
    (the budget, 2 s, leaves room for the api function's third of a vCPU)."""
    events = [
        rule("FREQ=WEEKLY;BYDAY=SA,SU", "DTSTART;VALUE=DATE:20000101"),
        rule("FREQ=WEEKLY;BYDAY=WE", "DTSTART;VALUE=DATE:20000101"),
        rule("FREQ=MONTHLY;BYMONTHDAY=1,15", "DTSTART;VALUE=DATE:20000101"),
        *(rule(f"FREQ=YEARLY;BYMONTH={n % 12 + 1};BYMONTHDAY={n // 12 + 3}") for n in range(15)),
    ]
    started = time.perf_counter()
    calendar = stored({"ical": ical(*events)})
    assert time.perf_counter() - started < WRITE_BOUNDS.seconds
    assert max(len(dates_of_year(calendar, year)) for year in range(2025, 2038)) == 183


def test_a_huge_count_is_bounded_by_the_years_stored() -> None:
    calendar = stored({"ical": ical(rule("FREQ=WEEKLY;BYDAY=SA,SU;COUNT=999999999"))})
    assert calendar.stored_days is not None
    assert (
        (calendar.stored_days.first_year, calendar.stored_days.last_year) == stored_years(NOW) == (2025, 2037)
    )
    assert len(dates_of_year(calendar, 2030)) == 104


def test_a_daily_rule_is_past_the_days_a_year_and_refused_after_its_first_year() -> None:
    started = time.perf_counter()
    message = refusal(ical=ical(rule("FREQ=DAILY;COUNT=999999999")))
    assert time.perf_counter() - started < 1.0
    assert message == (
        f"source.ical: it holds 365 days in 2026: a calendar holds at most {MAX_DAYS_A_YEAR} days a year "
        "(days off: weekends, holidays, closures; for the days a job runs, give its schedule)"
    )


def test_explicit_dates_past_the_days_a_year_are_refused_naming_dates() -> None:
    days = [(date(2027, 1, 1) + timedelta(days=n)).isoformat() for n in range(MAX_DAYS_A_YEAR + 1)]
    assert refusal(dates=days).startswith(f"source.dates: it holds {MAX_DAYS_A_YEAR + 1} days in 2027")
    assert stored({"dates": days[:MAX_DAYS_A_YEAR]}).stored_days is not None


def test_events_touching_more_days_than_the_bound_are_refused_counting_overlaps() -> None:
    """Ten weekly events of a week each: every day is held ten times over (70 event days a week)."""
    week = "DTSTART;VALUE=DATE:20260105\r\nDTEND;VALUE=DATE:20260112"
    text = ical(*(rule("FREQ=WEEKLY;INTERVAL=10", week.replace("0105", f"01{5 + n:02d}")) for n in range(10)))
    with pytest.raises(CalendarRefused, match="touch more than 300 days in 2025-2037"):
        days_to_store(CalendarSource(ical=text), NOW, Bounds(seconds=5, event_days=300, days_a_year=366))


@pytest.mark.parametrize(
    "text",
    ["FREQ=WEEKLY;BYDAY=XX", "FREQ=DAILY;BYMONTHDAY=x", "FREQ=DAILY;UNTIL=garbage", "FREQ=DAILY;BYMONTH=13"],
)
def test_a_rule_that_cannot_be_read_is_refused_naming_the_field(text: str) -> None:
    assert refusal(ical=ical(rule(text))).startswith("source.ical: ")


def test_the_largest_calendar_stays_within_dynamodb_s_item_and_a_larger_one_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every stored year near its most days (weekends, Wednesdays and an event every 17 days: 170), the
    events' distinct SUMMARY lines of multi-byte characters filling the file to ``MAX_ICAL_CHARS``: 124 KB."""
    summary = "É" * 90  # 2 bytes each in UTF-8, as JSON keeps them
    events = [rule("FREQ=WEEKLY;BYDAY=SA,SU", summary="Weekend"), rule("FREQ=WEEKLY;BYDAY=WE", summary="Wed")]
    day = date(2025, 1, 1)
    while len(ical(*events)) < MAX_ICAL_CHARS - 200:
        start = day.strftime("%Y%m%d")
        events.append(f"SUMMARY:{summary}{len(events)}\r\nDTSTART;VALUE=DATE:{start}\r\n")
        day += timedelta(days=17)
    calendar = stored({"ical": ical(*events)})
    size = len(calendar.model_dump_json().encode())
    assert 120_000 < size < MAX_STORED_BYTES < 400_000
    assert max(len(dates_of_year(calendar, year)) for year in range(2025, 2038)) >= 170
    monkeypatch.setattr("duetime.domain.calendars.MAX_STORED_BYTES", size // 2)
    with pytest.raises(CalendarRefused, match="bytes to store") as refused:
        days_to_store(calendar.source, NOW)
    assert refused.value.field == "source.ical"


# --- what is stored and read --------------------------------------------------------------------------------


def test_stored_days_are_what_the_source_holds_with_their_names() -> None:
    calendar = stored({"holidays": {"country": "FR"}})
    assert calendar.stored_days is not None
    for year in range(2025, 2038):
        assert named_days_of_year(calendar, year) == named_days_of_year(calendar.source, year)
    assert named_days_of_year(calendar, 2027)[date(2027, 7, 14)]  # Bastille Day, named


def test_reading_a_stored_year_never_expands_the_ical(monkeypatch: pytest.MonkeyPatch) -> None:
    calendar = stored({"ical": ical(rule("FREQ=YEARLY", "DTSTART;VALUE=DATE:20261224", "Christmas Eve"))})

    def refuse(*args: Any) -> Any:
        raise AssertionError("expanded an iCalendar on a read")

    monkeypatch.setattr(ical_days, "expanded_days", refuse)
    monkeypatch.setattr("duetime.domain.calendars.expanded_days", refuse)
    monkeypatch.setattr(ical_days, "_query", refuse)
    assert named_days_of_year(calendar, 2030) == {date(2030, 12, 24): "Christmas Eve"}
    assert dates_of_year(calendar, 2037) == {date(2037, 12, 24)}
    restored = Calendar.from_stored(calendar.model_dump_json())  # a store's read parses no iCalendar either
    assert restored == calendar and dates_of_year(restored, 2025) == set()


def test_a_year_not_stored_is_computed_when_asked_an_ical_within_the_read_bounds() -> None:
    calendar = stored({"ical": ical(rule("FREQ=YEARLY", "DTSTART;VALUE=DATE:20261224", "Christmas Eve"))})
    assert calendar.stored_days is not None and not calendar.stored_days.holds(2038)
    assert named_days_of_year(calendar, 2038) == {date(2038, 12, 24): "Christmas Eve"}
    france = stored({"holidays": {"country": "FR"}})
    assert len(dates_of_year(france, 2040)) == 11


def test_an_old_calendar_past_the_read_bounds_holds_no_days_that_year_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An item written before days were stored, and before its rules were checked: read within
    ``READ_BOUNDS`` (here its 1,728 instants a day take longer than its half second to list)."""
    text = ical(rule(DAILY_EVERY_SECOND, "DTSTART:20260101T000000Z", "Tick"))
    item = {"name": "tick", "source": {"ical": text}, "team": "t", "version": 1}
    old = Calendar.from_stored(
        json.dumps({**item, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"})
    )
    assert old.stored_days is None
    started = time.perf_counter()
    assert dates_of_year(old, 2029) == set()
    assert time.perf_counter() - started < 2.0
    assert "past the bounds of a read" in caplog.text


DAYS = st.dictionaries(
    st.dates(min_value=date(2024, 1, 1), max_value=date(2030, 12, 31)),
    st.none() | st.text(min_size=1, max_size=12),
    max_size=60,
)


@settings(max_examples=100, deadline=None)
@given(days=DAYS)
def test_stored_days_read_back_as_given_year_by_year(days: dict[date, str | None]) -> None:
    kept = StoredDays.model_validate_json(StoredDays.of(days, 2025, 2029).model_dump_json())
    for year in range(2025, 2030):
        assert kept.named_days(year) == {day: name for day, name in sorted(days.items()) if day.year == year}
    assert kept.named_days(2024) is None and kept.named_days(2030) is None


@settings(max_examples=100, deadline=None)
@given(
    lines=st.lists(
        st.sampled_from(
            [
                "DTSTART;VALUE=DATE:20261224",
                "DTSTART:20261224T100000Z",
                "DTSTART;VALUE=DATE:19000101",
                "DTEND;VALUE=DATE:20261230",
                "RRULE:FREQ=DAILY",
                "RRULE:FREQ=WEEKLY;BYDAY=SA",
                "RRULE:FREQ=YEARLY;BYWEEKNO=53",
                "RRULE:FREQ=MONTHLY;BYMONTHDAY=31",
                "RRULE:FREQ=DAILY;BYSETPOS=400",
                "RRULE:COUNT=5",
                "EXDATE:nonsense",
                "BEGIN:VEVENT",
                "END:VEVENT",
                "SUMMARY:x",
            ]
        ),
        max_size=8,
    )
)
def test_a_write_stores_days_or_refuses_naming_the_field_never_another_error(lines: list[str]) -> None:
    text = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\n" + "\r\n".join(lines) + "\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    try:
        calendar = stored({"ical": text})
    except ValidationError as exc:
        assert exc.errors()[0]["loc"] == ("source", "ical")
        return
    except CalendarRefused as exc:
        assert exc.field == "source.ical"
        return
    assert calendar.stored_days is not None
    assert all(len(dates_of_year(calendar, year)) <= MAX_DAYS_A_YEAR for year in range(2025, 2038))
