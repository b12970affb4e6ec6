"""Business-day math (pure), and the same answers as numpy's business-day functions (``numpy.is_busday``,
``numpy.busday_offset``) over the public holidays of many countries, years 2000 to 2040."""

from __future__ import annotations

import calendar
from datetime import date, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.domain.business_days import NoBusinessDay, Roll, is_business_day, nth_business_day, roll
from duetime.domain.calendars import CalendarSource, dates_of_year

COUNTRIES = ["FR", "DE", "US", "GB", "JP", "BR", "IN", "AU", "ZA", "CA", "ES", "IT", "NL", "SE", "PL", "CN"]


def holidays_of(country: str, *years: int) -> frozenset[date]:
    source = CalendarSource.model_validate({"holidays": {"country": country}})
    return frozenset().union(*(dates_of_year(source, year) for year in years))


def numpy_nth(year: int, month: int, n: int, excluded: frozenset[date]) -> date | None:
    """numpy's answer: roll the first day forward and count n - 1 on (or the last day back, n + 1)."""
    first, last = date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])
    holidays = sorted(excluded)
    if n > 0:
        found = np.busday_offset(first, n - 1, roll="forward", holidays=holidays)
    else:
        found = np.busday_offset(last, n + 1, roll="backward", holidays=holidays)
    day = found.astype(object)
    return day if first <= day <= last else None


def test_a_weekday_is_a_business_day_unless_excluded() -> None:
    christmas = date(2026, 12, 25)  # a Friday
    assert is_business_day(christmas, set())
    assert not is_business_day(christmas, {christmas})
    assert not is_business_day(date(2026, 12, 26), set())  # a Saturday


def test_the_third_business_day_of_january_2027_in_france_skips_new_year_and_the_weekend() -> None:
    # 1 Jan 2027 is a Friday and a holiday: Mon 4, Tue 5, Wed 6
    assert nth_business_day(2027, 1, 3, holidays_of("FR", 2027)) == date(2027, 1, 6)


def test_the_last_business_day_of_december_2026_in_germany_is_the_31st() -> None:
    assert nth_business_day(2026, 12, -1, holidays_of("DE", 2026)) == date(2026, 12, 31)
    assert nth_business_day(2026, 12, -2, holidays_of("DE", 2026)) == date(2026, 12, 30)


def test_a_month_with_fewer_business_days_has_no_nth() -> None:
    assert nth_business_day(2027, 2, 20, frozenset()) == date(2027, 2, 26)
    assert nth_business_day(2027, 2, 21, frozenset()) is None
    assert nth_business_day(2027, 2, -21, frozenset()) is None


def test_n_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="never 0"):
        nth_business_day(2027, 1, 0, frozenset())


def test_an_excluded_day_rolls_to_the_next_or_previous_business_day() -> None:
    excluded = holidays_of("FR", 2026, 2027)
    assert roll(date(2027, 1, 1), excluded, Roll.NEXT) == date(2027, 1, 4)
    assert roll(date(2027, 1, 1), excluded, Roll.PREVIOUS) == date(2026, 12, 31)
    assert roll(date(2027, 1, 5), excluded) == date(2027, 1, 5)  # a business day stays


def test_a_roll_that_finds_no_business_day_says_so() -> None:
    everything = frozenset(date(2027, 1, 1) + timedelta(days=n) for n in range(4_000))
    with pytest.raises(NoBusinessDay):
        roll(date(2027, 1, 1), everything)


@settings(max_examples=300, deadline=None)
@given(
    country=st.sampled_from(COUNTRIES),
    day=st.dates(min_value=date(2000, 1, 1), max_value=date(2040, 12, 31)),
)
def test_is_business_day_agrees_with_numpy(country: str, day: date) -> None:
    excluded = holidays_of(country, day.year)
    assert is_business_day(day, excluded) == bool(np.is_busday(day, holidays=sorted(excluded)))


@settings(max_examples=300, deadline=None)
@given(
    country=st.sampled_from(COUNTRIES),
    year=st.integers(2000, 2040),
    month=st.integers(1, 12),
    n=st.integers(1, 24) | st.integers(-24, -1),
)
def test_the_nth_business_day_agrees_with_numpy(country: str, year: int, month: int, n: int) -> None:
    excluded = holidays_of(country, year)
    assert nth_business_day(year, month, n, excluded) == numpy_nth(year, month, n, excluded)


@settings(max_examples=300, deadline=None)
@given(
    country=st.sampled_from(COUNTRIES),
    day=st.dates(min_value=date(2000, 1, 1), max_value=date(2040, 12, 31)),
    direction=st.sampled_from(Roll),
)
def test_rolling_agrees_with_numpy(country: str, day: date, direction: Roll) -> None:
    excluded = holidays_of(country, day.year - 1, day.year, day.year + 1)
    rolled = np.busday_offset(
        day, 0, roll="forward" if direction is Roll.NEXT else "backward", holidays=sorted(excluded)
    )
    assert roll(day, excluded, direction) == rolled.astype(object)
