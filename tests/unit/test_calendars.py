"""Team calendars (pure): their three sources, what each holds for a year, and what a write refuses."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from duetime.domain.calendars import (
    MAX_DATES,
    MAX_ICAL_CHARS,
    CalendarSource,
    CalendarSpec,
    dates_of_year,
    named_days_of_year,
)


def ical(*events: str) -> str:
    body = "".join(f"BEGIN:VEVENT\r\nUID:{n}@test\r\n{e}END:VEVENT\r\n" for n, e in enumerate(events))
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\n{body}END:VCALENDAR\r\n"


def refusal(**source: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        CalendarSpec.model_validate({"name": "c", "source": source})
    first = caught.value.errors()[0]
    return ".".join(str(p) for p in first["loc"]) + ": " + str(first["msg"])


def test_french_public_holidays_of_2027_are_the_eleven_days_with_their_names() -> None:
    days = named_days_of_year(CalendarSource.model_validate({"holidays": {"country": "fr"}}), 2027)
    assert len(days) == 11
    assert date(2027, 7, 14) in days and date(2027, 3, 29) in days  # Bastille Day, Easter Monday
    assert all(name for name in days.values())


def test_a_subdivision_adds_its_own_holidays_to_the_country_s() -> None:
    germany = dates_of_year(CalendarSource.model_validate({"holidays": {"country": "DE"}}), 2027)
    bavaria = dates_of_year(
        CalendarSource.model_validate({"holidays": {"country": "DE", "subdivision": "BY"}}), 2027
    )
    assert germany < bavaria
    assert date(2027, 1, 6) in bavaria - germany  # Epiphany


def test_an_unknown_country_is_refused_naming_the_field_and_listing_some_it_knows() -> None:
    message = refusal(holidays={"country": "XX"})
    assert message.startswith("source.holidays.country: ")
    assert "'XX' is not a country" in message and "FR" in message


def test_an_unknown_subdivision_is_refused_listing_the_country_s() -> None:
    message = refusal(holidays={"country": "DE", "subdivision": "ZZ"})
    assert message.startswith("source.holidays.subdivision: ")
    assert "'ZZ' is not a subdivision of DE" in message and "BY" in message


def test_explicit_dates_are_kept_sorted_once_and_read_per_year() -> None:
    sent = ["2027-01-02", "2026-12-31", "2026-12-24", "2026-12-31"]
    source = CalendarSource.model_validate({"dates": sent})
    assert source.dates == (date(2026, 12, 24), date(2026, 12, 31), date(2027, 1, 2))
    assert dates_of_year(source, 2026) == {date(2026, 12, 24), date(2026, 12, 31)}
    assert named_days_of_year(source, 2027) == {date(2027, 1, 2): None}


@pytest.mark.parametrize(
    ("sent", "said"),
    [
        ("2026-02-30", "'2026-02-30' is not a date (day is out of range for month)"),
        ("24/12/2026", "'24/12/2026' is not a date: give YYYY-MM-DD"),
        (20261224, "20261224 is not a date"),
        ("2026-12-24T00:00:00", "is not a date"),
    ],
)
def test_an_invalid_date_is_refused_naming_its_place(sent: Any, said: str) -> None:
    message = refusal(dates=["2026-12-24", sent])
    assert message.startswith("source.dates.1: ")
    assert said in message


def test_more_dates_than_a_request_holds_are_refused() -> None:
    days = [date.fromordinal(date(2020, 1, 1).toordinal() + n).isoformat() for n in range(MAX_DATES + 1)]
    assert refusal(dates=days).startswith("source.dates: ")
    assert CalendarSource.model_validate({"dates": days[:MAX_DATES]}).dates is not None


def test_a_source_is_exactly_one_kind() -> None:
    assert "exactly one of" in refusal(dates=["2026-12-24"], holidays={"country": "FR"})
    assert "exactly one of" in refusal()


def test_an_all_day_event_covers_each_day_to_its_exclusive_end_with_its_summary() -> None:
    text = ical("DTSTART;VALUE=DATE:20261224\r\nDTEND;VALUE=DATE:20261227\r\nSUMMARY:Closed\r\n")
    days = named_days_of_year(CalendarSource(ical=text), 2026)
    assert days == {date(2026, 12, 24): "Closed", date(2026, 12, 25): "Closed", date(2026, 12, 26): "Closed"}


def test_a_recurring_event_is_expanded_in_the_year_asked_for() -> None:
    text = ical(
        "DTSTART;VALUE=DATE:20260105\r\nDTEND;VALUE=DATE:20260106\r\n"
        "RRULE:FREQ=MONTHLY;BYDAY=1MO\r\nSUMMARY:Inventory\r\n"
    )
    days = dates_of_year(CalendarSource(ical=text), 2030)
    assert len(days) == 12
    assert all(day.weekday() == 0 and day.day <= 7 for day in days)


def test_a_timed_event_holds_the_day_it_starts_in_its_own_zone() -> None:
    text = ical("DTSTART;TZID=Europe/Paris:20261231T233000\r\nDTEND;TZID=Europe/Paris:20270101T003000\r\n")
    assert dates_of_year(CalendarSource(ical=text), 2026) == {date(2026, 12, 31)}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("not a calendar", "not an iCalendar file (RFC 5545)"),
        ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nEND:VCALENDAR\r\n", "holds no date"),
        (ical("DTSTART:20260101T000000Z\r\nRRULE:FREQ=HOURLY\r\nSUMMARY:Tick\r\n"), "a calendar holds days"),
    ],
)
def test_an_ical_that_does_not_parse_or_holds_no_day_is_refused(text: str, said: str) -> None:
    message = refusal(ical=text)
    assert message.startswith("source.ical: ")
    assert said in message


def test_an_ical_file_over_the_limit_is_refused() -> None:
    padding = "X-NOTE:" + "x" * 70 + "\r\n"
    text = ical("DTSTART;VALUE=DATE:20261224\r\n" + padding * (MAX_ICAL_CHARS // len(padding) + 1))
    assert refusal(ical=text).startswith("source.ical: ")


def test_a_calendar_name_is_a_short_slug() -> None:
    good = {"name": "fr-holidays", "source": {"dates": ["2026-12-24"]}}
    assert CalendarSpec.model_validate(good).name == "fr-holidays"
    for bad in ("FR", "-fr", "fr-", "x" * 41, "fr_holidays", ""):
        with pytest.raises(ValidationError):
            CalendarSpec.model_validate({**good, "name": bad})


def test_a_year_of_a_source_is_computed_once() -> None:
    source = CalendarSource.model_validate({"holidays": {"country": "JP"}})
    again = CalendarSource.model_validate(source.model_dump())
    assert dates_of_year(source, 2031) is dates_of_year(again, 2031)


ICAL_LINES = st.sampled_from(
    [
        "DTSTART;VALUE=DATE:20261224",
        "DTSTART:20261224T100000Z",
        "DTSTART;TZID=Nowhere/Zone:20261224T100000",
        "DTSTART:garbage",
        "DTSTART;VALUE=DATE:99991231",
        "DTEND;VALUE=DATE:20261220",
        "RRULE:FREQ=YEARLY",
        "RRULE:FREQ=WEEKLY;BYDAY=XX",
        "RRULE:garbage",
        "RRULE:FREQ=MONTHLY;BYMONTHDAY=31",
        "EXDATE:nonsense",
        "DURATION:bad",
        "RDATE;VALUE=PERIOD:20270101T000000Z/PT1H",
        "RECURRENCE-ID:20271224T100000Z",
        "BEGIN:VEVENT",
        "END:VEVENT",
        "SUMMARY:x",
    ]
)


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(ICAL_LINES, max_size=10), junk=st.text(max_size=20))
def test_an_ical_text_is_accepted_and_read_or_refused_never_an_error(lines: list[str], junk: str) -> None:
    text = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\n" + "\r\n".join(lines) + "\r\nEND:VEVENT\r\n" + junk
    try:
        source = CalendarSource(ical=text + "END:VCALENDAR\r\n")
    except ValidationError as exc:
        assert exc.errors()[0]["loc"] == ("ical",)
        return
    for year in (1900, 2026, 2027, 2200):
        assert all(day.year == year for day in dates_of_year(source, year))
