"""Team calendars: named sets of days a team's jobs can later skip or roll over (``business_days``).

A calendar's source is one of three: the public holidays of a country (and optional subdivision) as the
``holidays`` package knows them, offline; explicit dates; or an iCalendar file (RFC 5545) sent as text, its
recurring events expanded (``duetime.domain.ical_days``).

**Days are computed when a calendar is written, not when it is read.** A write computes the days of the
year before the write's year to the eleventh after it (``stored_years``: what schedule math reaches from the
write's year, as the ten-year check on a cron's exclusions and a roll's ten-year limit, and a preview's look
back over New Year) and stores them with the calendar (``Calendar.stored_days``, ``StoredDays``), after
checking them: at most ``MAX_DAYS_A_YEAR`` days in any of those years, an iCalendar's expansion within
``WRITE_BOUNDS`` of time and event days (``CalendarRefused``: a 422 naming the field). Reading a stored year
(the API, a preview, a poller's claim) decodes it: nothing expands an iCalendar there.

A year outside the stored ones (more than eleven years after the last write, or any year of a calendar
written before days were stored, whose item has none) is computed when asked, cached per (source, year):
holidays and dates exactly (cheap, offline); an iCalendar within ``READ_BOUNDS``, and a year past them holds
no days (logged). Writing the calendar again (a ``PUT`` of the same source) stores its days for the years
around the new write.

Limits: a calendar is one item of the control table, and DynamoDB refuses an item over 400 KB; before that,
the API refuses a body over 64 KiB (``duetime.api.app.MAX_BODY_BYTES``). ``MAX_DATES`` dates (about 13 bytes
each as JSON) and ``MAX_ICAL_CHARS`` characters of iCalendar text both fit one request with room for the
rest of it. The stored days add at most ``MAX_DAYS_A_YEAR`` x 13 years x about 8 bytes (21 KB) and their
names, which an iCalendar's ``SUMMARY`` lines give (no more than its text) and the ``holidays`` package's
are short: a stored calendar stays under 200 KB, and a write past ``MAX_STORED_BYTES`` is refused
(``days_to_store``).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Annotated, Any

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from duetime.domain.ical_days import Bounds, IcalRefused, check_ical, expanded_days, too_many_days
from duetime.domain.stored_days import StoredDays
from duetime.domain.stored_format import STORED, ReadsStoredTolerantly, is_stored

# holidays, icalendar and recurring_ical_events are imported where they are used: together about 100 ms,
# which every function that imports the ports (the poller and worker too) would otherwise pay at a cold start.

log = logging.getLogger(__name__)

CALENDAR_NAME_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$"
MAX_DATES = 4_000  # 20 years at MAX_DAYS_A_YEAR; 52 KB as JSON, within the 64 KiB request
MAX_ICAL_CHARS = 48_000  # with JSON's escapes (a line break is 4 characters), within the 64 KiB request
MAX_DESCRIPTION = 256
SUBDIVISIONS_LISTED = 30  # an unknown subdivision's message lists the country's first 30
# A calendar holds days off: weekends (104-106 a year), public holidays and closures fit with room to spare.
# Past this it lists the days a job runs, which a cron or a business-day schedule says better.
MAX_DAYS_A_YEAR = 200
STORED_YEARS_BEFORE, STORED_YEARS_AFTER = 1, 11  # the years stored around the write's (``stored_years``)
# An iCalendar's expansion when written, 13 years: a file near MAX_DAYS_A_YEAR of rules since 2000 takes
# 0.3 s here (tests/unit/test_calendar_bounds.py), about 3.5 times that on the api function's 512 MB.
WRITE_BOUNDS = Bounds(2.0, 1_000 * (STORED_YEARS_BEFORE + 1 + STORED_YEARS_AFTER), MAX_DAYS_A_YEAR)
# One year a reader asks for that is not stored (an item written before days were stored: any days a year).
READ_BOUNDS = Bounds(0.5, 1_000, 366)
MAX_STORED_BYTES = 350_000  # the stored calendar's JSON, within DynamoDB's 400 KB item with the rest of it
STORED_ROOM = 6 * MAX_DESCRIPTION + 1_000  # what a stored calendar holds besides its source and days, at most
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class _Strict(ReadsStoredTolerantly):
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
    def _readable(cls, text: str | None, info: ValidationInfo) -> str | None:
        """Parsed and its rules checked (``ical_days.check_ical``), not expanded: a write's expansion is
        ``days_to_store``'s. A calendar read from a store was checked when written: not parsed again."""
        if text is None or is_stored(info):
            return text
        return check_ical(text)

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
    # Optional: an item written before days were stored has none, and its days are computed when asked.
    stored_days: StoredDays | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        """(team, name, version): what a reader keeps the calendar's days under, for good."""
        return (self.team, self.name, self.version)

    @classmethod
    def from_stored(cls, text: str, days: str | None = None) -> Calendar:
        """A calendar from the JSON a store kept (and its stored days' JSON, kept beside it): its source is
        not checked again (it was when written), so reading one parses no iCalendar."""
        calendar = cls.model_validate_json(text, context=STORED)
        if days is None:
            return calendar
        return calendar.model_copy(
            update={"stored_days": StoredDays.model_validate_json(days, context=STORED)}
        )


def named_days_of_year(source: CalendarSource | CalendarSpec, year: int) -> dict[date, str | None]:
    """The days of ``year`` the calendar holds, each with its name where the source gives one (a holiday's
    name, an event's SUMMARY; an explicit date has none), in date order: a stored calendar's stored days,
    else computed (cached per (source, year))."""
    if isinstance(source, Calendar) and source.stored_days is not None:
        stored = source.stored_days.named_days(year)
        if stored is not None:
            return stored
    return dict(_named_days(source.source if isinstance(source, CalendarSpec) else source, year))


def dates_of_year(source: CalendarSource | CalendarSpec, year: int) -> frozenset[date]:
    """The days of ``year`` the calendar holds (``named_days_of_year``'s dates)."""
    if isinstance(source, Calendar) and source.stored_days is not None and source.stored_days.holds(year):
        return frozenset(named_days_of_year(source, year))
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
    if source.ical is None:
        return tuple(sorted(_cheap_days(source, year, year).items()))
    try:
        return tuple(sorted(expanded_days(source.ical, year, year, READ_BOUNDS).items()))
    except IcalRefused as exc:
        log.error(
            "a calendar's iCalendar, not stored for the year asked, is past the bounds of a read: it holds "
            "no days that year until it is written again",
            extra={"year": year, "calendar_source": source_summary(source), "why": str(exc)},
        )
        return ()


def _cheap_days(source: CalendarSource, first_year: int, last_year: int) -> dict[date, str | None]:
    """The days a holidays or dates source holds in ``first_year`` to ``last_year``."""
    if source.dates is not None:
        return {day: None for day in source.dates if first_year <= day.year <= last_year}
    assert source.holidays is not None
    found: dict[date, str | None] = {}
    for year in range(first_year, last_year + 1):
        found.update(_country_days(source.holidays.country, source.holidays.subdivision, year))
    return found


def _country_days(country: str, subdivision: str | None, year: int) -> dict[date, str | None]:
    """A year of the package's holidays (the first year of a country costs a few milliseconds); two holidays
    on one day are one day, named ``A; B``."""
    import holidays

    with warnings.catch_warnings():  # a year the package has no rules for is simply a year with none
        warnings.simplefilter("ignore", UserWarning)
        days = holidays.country_holidays(country, subdiv=subdivision, years=year)
    return {day: str(name) for day, name in days.items() if day.year == year}


# --- writing -----------------------------------------------------------------------------------------------


class CalendarRefused(ValueError):
    """A calendar a write refuses once its days are computed (a 422 naming ``field``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def stored_years(now: datetime) -> tuple[int, int]:
    """The first and last year whose days a calendar written at ``now`` (UTC) stores."""
    return now.year - STORED_YEARS_BEFORE, now.year + STORED_YEARS_AFTER


def days_to_store(source: CalendarSource, now: datetime, bounds: Bounds = WRITE_BOUNDS) -> StoredDays:
    """The days ``source`` holds in ``stored_years(now)``, checked: ``CalendarRefused`` for an iCalendar the
    expansion cannot read or that passes ``bounds``, and for a source past ``MAX_DAYS_A_YEAR`` in a year."""
    first, last = stored_years(now)
    kind = "ical" if source.ical is not None else "dates" if source.dates is not None else "holidays"
    if source.ical is None:
        days = _cheap_days(source, first, last)
    else:
        try:
            days = expanded_days(source.ical, first, last, bounds)
        except IcalRefused as exc:
            raise CalendarRefused("source.ical", str(exc)) from None
    per_year: dict[int, int] = {}
    for day in source.dates or days:  # explicit dates: every year they name, stored or not
        per_year[day.year] = per_year.get(day.year, 0) + 1
    year, most = max(per_year.items(), key=lambda item: (item[1], -item[0]), default=(first, 0))
    if most > MAX_DAYS_A_YEAR:
        raise CalendarRefused(f"source.{kind}", too_many_days(most, year, MAX_DAYS_A_YEAR))
    stored = StoredDays.of(days, first, last)
    size = len(source.model_dump_json().encode()) + len(stored.model_dump_json().encode()) + STORED_ROOM
    if size > MAX_STORED_BYTES:
        raise CalendarRefused(
            f"source.{kind}",
            f"the calendar with its days would take {size:,} bytes to store: at most {MAX_STORED_BYTES:,} "
            "(fewer events, or shorter SUMMARY lines)",
        )
    return stored


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
