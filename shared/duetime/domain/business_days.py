"""Business days: Monday to Friday, except the days a team's calendars exclude (``calendars.dates_of_year``).

Pure: the excluded days are passed in (any container of dates: a frozenset, or the union of a few). A roll
may cross into another year: ``excluded`` holds the days of every year it may reach (a roll forward from
late December, the next year's too).
"""

from __future__ import annotations

import calendar
from collections.abc import Container
from datetime import date, timedelta
from enum import StrEnum

SATURDAY = 5
MAX_ROLL_DAYS = 3_660  # a roll that finds no business day in ten years has been given every day to skip


class Roll(StrEnum):
    """Where an excluded day goes: the next business day after it, or the previous one before it."""

    NEXT = "next"
    PREVIOUS = "previous"


class NoBusinessDay(ValueError):
    """No business day within ``MAX_ROLL_DAYS`` of the day rolled: the calendars exclude every one."""


def is_business_day(day: date, excluded: Container[date]) -> bool:
    """Whether ``day`` is a weekday (Monday to Friday) that ``excluded`` does not hold."""
    return day.weekday() < SATURDAY and day not in excluded


def nth_business_day(year: int, month: int, n: int, excluded: Container[date]) -> date | None:
    """The ``n``-th business day of the month: n = 1, 2, ... counted from its first day, n = -1, -2, ...
    from its last (-1: the last business day). None when the month has fewer than ``abs(n)`` business
    days; ``n`` = 0 is refused (``ValueError``)."""
    if n == 0:
        raise ValueError("n counts business days from 1 (from the start) or -1 (from the end), never 0")
    length = calendar.monthrange(year, month)[1]
    days = range(1, length + 1) if n > 0 else range(length, 0, -1)
    seen = 0
    for number in days:
        day = date(year, month, number)
        if is_business_day(day, excluded):
            seen += 1
            if seen == abs(n):
                return day
    return None


def roll(day: date, excluded: Container[date], direction: Roll = Roll.NEXT) -> date:
    """``day`` itself when it is a business day, else the nearest business day after it (``NEXT``) or
    before it (``PREVIOUS``). Raises ``NoBusinessDay`` when none is within ``MAX_ROLL_DAYS``."""
    step = timedelta(days=1 if direction is Roll.NEXT else -1)
    current = day
    for _ in range(MAX_ROLL_DAYS + 1):
        if is_business_day(current, excluded):
            return current
        current += step
    raise NoBusinessDay(f"no business day within {MAX_ROLL_DAYS} days {direction.value} of {day}")
