"""Team calendars: named sets of days a team's jobs can later skip or roll over (``business_days``).

A calendar's source is one of three: the public holidays of a country (and optional subdivision) as the
``holidays`` package knows them, offline; explicit dates; or an iCalendar file (RFC 5545) sent as text, its
recurring events expanded (``recurring-ical-events``). A calendar is stored whole with its source, so what
it holds for a year is a pure function of the source and the year (``dates_of_year``), computed when asked
and cached.

Limits: a calendar is one item of the control table, and DynamoDB refuses an item over 400 KB; before that,
the API refuses a body over 64 KiB (``duetime.api.app.MAX_BODY_BYTES``). ``MAX_DATES`` dates (about 13 bytes
each as JSON) and ``MAX_ICAL_CHARS`` characters of iCalendar text both fit one request with room for the
rest of it, and a stored calendar (its source once, as JSON) stays far below the item limit.
"""

from __future__ import annotations

import functools
import hashlib
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

if TYPE_CHECKING:
    import icalendar

# holidays, icalendar and recurring_ical_events are imported where they are used: together about 100 ms,
# which every function that imports the ports (the poller and worker too) would otherwise pay at a cold start.

CALENDAR_NAME_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$"
MAX_DATES = 4_000  # eleven years of every day; 52 KB as JSON, within the 64 KiB request
MAX_ICAL_CHARS = 48_000  # with JSON's escapes (a line break is 4 characters), within the 64 KiB request
MAX_DESCRIPTION = 256
MAX_EVENT_DAYS = 366  # an all-day event longer than a year is cut to its first year of days
SUBDIVISIONS_LISTED = 30  # an unknown subdivision's message lists the country's first 30
# A calendar holds days: a rule repeating more often than daily would expand to thousands of occurrences a
# day for nothing, so it is refused when the calendar is written.
_SUB_DAILY = {"SECONDLY", "MINUTELY", "HOURLY"}
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@functools.cache
def supported_countries() -> Mapping[str, tuple[str, ...]]:
    """The countries the ``holidays`` package knows (ISO 3166-1 alpha-2 codes, and the alpha-3 aliases it
    also takes), each with its subdivision codes."""
    import holidays

    return {code: tuple(subdivisions) for code, subdivisions in holidays.list_supported_countries().items()}


def _country_problem(country: str) -> str:
    codes = sorted(code for code in supported_countries() if len(code) == 2)
    return (
        f"{country!r} is not a country the holidays package knows: give an ISO 3166-1 code, one of "
        f"{len(codes)} (e.g. {', '.join(codes[:12])}, ...; FR, DE, GB, US, JP are there)"
    )


def _subdivision_problem(country: str, subdivision: str) -> str:
    known = supported_countries()[country]
    if not known:
        return f"{country} has no subdivisions in the holidays package: leave subdivision out"
    listed = ", ".join(known[:SUBDIVISIONS_LISTED]) + (", ..." if len(known) > SUBDIVISIONS_LISTED else "")
    return f"{subdivision!r} is not a subdivision of {country} the holidays package knows: one of {listed}"


class HolidaysSource(_Strict):
    """The public holidays of a country, and of one of its subdivisions (a state, a region) if given."""

    country: str = Field(
        min_length=2,
        max_length=3,
        description="ISO 3166-1 code of a country the `holidays` package knows, e.g. FR, DE, US",
    )
    subdivision: str | None = Field(
        default=None, min_length=1, max_length=16, description="its subdivision code, e.g. BY (Bavaria) in DE"
    )

    @field_validator("country", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("country")
    @classmethod
    def _known_country(cls, country: str) -> str:
        if country not in supported_countries():
            raise ValueError(_country_problem(country))
        return country

    @field_validator("subdivision")
    @classmethod
    def _known_subdivision(cls, subdivision: str | None, info: ValidationInfo) -> str | None:
        country = info.data.get("country")  # absent when the country was refused: that error is enough
        if (
            subdivision is not None
            and country is not None
            and subdivision not in supported_countries()[country]
        ):
            raise ValueError(_subdivision_problem(country, subdivision))
        return subdivision


def _iso_date(value: Any) -> Any:
    """A date is sent as ``YYYY-MM-DD`` text (not a number, not a date-time); a day that does not exist
    (2026-02-30) is named."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _ISO_DATE.match(value):
        raise ValueError(f"{value!r} is not a date: give YYYY-MM-DD, e.g. 2026-12-24")
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a date ({exc})") from None


IsoDate = Annotated[date, BeforeValidator(_iso_date)]


def _parsed(text: str) -> icalendar.Calendar:
    """The iCalendar text parsed, or ``ValueError`` saying why not."""
    import icalendar

    try:
        parsed = icalendar.Calendar.from_ical(text)
    except Exception as exc:  # icalendar raises ValueError, but also KeyError and others on odd input
        raise ValueError(f"not an iCalendar file (RFC 5545): {exc}") from None
    if not isinstance(parsed, icalendar.Calendar):  # pragma: no cover - from_ical of one text is one calendar
        raise ValueError("not an iCalendar file (RFC 5545): no VCALENDAR")
    return parsed


def _check_ical(text: str) -> str:
    """``text`` if it is an iCalendar file whose events can be expanded into days; else ``ValueError``
    saying why (whatever the parser or the expansion raised: a 422, never a 500)."""
    calendar = _parsed(text)
    try:
        first = _first_day(calendar)
        _ical_days(text, first.year)  # a rule the expansion cannot read is refused now, not when it is used
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    except Exception as exc:
        raise ValueError(f"the iCalendar file's events cannot be read: {type(exc).__name__}: {exc}") from None
    return text


def _first_day(calendar: icalendar.Calendar) -> date:
    """The first day an event of ``calendar`` starts; refuses a calendar of no event, and a rule that repeats
    more often than daily."""
    events = [event for event in calendar.walk("VEVENT") if event.get("DTSTART") is not None]
    if not events:
        raise ValueError("the iCalendar file holds no date: no VEVENT with a DTSTART")
    for event in events:
        rule = event.get("RRULE")
        frequencies = {str(f) for f in rule.get("FREQ", [])} if rule is not None else set()
        if frequencies & _SUB_DAILY:
            summary = str(event.get("SUMMARY", "an event"))
            raise ValueError(f"{summary!r} repeats {'/'.join(sorted(frequencies))}: a calendar holds days")
    return min(_day(event.decoded("DTSTART")) for event in events)


class CalendarSource(_Strict):
    """Exactly one of ``holidays``, ``dates`` or ``ical``."""

    holidays: HolidaysSource | None = None
    dates: tuple[IsoDate, ...] | None = Field(
        default=None, min_length=1, max_length=MAX_DATES, description=f"YYYY-MM-DD, at most {MAX_DATES:,}"
    )
    ical: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_ICAL_CHARS,
        description="an iCalendar file's text (RFC 5545; never a URL): its events' days, recurring events "
        f"expanded; at most {MAX_ICAL_CHARS:,} characters",
    )

    @field_validator("dates")
    @classmethod
    def _sorted(cls, dates: tuple[date, ...] | None) -> tuple[date, ...] | None:
        return tuple(sorted(set(dates))) if dates is not None else None

    @field_validator("ical")
    @classmethod
    def _readable(cls, text: str | None) -> str | None:
        return _check_ical(text) if text is not None else None

    @model_validator(mode="after")
    def _one_kind(self) -> CalendarSource:
        given = [name for name in ("holidays", "dates", "ical") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("a calendar's source is exactly one of 'holidays', 'dates' or 'ical'")
        return self


class CalendarSpec(_Strict):
    """What a team writes: a calendar's name (unique in the team), its source and a description."""

    name: str = Field(
        pattern=CALENDAR_NAME_PATTERN,
        description="1-40 characters of a-z, 0-9 and -, starting and ending with a letter or digit (e.g. "
        "`fr-holidays`); unique in your team",
    )
    source: CalendarSource
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION)


class Calendar(CalendarSpec):
    """A stored calendar. ``version`` goes up with every change and is never reused for a name, not even
    after a delete, so (team, name, version) names one content for good: what a reader may cache forever."""

    team: str
    version: int = Field(ge=1)
    created_at: datetime
    updated_at: datetime

    @property
    def key(self) -> tuple[str, str, int]:
        """(team, name, version): what a reader keeps the calendar's days under, for good."""
        return (self.team, self.name, self.version)


def named_days_of_year(source: CalendarSource | CalendarSpec, year: int) -> dict[date, str | None]:
    """The days of ``year`` the calendar holds, each with its name where the source gives one (a holiday's
    name, an event's SUMMARY; an explicit date has none), in date order. Pure; cached per (source, year)."""
    found = _named_days(source.source if isinstance(source, CalendarSpec) else source, year)
    return dict(found)


def dates_of_year(source: CalendarSource | CalendarSpec, year: int) -> frozenset[date]:
    """The days of ``year`` the calendar holds. Pure; cached per (source, year)."""
    return _dates(source.source if isinstance(source, CalendarSpec) else source, year)


class CalendarDates:
    """The dates some calendars hold, by year (``calendar_rules.DaysOff``): their union, each year's computed
    once. What a job's schedule reads when it uses these calendars (``JobSpec.with_days_off``)."""

    def __init__(self, calendars: Sequence[CalendarSpec]) -> None:
        self.calendars = tuple(calendars)
        self._years: dict[int, frozenset[date]] = {}

    def __call__(self, year: int) -> frozenset[date]:
        found = self._years.get(year)
        if found is None:
            found = self._years[year] = frozenset().union(*(dates_of_year(c, year) for c in self.calendars))
        return found


@functools.lru_cache(maxsize=256)
def _dates(source: CalendarSource, year: int) -> frozenset[date]:
    return frozenset(day for day, _ in _named_days(source, year))


@functools.lru_cache(maxsize=256)
def _named_days(source: CalendarSource, year: int) -> tuple[tuple[date, str | None], ...]:
    if source.holidays is not None:
        found = _country_days(source.holidays.country, source.holidays.subdivision, year)
    elif source.dates is not None:
        found = {day: None for day in source.dates if day.year == year}
    else:
        assert source.ical is not None
        found = _ical_days(source.ical, year)
    return tuple(sorted(found.items()))


def _country_days(country: str, subdivision: str | None, year: int) -> dict[date, str | None]:
    """A year of the package's holidays (the first year of a country costs a few milliseconds); two holidays
    on one day are one day, named ``A; B``."""
    import holidays

    with warnings.catch_warnings():  # a year the package has no rules for is simply a year with none
        warnings.simplefilter("ignore", UserWarning)
        days = holidays.country_holidays(country, subdiv=subdivision, years=year)
    return {day: str(name) for day, name in days.items() if day.year == year}


def _day(value: date | datetime) -> date:
    return value.date() if isinstance(value, datetime) else value


def _ical_days(text: str, year: int) -> dict[date, str | None]:
    """The days of ``year`` the file's events touch: an all-day event each day from its start to its end
    (exclusive, as RFC 5545 has it; at most ``MAX_EVENT_DAYS``), a timed event the day it starts, in its
    own zone."""
    import recurring_ical_events

    start, end = date(year, 1, 1), date(year + 1, 1, 1)
    found: dict[date, str | None] = {}
    for event in recurring_ical_events.of(_parsed(text)).between(start, end):
        first = event.decoded("DTSTART")
        summary = str(event["SUMMARY"]) if "SUMMARY" in event else None
        for day in _event_days(first, event.decoded("DTEND") if "DTEND" in event else None):
            if start <= day < end:
                found.setdefault(day, summary)
    return found


def _event_days(first: date | datetime, last: date | datetime | None) -> list[date]:
    if isinstance(first, datetime) or not isinstance(last, date) or isinstance(last, datetime):
        return [_day(first)]
    days = max(1, min((last - first).days, MAX_EVENT_DAYS))
    return [first + timedelta(days=n) for n in range(days)]


# --- history -----------------------------------------------------------------------------------------------

HISTORY_KEPT = timedelta(days=90)  # as a job's (``job_history``)
CALENDAR_ACTIONS = ("create", "update", "delete")


@dataclass(frozen=True)
class CalendarChange:
    """One change of a team's calendar, written in the same atomic write as the change itself
    (``CalendarStore``), so the history never shows a change that did not happen, nor misses one that did.
    ``version``: the version the change made (a delete: the version deleted)."""

    team: str
    name: str
    version: int
    at: datetime
    action: str  # one of CALENDAR_ACTIONS
    actor: str  # the token's id (``job_history.token_id``), or who else made it
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {"from": ..., "to": ...}

    @property
    def order_key(self) -> str:
        """Where the change sorts in its calendar's history: versions only go up (across deletes too), and
        a delete comes after the write of the version it deletes, so the changes of a name sort by this
        alone, whatever their clocks said, and no two share it."""
        return f"{self.version:012d}.{1 if self.action == 'delete' else 0}"


def source_summary(source: CalendarSource) -> str:
    """A source as a history entry shows it: what it is, never the whole of a long one."""
    if source.holidays is not None:
        where = source.holidays.country + (
            f"-{source.holidays.subdivision}" if source.holidays.subdivision else ""
        )
        return f"holidays of {where}"
    if source.dates is not None:
        return f"{len(source.dates)} dates, {source.dates[0]} to {source.dates[-1]}"
    digest = hashlib.sha256((source.ical or "").encode()).hexdigest()[:12]
    return f"iCalendar, {len(source.ical or '')} characters, sha256 {digest}"


def calendar_change(
    before: Calendar | None, after: Calendar | None, at: datetime, actor: str
) -> CalendarChange:
    """The history entry of a calendar write: ``before`` None is a create, ``after`` None a delete; an update
    lists the fields that changed (a source by its summary)."""
    calendar = after or before
    assert calendar is not None
    if before is None or after is None:
        return CalendarChange(
            calendar.team, calendar.name, calendar.version, at, "delete" if after is None else "create", actor
        )
    fields: dict[str, dict[str, Any]] = {}
    if before.source != after.source:
        fields["source"] = {"from": source_summary(before.source), "to": source_summary(after.source)}
    if before.description != after.description:
        fields["description"] = {"from": before.description, "to": after.description}
    return CalendarChange(after.team, after.name, after.version, at, "update", actor, fields)


class CalendarUpdate(_Strict):
    """A calendar's new source and description (``PUT /v1/calendars/{name}``: both replaced whole), and the
    version it was computed from, if the writer wants a change since then refused rather than overwritten."""

    source: CalendarSource
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION)
    version: int | None = Field(
        default=None,
        ge=1,
        description="the version you read: if the calendar changed since, 409 and nothing is written. "
        "Without it, the calendar is replaced whatever its version.",
    )
