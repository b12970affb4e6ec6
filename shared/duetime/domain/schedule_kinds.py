"""A job's schedule, as written: cron with an IANA zone, rate, one time (at), business days, and exclusions.

A part of ``duetime.domain.models`` (which exports every name of these modules).
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, time, timedelta
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import (
    AfterValidator,
    AwareDatetime,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    ValidationInfo,
    field_validator,
)

from duetime.domain.calendar_rules import OnExcluded, RolledRuns
from duetime.domain.calendars import CALENDAR_NAME_PATTERN
from duetime.domain.cron_dialect import cron_never_fires
from duetime.domain.model_base import Strict
from duetime.domain.stored_format import is_stored
from duetime.domain.timeutil import iso_z, to_utc, whole_seconds

CRON_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


_CRON_TOKEN = r"[0-9A-Za-z*/,?#-]+"


_BLANK = r"[ \t]"


_ALIAS = "@({})".format("|".join(name.removeprefix("@") for name in CRON_ALIASES))


_EVENTBRIDGE = rf"cron\({_BLANK}*{_CRON_TOKEN}({_BLANK}+{_CRON_TOKEN}){{5}}{_BLANK}*\)"


CRON_PATTERN = rf"^{_BLANK}*({_ALIAS}|{_CRON_TOKEN}({_BLANK}+{_CRON_TOKEN}){{4}}|{_EVENTBRIDGE}){_BLANK}*$"


_CRON_FIELD = re.compile(_CRON_TOKEN)


MAX_CRON_LENGTH = 256  # a client's cron; every value of every field listed one by one would be about 400


ZONE_PATTERN = r"^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$"


@functools.cache
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones())


def in_utc(value: datetime) -> datetime:
    """``value`` in UTC; an instant with no UTC equivalent (year 1 at +05:00, year 9999 at -05:00) is refused
    as a validation error naming its field, not raised as a 500."""
    try:
        return to_utc(value)
    except OverflowError:
        raise ValueError("is out of range: no UTC instant matches it") from None


def _iana_zone_name(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if value not in _zone_names():
        raise ValueError(f"unknown time zone {value!r}: use an IANA name such as 'Europe/Berlin'")
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:  # pragma: no cover - names come from tzdata
        raise ValueError(f"unknown time zone {value!r}") from exc
    return value


def utc_instant(value: datetime) -> datetime:
    return whole_seconds(in_utc(value))


def _standard_cron_text(value: str) -> str:
    """A cron as given, in its standard form (5 fields, or ``cron(...)`` around EventBridge's 6, separated by
    one space; aliases expanded); a ``ValueError`` naming the mistake when it cannot be one."""
    expr = " ".join(re.split(_BLANK + "+", value.strip(" \t")))
    if expr.startswith("@") and expr not in CRON_ALIASES:
        raise ValueError(f"unknown cron alias {expr!r}: use one of {', '.join(CRON_ALIASES)}")
    expr = CRON_ALIASES.get(expr, expr)
    if eventbridge := re.fullmatch(r"cron\((.*)\)", expr):
        fields = eventbridge[1].strip(" ").split(" ")
        expr = "cron({})".format(" ".join(fields))
        if len(fields) != 6:
            raise ValueError(
                "cron(...) needs EventBridge's 6 fields (minutes hours day-of-month month day-of-week year), "
                f"got {len(fields)}"
            )
    else:
        fields = expr.split(" ") if expr else []
        if len(fields) != 5:
            raise ValueError(
                f"cron needs exactly 5 fields (minute hour day month weekday), got {len(fields)}; "
                "EventBridge's 6 are written inside cron(...)"
            )
    if not all(_CRON_FIELD.fullmatch(f) for f in fields):
        raise ValueError("cron fields may contain only digits, names, '*', '/', ',', '-', '?' and '#'")
    return expr


# Every job a poller reads validates its stored cron again, and stored jobs share a few expressions: the
# standard form of those is cached. A client's text is not (the cache would hold whatever clients send).
_stored_cron_text = functools.lru_cache(maxsize=1024)(_standard_cron_text)


class CronSchedule(Strict):
    """Standard 5-field cron (or an @alias) with Quartz's day tokens, or an EventBridge ``cron(...)``,
    evaluated in an IANA time zone (``duetime.domain.cron_dialect``)."""

    cron: str = Field(
        min_length=1,
        pattern=CRON_PATTERN,
        json_schema_extra={"maxLength": MAX_CRON_LENGTH},  # a client's; a stored cron is read whatever it is
        description="5-field cron expression (minute hour day month weekday, separated by spaces or tabs; "
        "day-of-month also takes L, nW, LW and ?, day-of-week nL, n#k and ?; weekdays 0-7, 0 and 7 Sunday), "
        "an EventBridge expression as written there (`cron(0 9 ? * MON-FRI *)`: minutes hours day-of-month "
        "month day-of-week year, weekdays 1-7 = SUN-SAT, `?` in exactly one day field, years 1970-2199) "
        "or @hourly/@daily/@weekly/@monthly/@yearly (also @annually, @midnight), at most "
        f"{MAX_CRON_LENGTH} characters. A cron that never fires (e.g. `0 0 30 2 *`) or that cron cannot "
        "read (a value out of its field's range, an unknown name, a step of 0) is refused with 422.",
    )
    timezone: str = Field(
        default="UTC",
        max_length=64,
        pattern=ZONE_PATTERN,
        description="IANA time zone name, e.g. Europe/Berlin; names outside the IANA database are refused "
        "with 422.",
    )

    @field_validator("cron", mode="before")
    @classmethod
    def _standard_cron(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value  # the type check names it
        if is_stored(info):
            return _stored_cron_text(value)
        if len(value) > MAX_CRON_LENGTH:  # before croniter reads it
            raise ValueError(f"cron is longer than {MAX_CRON_LENGTH} characters")
        expr = _standard_cron_text(value)
        reason = cron_never_fires(expr, (info.context or {}).get("now"))
        if reason:
            raise ValueError(reason)
        return expr

    _iana_zone = field_validator("timezone", mode="before")(_iana_zone_name)


_RATE_UNITS = "(minute|minutes|hour|hours|day|days)"


_RATE = re.compile(rf"{_BLANK}*(-?[0-9]+){_BLANK}+{_RATE_UNITS}{_BLANK}*")


RATE_PATTERN = rf"^{_BLANK}*0*[1-9][0-9]*{_BLANK}+{_RATE_UNITS}{_BLANK}*$"


_RATE_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


MAX_RATE_SECONDS = 366 * 86400


MAX_RATE_LENGTH = 64


class RateSchedule(Strict):
    """A fixed rate such as ``"5 minutes"``, anchored to the job's start."""

    rate: str = Field(
        pattern=RATE_PATTERN,
        json_schema_extra={"maxLength": MAX_RATE_LENGTH},  # a client's; a stored rate is read whatever it is
        description=f'"<n> minute(s)|hour(s)|day(s)", n >= 1, in at most {MAX_RATE_LENGTH} characters; at '
        "most 366 days (longer is refused with 422)",
    )

    @field_validator("rate", mode="before")
    @classmethod
    def _positive_rate(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        # before its number is read: int() raises on text of more than 4,300 digits
        if len(value) > MAX_RATE_LENGTH and not is_stored(info):
            raise ValueError(f"rate is longer than {MAX_RATE_LENGTH} characters")
        match = _RATE.fullmatch(value)
        if not match:
            raise ValueError('rate must look like "5 minutes", "1 hour" or "2 days"')
        seconds = int(match.group(1)) * _RATE_UNIT_SECONDS[match.group(2).rstrip("s")]
        if seconds <= 0:
            raise ValueError("rate must be greater than zero")
        if seconds > MAX_RATE_SECONDS:
            raise ValueError("rate must be at most 366 days")
        return value.strip(" \t")

    @property
    def interval(self) -> timedelta:
        match = _RATE.fullmatch(self.rate)
        assert match is not None  # validated above
        return timedelta(seconds=int(match.group(1)) * _RATE_UNIT_SECONDS[match.group(2).rstrip("s")])


class AtSchedule(Strict):
    """Run once, at an instant."""

    at: AwareDatetime = Field(
        description="ISO-8601 instant with an offset, e.g. 2026-12-01T10:00:00Z; it must be in the future "
        "(a past instant is refused with 422)"
    )

    @field_validator("at")
    @classmethod
    def _in_the_future(cls, value: datetime, info: ValidationInfo) -> datetime:
        value = utc_instant(value)
        now = (info.context or {}).get("now")
        if now is not None and value <= now:
            raise ValueError(f"at must be in the future: later than {iso_z(now)}")
        return value


MAX_JOB_CALENDARS = 5


def _distinct_names(names: list[str]) -> list[str]:
    if len(set(names)) != len(names):
        raise ValueError("calendars must not repeat")
    return names


CalendarName = Annotated[str, StringConstraints(pattern=CALENDAR_NAME_PATTERN)]


CalendarNames = Annotated[
    list[CalendarName],
    Field(max_length=MAX_JOB_CALENDARS),
    AfterValidator(_distinct_names),
]


LOCAL_TIME_PATTERN = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"


class BusinessDaySchedule(Strict):
    """The n-th business day of each month (n < 0: counted from its end) at a local time, business days
    being Monday to Friday except the dates the named calendars hold (``duetime.domain.calendar_rules``)."""

    business_day: int = Field(
        ge=-23,
        le=23,
        description="which business day of the month: 1 the first, 2 the second, ... -1 the last, -2 the one "
        "before it; not 0. A month with fewer business days has no run",
    )
    at: str = Field(pattern=LOCAL_TIME_PATTERN, description='the local time of day, "HH:MM" (24-hour)')
    timezone: str = Field(
        default="UTC",
        max_length=64,
        pattern=ZONE_PATTERN,
        description="IANA time zone name, e.g. Europe/Paris",
    )
    calendars: CalendarNames = Field(
        default_factory=list,
        description=f"names of the team's calendars (at most {MAX_JOB_CALENDARS}) whose dates are not "
        "business days; none: Monday to Friday. An unknown name is refused with 422",
    )

    _iana_zone = field_validator("timezone", mode="before")(_iana_zone_name)

    @field_validator("business_day")
    @classmethod
    def _not_zero(cls, value: int) -> int:
        if value == 0:
            raise ValueError("business_day counts from 1 (the first) or from -1 (the last), never 0")
        return value

    @property
    def local_time(self) -> time:
        hours, minutes = self.at.split(":")
        return time(int(hours), int(minutes))


def _schedule_kind(value: Any) -> str | None:
    if isinstance(value, dict):
        if "business_day" in value:
            return "business_day"
        kinds = [k for k in ("cron", "rate", "at") if k in value]
        return kinds[0] if len(kinds) == 1 else None
    if isinstance(value, CronSchedule):
        return "cron"
    if isinstance(value, RateSchedule):
        return "rate"
    if isinstance(value, BusinessDaySchedule):
        return "business_day"
    return "at" if isinstance(value, AtSchedule) else None


Schedule = Annotated[
    Annotated[CronSchedule, Tag("cron")]
    | Annotated[RateSchedule, Tag("rate")]
    | Annotated[AtSchedule, Tag("at")]
    | Annotated[BusinessDaySchedule, Tag("business_day")],
    Discriminator(
        _schedule_kind,
        custom_error_type="schedule_kind",
        custom_error_message="schedule needs exactly one of 'cron', 'rate', 'at' or 'business_day'",
    ),
]


class Exclusion(Strict):
    """The dates a cron job does not run on (those of a team's calendars), and what its times on them do
    instead (``duetime.domain.calendar_rules``)."""

    calendars: CalendarNames = Field(
        min_length=1,
        description=f"names of the team's calendars (1 to {MAX_JOB_CALENDARS}) whose dates are excluded, "
        "in the cron's time zone; an unknown name is refused with 422",
    )
    on_excluded: OnExcluded = Field(
        default=OnExcluded.SKIP,
        description="a time on an excluded date: `skip` (no run), `next_business_day` or "
        "`previous_business_day` (the same wall time on the nearest Monday-to-Friday date the calendars do "
        "not hold, after or before it)",
    )
    rolled: RolledRuns = Field(
        default=RolledRuns.ONCE,
        description="times rolled onto one instant (two holidays in a row rolled onto the day after, or onto "
        "that day's own time): `once` (one run) or `each` (a run per date rolled, the k-th extra k seconds "
        "later)",
    )
