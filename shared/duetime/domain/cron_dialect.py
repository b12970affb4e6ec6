"""The cron dialect duetime reads: Vixie cron's 5 fields with Quartz's day tokens, and EventBridge's 6.

Two spellings, one meaning. A job keeps the text it was given (whitespace normalised); this module reads it
once (cached) into croniter's 5 fields plus what croniter lacks, and schedule math evaluates that.

* **5 fields** ``minute hour day-of-month month day-of-week``. Day-of-week numbers are Vixie's: 0-7, 0 and 7
  Sunday. Beside cron's ``* , - /`` and names (``JAN-MAR``, ``MON-FRI``, any case):

  - day-of-month ``L`` the last day; ``nW`` the weekday (Mon-Fri) nearest day n, never leaving the month
    (``1W`` on a Saturday is Monday the 3rd; ``31W`` on a Sunday is Friday the 29th; a month without day n
    has no ``nW`` day, as in Quartz); ``LW`` the last weekday. ``W`` and ``LW`` stand alone in the field.
  - day-of-week ``nL`` the last weekday n of the month (``5L`` the last Friday; croniter's ``L5`` too);
    ``n#k`` the k-th weekday n of the month, k 1-5 (``1#2`` the second Monday; no firing in a month
    without a fifth one). Both mix with other values in a list (``1#1,5L,3``).
  - ``?`` (any) in either day field: the same as ``*``.

* **EventBridge** ``cron(minutes hours day-of-month month day-of-week year)``, as an EventBridge Scheduler
  schedule expression is written (https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html
  #cron-based and the field table in https://docs.aws.amazon.com/eventbridge/latest/userguide/
  eb-cron-expressions.html). Day-of-week numbers are 1-7 = SUN-SAT and ``L`` alone is Saturday, the last
  day of the week; exactly one day field is ``?`` (EventBridge refuses both and neither); the year is ``*``,
  a year, a range, a list or a step within 1970-2199.

**Day-of-month and day-of-week together** (Vixie cron's rule, for every token above): a field that starts
with ``*`` or is ``?`` leaves the day to the other field alone (formally: a day must match both, and that
field matches every day). When both are restricted, a day matches if either does: ``0 9 LW * 1`` runs on
the last weekday and on every Monday; ``0 9 15W * 5L`` on the weekday nearest the 15th and on the last
Friday. ``L``, ``W``, ``LW``, ``nL`` and ``n#k`` are restrictions (they do not start with ``*``), so
``0 9 LW * */2`` runs on the last weekday when it is also in ``*/2`` (Sunday, Tuesday, Thursday, Saturday).
EventBridge's ``?`` makes its forms the one-field case always.
"""

from __future__ import annotations

import calendar
import functools
import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Protocol

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from duetime.domain.timeutil import to_utc

LAST = 0  # nearest_weekday's stand-in for the month's last day (LW)
EARLIEST_YEAR, LATEST_YEAR = 1970, 2199  # EventBridge's year field
HORIZON_YEARS = 30  # no match within this many years: the cron has ended (croniter's own limit, as set)
_DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_ONE_SECOND = timedelta(seconds=1)
_LAST_YEAR_SEARCHED = 9000  # date's own limit is 9999
_NTH = re.compile(r"([0-9A-Z]+)#([0-9]+)")
_LAST_OF = re.compile(r"([0-9A-Z]+)L|L([0-9]+)")


class WallClockMatches(Protocol):
    """croniter's iteration interface, as schedule math uses it."""

    def get_next(self, ret_type: type[datetime], /) -> datetime: ...


@dataclass(frozen=True)
class CronFields:
    """A cron read into croniter's 5 fields (Vixie's day numbers, ``?`` as ``*``) and what croniter lacks:
    ``nearest_weekday`` (day-of-month ``nW``: n; ``LW``: LAST; ``day`` then reads ``*``) and ``years``."""

    minute: str
    hour: str
    day: str
    month: str
    weekday: str
    nearest_weekday: int | None = None
    years: frozenset[int] | None = None

    @property
    def day_restricted(self) -> bool:
        return self.nearest_weekday is not None or not self.day.startswith("*")


@dataclass(frozen=True)
class CronPattern:
    """One croniter pattern whose every field must match (``day_or=False``), kept on the days its
    ``nearest_weekday`` and ``years`` allow (None: croniter alone decides)."""

    text: str
    nearest_weekday: int | None = None
    years: frozenset[int] | None = None

    @property
    def croniter_alone(self) -> bool:
        return self.nearest_weekday is None and self.years is None

    def allows(self, day: date) -> bool:
        if self.years is not None and day.year not in self.years:
            return False
        return self.nearest_weekday is None or day == weekday_nearest(
            day.year, day.month, self.nearest_weekday
        )

    def first_day_from(self, day: date) -> date | None:
        """The first day on or after ``day`` that the pattern's W and years allow (None: no such day)."""
        while day.year < _LAST_YEAR_SEARCHED:
            if self.years is not None and day.year not in self.years:
                later = [year for year in self.years if year > day.year]
                if not later:
                    return None
                day = date(min(later), 1, 1)
                continue
            if self.nearest_weekday is not None:
                target = weekday_nearest(day.year, day.month, self.nearest_weekday)
                if target is None or target < day:
                    day = _first_of_next_month(day)
                    continue
                day = target
            return day
        return None


def weekday_nearest(year: int, month: int, day: int) -> date | None:
    """The weekday (Mon-Fri) nearest ``day`` (LAST: the month's last day) within its month, as Quartz's W;
    None when the month has no such day (``31W`` in April)."""
    last = calendar.monthrange(year, month)[1]
    target = last if day == LAST else day
    if target > last:
        return None
    found = date(year, month, target)
    if found.weekday() == 5:  # Saturday: the Friday before, unless that leaves the month
        return found - timedelta(days=1) if target > 1 else found + timedelta(days=2)
    if found.weekday() == 6:  # Sunday: the Monday after, unless that leaves the month
        return found + timedelta(days=1) if target < last else found - timedelta(days=2)
    return found


def _first_of_next_month(day: date) -> date:
    return date(day.year + 1, 1, 1) if day.month == 12 else date(day.year, day.month + 1, 1)


# --- reading -----------------------------------------------------------------------------------------------


def is_eventbridge(expr: str) -> bool:
    return expr.startswith("cron(")


@functools.lru_cache(maxsize=1024)
def read_cron(expr: str) -> CronFields:
    """``expr`` (a cron in its standard text) read into croniter's fields; a ``ValueError`` naming the
    field and the mistake when it cannot be."""
    eventbridge = is_eventbridge(expr)
    fields = (expr[len("cron(") : -1] if eventbridge else expr).split()
    minute, hour, day, month, weekday = fields[:5]
    for name, text in (("minute", minute), ("hour", hour), ("month", month)):
        _no_day_tokens(name, text)
    years = None
    if eventbridge:
        if (day == "?") == (weekday == "?"):
            both = "both are" if day == "?" else "neither is"
            raise ValueError(f"EventBridge's day-of-month and day-of-week: {both} '?'; exactly one must be")
        weekday = _eventbridge_weekday(weekday)
        years = _years(fields[5])
    day, nearest = _day_of_month(day)
    return CronFields(minute, hour, day, month, _day_of_week(weekday), nearest, years)


def _no_day_tokens(name: str, text: str) -> None:
    if "?" in text:
        raise ValueError(f"{name} {text!r}: '?' (any) is for day-of-month and day-of-week only")
    for piece in re.split("[,/-]", text.upper()):
        if "#" in piece or piece in ("L", "LW") or re.fullmatch(r"[0-9]+[LW]", piece):
            raise ValueError(f"{name} {text!r}: L, W and # are for day-of-month and day-of-week only")


def _day_of_month(text: str) -> tuple[str, int | None]:
    upper = text.upper()
    if upper == "?":
        return "*", None
    if upper == "LW":
        return "*", LAST
    if match := re.fullmatch(r"([0-9]+)W", upper):
        if not 1 <= int(match[1]) <= 31:
            raise ValueError(f"day-of-month {text!r}: W needs a day 1-31 before it (15W)")
        return "*", int(match[1])
    if "W" in upper:
        raise ValueError(f"day-of-month {text!r}: W stands alone in the field, after one day (15W) or L (LW)")
    if "#" in upper:
        raise ValueError(f"day-of-month {text!r}: '#' is for day-of-week")
    if "?" in upper:
        raise ValueError(f"day-of-month {text!r}: '?' (any) stands alone in the field")
    if any("L" in piece and piece != "L" for piece in upper.split(",")):
        raise ValueError(f"day-of-month {text!r}: L stands for the last day, alone in its list item")
    return text, None


def _day_of_week(text: str) -> str:
    """Vixie's day-of-week with Quartz's ``nL`` written croniter's way (``Ln``) and ``n#k`` checked."""
    if text == "?":
        return "*"
    terms = []
    for term in text.split(","):
        upper = term.upper()
        if upper in ("L", "LW") or "W" in upper.replace("WED", "") or "?" in upper:
            raise ValueError(
                f"day-of-week {text!r}: write nL for the last weekday n (5L: the last Friday); W and LW are "
                "for day-of-month, and '?' stands alone"
            )
        if nth := _NTH.fullmatch(upper):
            terms.append(f"{_vixie_day(nth[1], text)}#{_nth(nth[2], term)}")
        elif last := _LAST_OF.fullmatch(upper):
            terms.append(f"L{_vixie_day(last[1] or last[2], text)}")
        else:
            terms.append(term)
    return ",".join(terms)


def _nth(count: str, term: str) -> int:
    if not 1 <= int(count) <= 5:
        raise ValueError(f"day-of-week {term!r}: # counts 1-5 (the 2nd weekday n of the month: n#2)")
    return int(count)


def _vixie_day(value: str, field: str) -> int:
    if value in _DAY_NAMES:
        return _DAY_NAMES.index(value)
    if not value.isdigit() or int(value) > 7:
        raise ValueError(f"day-of-week {field!r}: {value} is out of range (0-7 or SUN-SAT)")
    return int(value)


def _eventbridge_weekday(text: str) -> str:
    """EventBridge's day-of-week (1-7 = SUN-SAT, ``L`` alone Saturday) in Vixie's numbers."""
    if text in ("?", "*"):
        return text
    terms = []
    for term in text.upper().split(","):
        if term == "L":
            terms.append("6")
        elif nth := _NTH.fullmatch(term):
            terms.append(f"{_eventbridge_day(nth[1], text)}#{_nth(nth[2], term)}")
        elif last := re.fullmatch(r"([0-9A-Z]+)L", term):
            terms.append(f"{_eventbridge_day(last[1], text)}L")
        else:
            days = _expand(term, 1, 7, lambda value: _eventbridge_day(value, text) + 1, "day-of-week")
            terms.append(",".join(str(day - 1) for day in sorted(days)))
    return ",".join(terms)


def _eventbridge_day(value: str, field: str) -> int:
    """An EventBridge day-of-week value (1-7 or a name) as Vixie's number."""
    if value in _DAY_NAMES:
        return _DAY_NAMES.index(value)
    if not value.isdigit() or not 1 <= int(value) <= 7:
        raise ValueError(f"day-of-week {field!r}: {value} is out of range (EventBridge's 1-7 or SUN-SAT)")
    return int(value) - 1


def _years(text: str) -> frozenset[int] | None:
    if text == "*":
        return None
    years: set[int] = set()
    for term in text.split(","):
        years |= _expand(term, EARLIEST_YEAR, LATEST_YEAR, lambda value: _year(value, text), "year")
    return frozenset(years)


def _year(value: str, field: str) -> int:
    if not value.isdigit() or not EARLIEST_YEAR <= int(value) <= LATEST_YEAR:
        raise ValueError(f"year {field!r}: {value} is out of range ({EARLIEST_YEAR}-{LATEST_YEAR})")
    return int(value)


def _expand(term: str, low: int, high: int, value_of: _ValueOf, name: str) -> set[int]:
    """A list item of ``* a a-b`` with an optional ``/step``, as the values it names."""
    base, _, step_text = term.partition("/")
    if step_text and (not step_text.isdigit() or int(step_text) == 0):
        raise ValueError(f"{name} {term!r}: a step is a whole number from 1")
    step = int(step_text or 1)
    if base == "*":
        first, last = low, high
    elif "-" in base:
        start, _, end = base.partition("-")
        first, last = value_of(start), value_of(end)
        if last < first:
            raise ValueError(f"{name} {term!r}: a range runs from its lower value to its higher one")
    else:
        first = value_of(base)
        last = high if step_text else first
    return set(range(first, last + 1, step))


class _ValueOf(Protocol):
    def __call__(self, value: str, /) -> int: ...


# --- patterns ----------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def day_rule_patterns(expr: str) -> tuple[CronPattern, ...]:
    """croniter patterns whose matches, together, are the cron's (the module's day-of-month/day-of-week rule).

    If either day field starts with ``*`` the day must match both: one pattern, croniter intersecting them
    (``day_or=False``). Otherwise it must match either: a day-of-month-only and a day-of-week-only pattern.
    croniter's own union (``day_or=True``) is not used: it intersects when a field is ``*``-like after
    expansion (``1-31`` beside ``1,*/3``) and when day-of-week says ``L5``. A day-of-week list that mixes
    plain days with ``L``/``#`` ones (which croniter refuses) is split into one pattern for each kind.
    """
    cron = read_cron(expr)
    if cron.day_restricted and not cron.weekday.startswith("*"):
        pairs = [(cron.day, cron.nearest_weekday, "*"), ("*", None, cron.weekday)]
    else:
        pairs = [(cron.day, cron.nearest_weekday, cron.weekday)]
    return tuple(
        CronPattern(f"{cron.minute} {cron.hour} {day} {cron.month} {weekday}", nearest, cron.years)
        for day, nearest, weekdays in pairs
        for weekday in _croniter_weekday_lists(weekdays)
    )


def _croniter_weekday_lists(weekday: str) -> list[str]:
    terms = weekday.split(",")
    nth = [term for term in terms if "#" in term or term.upper().startswith("L")]
    plain = [term for term in terms if term not in nth]
    return [",".join(kind) for kind in (plain, nth) if kind]


def wall_clock_matches(pattern: CronPattern, start: datetime) -> WallClockMatches:
    """The pattern's naive wall-clock matches after ``start``, in order: croniter's own iterator when
    croniter alone decides (every plain cron), else croniter's kept on the days the pattern allows."""
    if pattern.croniter_alone:
        return croniter(pattern.text, start, day_or=False, max_years_between_matches=HORIZON_YEARS)
    return _AllowedDayMatches(pattern, start)


class _AllowedDayMatches:
    """croniter's matches of a pattern's fields on the days its W and years allow: croniter is restarted at
    each allowed day, and a match on a day not allowed sends it on to the next one."""

    def __init__(self, pattern: CronPattern, start: datetime) -> None:
        self._pattern = pattern
        self._matches = croniter(pattern.text, start, day_or=False, max_years_between_matches=HORIZON_YEARS)
        self._current = start

    def get_next(self, ret_type: type[datetime], /) -> datetime:
        after, horizon = self._current, None
        while True:
            day = self._pattern.first_day_from((after + _ONE_SECOND).date())
            if day is not None and horizon is None:
                horizon = day.year + HORIZON_YEARS  # counted from the first allowed day: years may skip ahead
            if day is None or horizon is None or day.year > horizon:
                raise CroniterBadDateError(f"no match of {self._pattern.text!r} after {after.isoformat()}")
            self._matches.set_current(max(after, datetime.combine(day, time()) - _ONE_SECOND))
            found: datetime = self._matches.get_next(datetime)
            if self._pattern.allows(found.date()):
                self._current = found
                return found
            after = found


# --- whether a cron is usable -----------------------------------------------------------------------------

_RANDOM_FIELD = re.compile(r"[Rr](/\d+)?")  # croniter's "R": a random value drawn anew at each parse


def cron_never_fires(expr: str, now: datetime | None = None) -> str | None:
    """Why a cron in its standard text is unusable (syntax, or no date ever matches; with ``now``, a cron
    whose years are all past too), or None when it is fine."""
    wall_clock = datetime(2000, 1, 1)  # noqa: DTZ001 - cron matches naive local wall-clock time
    if any(_RANDOM_FIELD.fullmatch(field) for field in expr.removeprefix("cron(").split()):
        return "invalid cron expression: R (a random value) would move the schedule every time it is read"
    try:
        patterns = day_rule_patterns(expr)  # the dialect's tokens (errors name the field and the mistake)
        for pattern in patterns:
            wall_clock_matches(pattern, wall_clock)  # croniter's syntax check of the fields it reads
        if not any(_fires(pattern, wall_clock) for pattern in patterns):
            return "cron never fires (no date matches it, e.g. 30 February)"
        if now is not None and read_cron(expr).years is not None:
            # A local time T is an instant of at most T + 12 h (UTC-12): no match after now - 12 h, none
            # later anywhere.
            earliest = to_utc(now).replace(tzinfo=None) - timedelta(hours=12)
            if not any(_fires(pattern, earliest) for pattern in patterns):
                return "cron never fires again (its years are past)"
    except (CroniterBadCronError, ValueError, KeyError) as exc:
        return f"invalid cron expression: {exc}"
    return None


def _fires(pattern: CronPattern, start: datetime) -> bool:
    try:
        wall_clock_matches(pattern, start).get_next(datetime)
    except CroniterBadDateError:
        return False
    return True
