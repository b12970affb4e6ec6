"""Instants as duetime stores them: ``iso_z`` writes exactly what ``strftime(ISO_Z)`` writes, whatever the
instant's zone, and ``parse_iso_z`` reads it back to the second."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from duetime.domain.timeutil import ISO_Z, iso_z, parse_iso_z

ZONES = [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=11)), ZoneInfo("UTC")]
ZONES += [ZoneInfo("America/New_York"), ZoneInfo("Australia/Lord_Howe"), ZoneInfo("Pacific/Kiritimati")]


def instants(count: int) -> list[datetime]:
    rng = random.Random(20261201)
    start = datetime(1000, 1, 1, tzinfo=UTC)
    span = int((datetime(9999, 12, 30, tzinfo=UTC) - start).total_seconds())
    picked = [
        start + timedelta(seconds=rng.randrange(span), microseconds=rng.randrange(10**6))
        for _ in range(count)
    ]
    edges = [datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), datetime(2024, 2, 29, tzinfo=UTC)]
    return picked + edges


@pytest.mark.parametrize("zone", ZONES, ids=str)
def test_an_instant_is_written_as_strftime_writes_it_in_utc_whatever_its_zone(zone: object) -> None:
    for instant in instants(500):
        local = instant.astimezone(zone)  # type: ignore[arg-type]
        assert iso_z(local) == instant.astimezone(UTC).strftime(ISO_Z)
        assert parse_iso_z(iso_z(local)) == instant.replace(microsecond=0)


def test_a_year_before_1000_is_written_as_strftime_writes_it() -> None:
    early = datetime(999, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert iso_z(early) == early.strftime(ISO_Z)


def test_a_naive_instant_is_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        iso_z(datetime(2026, 12, 1))
