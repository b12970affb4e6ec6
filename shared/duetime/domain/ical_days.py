"""An iCalendar file (RFC 5545) as days: parsed, its recurrence rules checked, its events expanded within
bounds (``recurring-ical-events`` over ``dateutil.rrule``).

What a write checks before anything is expanded (``check_ical``): the text parses, it has an event with a
start, and no rule repeats within a day (a ``FREQ`` finer than ``DAILY``, or more than one ``BYHOUR``,
``BYMINUTE`` or ``BYSECOND``: those make hundreds of thousands of instants a year of a daily rule), ends
before it starts (``UNTIL`` before ``DTSTART``) or names only days its months do not have (``BYMONTHDAY=31``
with ``BYMONTH=2``: ``dateutil`` would walk every day to the year 9999 looking for one).

What bounds an expansion (``expanded_days``) past those: ``Bounds`` of time and of event days (each day an
occurrence touches, counted with overlaps). ``dateutil`` counts nothing it does not yield and walks on while
a rule finds nothing, so the time is kept by ``time_budget.within``, which stops a loop wherever it is. An
expansion past either bound is refused (``IcalRefused``), never cut short: days of a calendar are all of
its days or none.

``icalendar`` and ``recurring_ical_events`` are imported where they are used (with ``holidays``, about 100 ms
that every function importing the ports would otherwise pay at a cold start).
"""

from __future__ import annotations

import calendar as gregorian
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from duetime.domain.time_budget import OverBudget, within

if TYPE_CHECKING:
    import icalendar
    import recurring_ical_events

MAX_EVENT_DAYS = 366  # an all-day event longer than a year is cut to its first year of days
SUB_DAILY = frozenset({"SECONDLY", "MINUTELY", "HOURLY"})
WITHIN_A_DAY = ("BYHOUR", "BYMINUTE", "BYSECOND")  # more than one value: several instants a day
_AT_MOST_DAILY = "a calendar holds days, a rule repeats at most daily"
LONGEST_MONTH = {month: gregorian.monthrange(2024, month)[1] for month in range(1, 13)}  # a leap year's


class IcalRefused(ValueError):
    """The file cannot be read as days, or costs more to expand than its ``Bounds``: the message says why."""


@dataclass(frozen=True)
class Bounds:
    """What one expansion may cost: ``seconds``, and ``event_days`` days touched by occurrences (counted
    with overlaps: two events on a day are two); and what it may find: ``days_a_year`` days in any year."""

    seconds: float
    event_days: int
    days_a_year: int


def parsed(text: str) -> icalendar.Calendar:
    """The iCalendar text parsed, or ``IcalRefused`` saying why not."""
    import icalendar

    try:
        calendar = icalendar.Calendar.from_ical(text)
    except Exception as exc:  # icalendar raises ValueError, but also KeyError and others on odd input
        raise IcalRefused(f"not an iCalendar file (RFC 5545): {exc}") from None
    if not isinstance(calendar, icalendar.Calendar):  # pragma: no cover - one text parses to one calendar
        raise IcalRefused("not an iCalendar file (RFC 5545): no VCALENDAR")
    return calendar


def check_ical(text: str) -> str:
    """``text`` if it is an iCalendar file of events with a start whose rules repeat at most daily and can
    match; else ``IcalRefused`` naming the event (its ``SUMMARY``) and the rule's part. Parses, never
    expands: bounded by the text's length."""
    events = [event for event in parsed(text).walk("VEVENT") if event.get("DTSTART") is not None]
    if not events:
        raise IcalRefused("the iCalendar file holds no date: no VEVENT with a DTSTART")
    for event in events:
        rules = event.get("RRULE")
        for rule in rules if isinstance(rules, list) else [rules] if rules is not None else []:
            try:
                problem = _rule_problem(dict(rule), event)
            except Exception as exc:  # a part icalendar kept but cannot give (BYMONTHDAY=x): named, a 422
                raise IcalRefused(f"an RRULE cannot be read: {type(exc).__name__}: {exc}") from None
            if problem:
                raise IcalRefused(f"{str(event.get('SUMMARY', 'an event'))!r} {problem}")
    return text


def _rule_problem(rule: dict[str, list[Any]], event: icalendar.cal.Component) -> str | None:
    """Why a rule (an RRULE's parts) is refused, or None."""
    frequencies = {str(f).upper() for f in rule.get("FREQ", [])}
    if frequencies & SUB_DAILY:
        return f"repeats {'/'.join(sorted(frequencies))}: " + _AT_MOST_DAILY
    for part in WITHIN_A_DAY:
        if len(rule.get(part, [])) > 1:
            values = ",".join(str(v) for v in rule[part])
            return f"repeats within a day ({part}={values}): " + _AT_MOST_DAILY
    until = [_day(v) for v in rule.get("UNTIL", []) if isinstance(v, date)]
    start = _start_day(event)
    if until and start is not None and until[0] < start:
        return f"ends (UNTIL={until[0]}) before it starts ({start}): it holds no day"
    month_days = [int(v) for v in rule.get("BYMONTHDAY", [])]
    months = [int(str(m).rstrip("Ll")) for m in rule.get("BYMONTH", [])] or list(LONGEST_MONTH)
    longest = max(LONGEST_MONTH.get(month, 31) for month in months)
    if month_days and all(not 1 <= abs(day) <= longest for day in month_days):
        named = ",".join(str(m) for m in rule.get("BYMONTH", [])) or "any"
        listed = ",".join(str(day) for day in month_days)
        return f"never happens: no month of BYMONTH={named} has a day BYMONTHDAY={listed}"
    return None


def _start_day(event: icalendar.cal.Component) -> date | None:
    try:
        return _day(event.decoded("DTSTART"))
    except Exception:  # a start that does not decode is refused by the expansion, naming it
        return None


def expanded_days(text: str, first_year: int, last_year: int, bounds: Bounds) -> dict[date, str | None]:
    """The days of ``first_year`` to ``last_year`` the file's events touch, each with the first event's
    ``SUMMARY`` that touches it: an all-day event each day from its start to its end (exclusive, as RFC 5545
    has it; at most ``MAX_EVENT_DAYS``), a timed event the day it starts, in its own zone. Expanded a year at
    a time (``dateutil`` keeps what a rule walked), so a year past ``bounds.days_a_year`` stops it there.
    ``IcalRefused`` when the file cannot be read or the expansion passes ``bounds``."""
    found: dict[date, str | None] = {}
    counted = 0
    try:
        query = _query(text)  # imports and parses before the budget starts: no import is cut in two
        with within(bounds.seconds):
            for year in range(first_year, last_year + 1):
                start, end = date(year, 1, 1), date(year + 1, 1, 1)
                for event in query.between(start, end):
                    summary = str(event["SUMMARY"]) if "SUMMARY" in event else None
                    for day in _event_days(event.decoded("DTSTART"), _end(event)):
                        counted += 1
                        if counted > bounds.event_days:
                            raise IcalRefused(
                                f"its events touch more than {bounds.event_days:,} days in {first_year}-"
                                f"{last_year} (counted with overlaps): a calendar of days, not of events"
                            )
                        if start <= day < end:
                            found.setdefault(day, summary)
                held = sum(1 for day in found if day.year == year)
                if held > bounds.days_a_year:
                    raise IcalRefused(too_many_days(held, year, bounds.days_a_year))
    except IcalRefused:
        raise
    except OverBudget:
        raise IcalRefused(
            f"expanding its events for {first_year}-{last_year} takes over {bounds.seconds:g} s: a rule that "
            "seldom or never matches (BYMONTHDAY, BYWEEKNO, BYYEARDAY and BYMONTH that rarely meet), or a "
            "daily rule starting long ago?"
        ) from None
    except Exception as exc:  # a rule or a date the expansion cannot read: refused naming what it said
        problem = f"the iCalendar file's events cannot be read: {type(exc).__name__}: {exc}"
        raise IcalRefused(problem) from None
    return found


def too_many_days(held: int, year: int, most: int) -> str:
    return (
        f"it holds {held} days in {year}: a calendar holds at most {most} days a year (days off: weekends, "
        "holidays, closures; for the days a job runs, give its schedule)"
    )


def _query(text: str) -> recurring_ical_events.CalendarQuery:
    """The expansion of the file's events (``recurring_ical_events``), which nothing reading a stored
    calendar calls (the tests hold it to that)."""
    import recurring_ical_events

    return recurring_ical_events.of(parsed(text))


def _end(event: icalendar.Event) -> date | datetime | None:
    return event.decoded("DTEND") if "DTEND" in event else None


def _day(value: date | datetime) -> date:
    return value.date() if isinstance(value, datetime) else value


def _event_days(first: date | datetime, last: date | datetime | None) -> list[date]:
    if isinstance(first, datetime) or not isinstance(last, date) or isinstance(last, datetime):
        return [_day(first)]
    days = max(1, min((last - first).days, MAX_EVENT_DAYS))
    return [first + timedelta(days=n) for n in range(days)]
