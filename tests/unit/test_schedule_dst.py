"""Schedule math across daylight-saving transitions (Vixie cron's rule: docs/guide/jobs-and-schedules.md,
"Daylight saving time")."""

from datetime import UTC, datetime

import pytest

from duetime.domain.schedule import cron_next_after, is_dst_shifted


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def fires(expr: str, zone: str, after: str, count: int) -> list[str]:
    out, at = [], utc(after)
    for _ in range(count):
        at = cron_next_after(expr, zone, at)
        out.append(at.strftime("%Y-%m-%dT%H:%MZ"))
    return out


# (zone, cron, start after, expected fire instants in UTC, what the row shows)
DST_TABLE = [
    # America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT; 2026-11-01 02:00 EDT -> 01:00 EST
    (
        "America/New_York",
        "30 2 * * *",
        "2026-03-07T12:00Z",
        ["2026-03-08T07:00Z", "2026-03-09T06:30Z"],
        "skipped 02:30 runs once at 03:00 EDT",
    ),
    (
        "America/New_York",
        "30 1 * * *",
        "2026-10-31T12:00Z",
        ["2026-11-01T05:30Z", "2026-11-02T06:30Z"],
        "repeated 01:30 runs once, first occurrence (EDT)",
    ),
    (
        "America/New_York",
        "0 * * * *",
        "2026-03-08T05:30Z",
        ["2026-03-08T06:00Z", "2026-03-08T07:00Z", "2026-03-08T08:00Z"],
        "hourly: every real hour (spring)",
    ),
    (
        "America/New_York",
        "0 * * * *",
        "2026-11-01T04:30Z",
        ["2026-11-01T05:00Z", "2026-11-01T06:00Z", "2026-11-01T07:00Z"],
        "hourly: both 01:00s (fall)",
    ),
    (
        "America/New_York",
        "*/30 * * * *",
        "2026-03-08T06:10Z",
        ["2026-03-08T06:30Z", "2026-03-08T07:00Z", "2026-03-08T07:30Z"],
        "every 30 min follows real time",
    ),
    (
        "America/New_York",
        "0 2 * * *",
        "2026-11-01T00:00Z",
        ["2026-11-01T07:00Z", "2026-11-02T07:00Z"],
        "02:00 on fall-back day exists once (EST)",
    ),
    # Europe/London: 2026-03-29 01:00 GMT -> 02:00 BST; 2026-10-25 02:00 BST -> 01:00 GMT
    (
        "Europe/London",
        "30 1 * * *",
        "2026-03-28T12:00Z",
        ["2026-03-29T01:00Z", "2026-03-30T00:30Z"],
        "skipped 01:30 runs at 02:00 BST",
    ),
    (
        "Europe/London",
        "30 1 * * *",
        "2026-10-24T12:00Z",
        ["2026-10-25T00:30Z", "2026-10-26T01:30Z"],
        "repeated 01:30 runs once (BST)",
    ),
    (
        "Europe/London",
        "0 * * * *",
        "2026-10-24T23:30Z",
        ["2026-10-25T00:00Z", "2026-10-25T01:00Z", "2026-10-25T02:00Z"],
        "hourly: both 01:00s",
    ),
    (
        "Europe/London",
        "0 * * * *",
        "2026-03-29T00:30Z",
        ["2026-03-29T01:00Z", "2026-03-29T02:00Z"],
        "hourly: 02:00 BST follows 00:00 GMT by one hour",
    ),
    # Australia/Lord_Howe: a 30-minute shift. 2026-04-05 02:00 (+11) -> 01:30 (+10:30);
    # 2026-10-04 02:00 (+10:30) -> 02:30 (+11)
    (
        "Australia/Lord_Howe",
        "15 2 * * *",
        "2026-10-03T00:00Z",
        ["2026-10-03T15:30Z", "2026-10-04T15:15Z"],
        "skipped 02:15 runs at 02:30 (+11)",
    ),
    (
        "Australia/Lord_Howe",
        "45 1 * * *",
        "2026-04-04T00:00Z",
        ["2026-04-04T14:45Z", "2026-04-05T15:15Z"],
        "repeated 01:45 runs once, first occurrence (+11)",
    ),
    (
        "Australia/Lord_Howe",
        "*/30 * * * *",
        "2026-10-03T14:50Z",
        ["2026-10-03T15:00Z", "2026-10-03T15:30Z", "2026-10-03T16:00Z"],
        "every 30 min: real time (spring)",
    ),
    (
        "Australia/Lord_Howe",
        "*/30 * * * *",
        "2026-04-04T14:20Z",
        ["2026-04-04T14:30Z", "2026-04-04T15:00Z", "2026-04-04T15:30Z"],
        "every 30 min: both 01:30s (fall)",
    ),
    (
        "Australia/Lord_Howe",
        "0 * * * *",
        "2026-10-03T14:00Z",
        ["2026-10-03T14:30Z", "2026-10-03T16:00Z"],
        "hourly at :00 local: 02:00 does not exist that night",
    ),
]


@pytest.mark.parametrize(
    ("zone", "expr", "after", "expected", "why"), DST_TABLE, ids=[r[4] for r in DST_TABLE]
)
def test_dst_table(zone: str, expr: str, after: str, expected: list[str], why: str) -> None:
    assert fires(expr, zone, after, len(expected)) == expected


def test_daily_new_york_job_runs_at_0300_edt_on_spring_forward() -> None:
    assert cron_next_after("30 2 * * *", "America/New_York", utc("2026-03-08T00:00Z")) == utc(
        "2026-03-08T07:00Z"
    )


def test_shifted_time_is_marked_as_moved_by_dst() -> None:
    assert is_dst_shifted("30 2 * * *", "America/New_York", utc("2026-03-08T07:00Z"))
    assert not is_dst_shifted("30 2 * * *", "America/New_York", utc("2026-03-09T06:30Z"))


def test_fixed_time_jobs_never_run_twice_in_the_repeated_hour() -> None:
    runs = fires("*/20 1 * * *", "America/New_York", "2026-11-01T04:00Z", 4)
    assert runs == ["2026-11-01T05:00Z", "2026-11-01T05:20Z", "2026-11-01T05:40Z", "2026-11-02T06:00Z"]


def test_aliases_are_five_field_crons() -> None:
    assert fires("0 * * * *", "UTC", "2026-01-01T00:30Z", 1) == ["2026-01-01T01:00Z"]
