"""A calendar's days as stored with it: computed once when the calendar is written, for a window of years,
so that nothing reading it (the API, a preview, a poller's claim) computes them again.

``StoredDays``: the window's first year, each year's days in order and the distinct names they carry. In
the stored JSON a year is one string, its days ``MMDD`` and, for a day with a name, ``MMDD:i`` (``i`` the
name's place in ``names``), separated by spaces: ``"0101:0 0406:1 0501:2 ..."`` (at most about 8 bytes a
day; ``duetime.domain.calendars`` states the sizes).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import date

from pydantic import BaseModel, ConfigDict, Field

MAX_STORED_YEARS = 100  # what a stored item may say it holds: far more than any window written


class StoredDays(BaseModel):
    """The days of the years ``first_year`` to ``last_year`` (``days``: one entry a year, in order)."""

    model_config = ConfigDict(frozen=True)

    first_year: int = Field(ge=1, le=9999)
    names: tuple[str, ...] = ()
    days: tuple[str, ...] = Field(max_length=MAX_STORED_YEARS)

    @property
    def last_year(self) -> int:
        return self.first_year + len(self.days) - 1

    def holds(self, year: int) -> bool:
        """Whether ``year``'s days are stored (a year of the window without days holds none)."""
        return self.first_year <= year <= self.last_year

    def named_days(self, year: int) -> dict[date, str | None] | None:
        """The days of ``year`` with their names, in date order; None when ``year`` is not stored."""
        if not self.holds(year):
            return None
        return dict(_decoded(self.days[year - self.first_year], self.names, year))

    @classmethod
    def of(cls, days: Mapping[date, str | None], first_year: int, last_year: int) -> StoredDays:
        """``days`` (those outside the years are left out) stored for ``first_year`` to ``last_year``."""
        names: dict[str, int] = {}
        years: list[list[str]] = [[] for _ in range(first_year, last_year + 1)]
        for day in sorted(days):
            if not first_year <= day.year <= last_year:
                continue
            name = days[day]
            entry = f"{day.month:02d}{day.day:02d}"
            if name is not None:
                entry += f":{names.setdefault(name, len(names))}"
            years[day.year - first_year].append(entry)
        return cls(first_year=first_year, names=tuple(names), days=tuple(" ".join(year) for year in years))


@functools.lru_cache(maxsize=1_024)
def _decoded(encoded: str, names: tuple[str, ...], year: int) -> tuple[tuple[date, str | None], ...]:
    found: list[tuple[date, str | None]] = []
    for entry in encoded.split():
        day, _, name = entry.partition(":")
        found.append((date(year, int(day[:2]), int(day[2:])), names[int(name)] if name else None))
    return tuple(found)
