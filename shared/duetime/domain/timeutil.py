"""UTC instants as duetime stores them: whole seconds, ISO-8601 ending in ``Z``.

ISO strings of this one shape sort in time order, which the DynamoDB keys rely on.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta

ISO_Z = "%Y-%m-%dT%H:%M:%SZ"
MINUTE_BUCKET = "%Y-%m-%dT%H:%M"


def to_utc(value: datetime) -> datetime:
    """Return ``value`` as an aware UTC datetime; naive datetimes are refused."""
    if value.tzinfo is None:
        raise ValueError("naive datetime: an instant needs a time zone")
    return value.astimezone(UTC)


def whole_seconds(value: datetime) -> datetime:
    """Drop sub-second precision (run ids and due times are whole seconds)."""
    return to_utc(value).replace(microsecond=0)


def ceil_seconds(value: datetime) -> datetime:
    """Round up to the next whole second (unchanged when already whole)."""
    value = to_utc(value)
    return value if value.microsecond == 0 else value.replace(microsecond=0) + timedelta(seconds=1)


def iso_z(value: datetime) -> str:
    """Format an instant as ``2026-12-01T00:00:00Z`` (second precision, UTC). The same text as
    ``strftime(ISO_Z)``, built by %-formatting the fields (2.7x faster; a run's path formats ~27 instants);
    years before 1000, which ``strftime`` leaves unpadded, still go through it."""
    if value.tzinfo is not UTC:
        value = to_utc(value)
    return _utc_iso_z(value)


# A claim formats the same few instants for each of its runs (now, its queue deadline, the due times shared
# by the jobs of a second), so the text of recent ones is kept. The key is the instant in UTC: an aware
# datetime in another zone compares equal to its twin across a fall-back (``fold``), a UTC one never does.
@functools.lru_cache(maxsize=4096)
def _utc_iso_z(value: datetime) -> str:
    if value.year < 1000:
        return value.strftime(ISO_Z)
    # %-formatting, not an f-string: format specs in an f-string took 1.8 us here, %-formatting 0.95 us.
    return "%04d-%02d-%02dT%02d:%02d:%02dZ" % (  # noqa: UP031
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
    )


def parse_iso_z(text: str) -> datetime:
    """Parse the ``iso_z`` form back into an aware UTC datetime. The exact form (every stored instant) goes
    through ``fromisoformat`` (C, ~40x faster than ``strptime``, which a worker's batch calls hundreds of
    times); anything else is left to ``strptime``, so what is accepted, and how, is unchanged."""
    if (
        len(text) == 20
        and text.isascii()
        and text[4] == text[7] == "-"
        and text[10] == "T"
        and text[13] == text[16] == ":"
        and text[19] == "Z"
    ):
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            pass
    return datetime.strptime(text, ISO_Z).replace(tzinfo=UTC)


def minute_bucket(value: datetime) -> str:
    """The due-index minute bucket an instant falls in, e.g. ``2026-12-01T00:00``: the same text as
    ``strftime(MINUTE_BUCKET)``, cut from ``iso_z`` (faster: a claim files every job it moves in a
    bucket), except for years before 1000, which ``strftime`` leaves unpadded."""
    value = to_utc(value)
    if value.year < 1000:
        return value.strftime(MINUTE_BUCKET)
    return iso_z(value)[:16]


def parse_minute_bucket(text: str) -> datetime:
    return datetime.strptime(text, MINUTE_BUCKET).replace(tzinfo=UTC)
