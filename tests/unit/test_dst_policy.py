"""A job's DST policy (``dst``: gap shift|skip, overlap first|last|both) in the schedule math: each policy at
New York's, Lord Howe's (a 30-minute shift) and Berlin's transitions, for fixed-time and hourly crons; the
properties every policy keeps; a job without one runs exactly as before policies (``vixie_reference``); and
what previews mark (docs/guide/jobs-and-schedules.md, "Daylight saving time")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.api.previews import preview_of
from duetime.domain.dst import (
    DstEffect,
    DstGap,
    DstOverlap,
    DstPolicy,
    instants_of_wall_time,
    wall_time_rules,
)
from duetime.domain.models import JobSpec
from duetime.domain.schedule import cron_next_after

from .vixie_reference import vixie_cron_next_after

NY, BERLIN, LORD_HOWE = "America/New_York", "Europe/Berlin", "Australia/Lord_Howe"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def policy(text: str | None) -> DstPolicy | None:
    """``"gap=skip"``, ``"overlap=both"``, ``"gap=shift,overlap=last"``; None: no policy."""
    if text is None:
        return None
    return DstPolicy.model_validate(dict(side.split("=") for side in text.split(",")))


def fires(expr: str, zone: str, dst: DstPolicy | None, after: str, count: int) -> list[str]:
    out, at = [], utc(after)
    for _ in range(count):
        at = cron_next_after(expr, zone, at, dst)
        out.append(at.strftime("%Y-%m-%dT%H:%MZ"))
    return out


# (zone, cron, policy, start after, the fire instants: 2026, UTC, what the row shows)
POLICY_TABLE = [
    # America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT (07:00Z); 2026-11-01 02:00 EDT -> 01:00 EST (06:00Z)
    (
        NY,
        "30 2 * * *",
        "gap=shift",
        "03-07T12:00",
        "03-08T07:00 03-09T06:30",
        "NY fixed shift: 02:30 runs at 03:00 EDT",
    ),
    (NY, "30 2 * * *", "gap=skip", "03-07T12:00", "03-09T06:30", "NY fixed skip: no run on 8 March"),
    (
        NY,
        "30 1 * * *",
        "overlap=first",
        "10-31T12:00",
        "11-01T05:30 11-02T06:30",
        "NY fixed first: 01:30 EDT",
    ),
    (NY, "30 1 * * *", "overlap=last", "10-31T12:00", "11-01T06:30 11-02T06:30", "NY fixed last: 01:30 EST"),
    (
        NY,
        "30 1 * * *",
        "overlap=both",
        "10-31T12:00",
        "11-01T05:30 11-01T06:30 11-02T06:30",
        "NY fixed both: 01:30 EDT and EST",
    ),
    (NY, "30 * * * *", "gap=skip", "03-08T06:00", "03-08T06:30 03-08T07:30", "NY hourly skip: no 02:30"),
    (
        NY,
        "30 * * * *",
        "gap=shift",
        "03-08T06:00",
        "03-08T06:30 03-08T07:00 03-08T07:30",
        "NY hourly shift: 02:30 at 03:00 EDT",
    ),
    (
        NY,
        "*/15 * * * *",
        "gap=shift",
        "03-08T06:50",
        "03-08T07:00 03-08T07:15",
        "NY 15-minutely shift: the gap's four times are one run",
    ),
    (
        NY,
        "30 * * * *",
        "overlap=both",
        "11-01T04:00",
        "11-01T04:30 11-01T05:30 11-01T06:30 11-01T07:30",
        "NY hourly both",
    ),
    (
        NY,
        "30 * * * *",
        "overlap=first",
        "11-01T04:00",
        "11-01T04:30 11-01T05:30 11-01T07:30",
        "NY hourly first: the repeated hour once",
    ),
    (
        NY,
        "30 * * * *",
        "overlap=last",
        "11-01T04:00",
        "11-01T04:30 11-01T06:30 11-01T07:30",
        "NY hourly last: the repeated hour's second pass",
    ),
    # Australia/Lord_Howe, 30 minutes: 2026-10-04 02:00 (+10:30) -> 02:30 (+11) (15:30Z on the 3rd);
    # 2026-04-05 02:00 (+11) -> 01:30 (+10:30) (15:00Z on the 4th)
    (
        LORD_HOWE,
        "15 2 * * *",
        "gap=shift",
        "10-03T00:00",
        "10-03T15:30 10-04T15:15",
        "Lord Howe fixed shift: 02:15 at 02:30",
    ),
    (LORD_HOWE, "15 2 * * *", "gap=skip", "10-03T00:00", "10-04T15:15", "Lord Howe fixed skip"),
    (
        LORD_HOWE,
        "45 1 * * *",
        "overlap=first",
        "04-04T00:00",
        "04-04T14:45 04-05T15:15",
        "Lord Howe fixed first: 01:45 (+11)",
    ),
    (
        LORD_HOWE,
        "45 1 * * *",
        "overlap=last",
        "04-04T00:00",
        "04-04T15:15 04-05T15:15",
        "Lord Howe fixed last: 01:45 (+10:30)",
    ),
    (
        LORD_HOWE,
        "45 1 * * *",
        "overlap=both",
        "04-04T00:00",
        "04-04T14:45 04-04T15:15 04-05T15:15",
        "Lord Howe fixed both",
    ),
    (
        LORD_HOWE,
        "0 * * * *",
        "gap=skip",
        "10-03T14:00",
        "10-03T14:30 10-03T16:00",
        "Lord Howe hourly skip: no 02:00",
    ),
    (
        LORD_HOWE,
        "0 * * * *",
        "gap=shift",
        "10-03T14:00",
        "10-03T14:30 10-03T15:30 10-03T16:00",
        "Lord Howe hourly shift: 02:00 at 02:30",
    ),
    (
        LORD_HOWE,
        "*/30 * * * *",
        "overlap=both",
        "04-04T14:20",
        "04-04T14:30 04-04T15:00 04-04T15:30",
        "Lord Howe half-hourly both: 01:30 twice",
    ),
    (
        LORD_HOWE,
        "*/30 * * * *",
        "overlap=first",
        "04-04T14:20",
        "04-04T14:30 04-04T15:30",
        "Lord Howe half-hourly first",
    ),
    (
        LORD_HOWE,
        "*/30 * * * *",
        "overlap=last",
        "04-04T14:20",
        "04-04T15:00 04-04T15:30",
        "Lord Howe half-hourly last",
    ),
    # Europe/Berlin: 2026-03-29 02:00 CET -> 03:00 CEST (01:00Z); 2026-10-25 03:00 CEST -> 02:00 CET (01:00Z)
    (
        BERLIN,
        "30 2 * * *",
        "gap=shift",
        "03-28T12:00",
        "03-29T01:00 03-30T00:30",
        "Berlin fixed shift: 02:30 at 03:00 CEST",
    ),
    (BERLIN, "30 2 * * *", "gap=skip", "03-28T12:00", "03-30T00:30", "Berlin fixed skip"),
    (
        BERLIN,
        "30 2 * * *",
        "overlap=first",
        "10-24T12:00",
        "10-25T00:30 10-26T01:30",
        "Berlin fixed first: 02:30 CEST",
    ),
    (
        BERLIN,
        "30 2 * * *",
        "overlap=last",
        "10-24T12:00",
        "10-25T01:30 10-26T01:30",
        "Berlin fixed last: 02:30 CET",
    ),
    (
        BERLIN,
        "30 2 * * *",
        "overlap=both",
        "10-24T12:00",
        "10-25T00:30 10-25T01:30 10-26T01:30",
        "Berlin fixed both",
    ),
    (BERLIN, "30 * * * *", "gap=skip", "03-29T00:00", "03-29T00:30 03-29T01:30", "Berlin hourly skip"),
    (
        BERLIN,
        "30 * * * *",
        "gap=shift",
        "03-29T00:00",
        "03-29T00:30 03-29T01:00 03-29T01:30",
        "Berlin hourly shift",
    ),
    (BERLIN, "30 * * * *", "overlap=first", "10-24T23:50", "10-25T00:30 10-25T02:30", "Berlin hourly first"),
    (BERLIN, "30 * * * *", "overlap=last", "10-24T23:50", "10-25T01:30 10-25T02:30", "Berlin hourly last"),
    (
        BERLIN,
        "30 * * * *",
        "overlap=both",
        "10-24T23:50",
        "10-25T00:30 10-25T01:30 10-25T02:30",
        "Berlin hourly both",
    ),
]


@pytest.mark.parametrize(
    ("zone", "expr", "dst", "after", "expected", "why"), POLICY_TABLE, ids=[row[5] for row in POLICY_TABLE]
)
def test_each_policy_at_each_transition(
    zone: str, expr: str, dst: str, after: str, expected: str, why: str
) -> None:
    runs = fires(expr, zone, policy(dst), f"2026-{after}Z", len(expected.split()))
    assert runs == [f"2026-{time}Z" for time in expected.split()]


def test_a_side_left_out_follows_vixie_cron_by_the_hour_field() -> None:
    assert wall_time_rules(DstPolicy(gap=DstGap.SKIP), fixed_time=True).overlap is DstOverlap.FIRST
    assert wall_time_rules(DstPolicy(gap=DstGap.SHIFT), fixed_time=False).overlap is DstOverlap.BOTH
    assert wall_time_rules(DstPolicy(overlap=DstOverlap.LAST), fixed_time=True).gap is DstGap.SHIFT
    assert wall_time_rules(DstPolicy(overlap=DstOverlap.LAST), fixed_time=False).gap is DstGap.SKIP
    assert wall_time_rules(None, fixed_time=True) == wall_time_rules(DstPolicy(), fixed_time=True)


def test_a_policy_is_part_of_the_cached_key() -> None:
    after = utc("2026-03-07T12:00Z")
    shifted = cron_next_after("30 2 * * *", NY, after, policy("gap=shift"))
    assert cron_next_after("30 2 * * *", NY, after, policy("gap=skip")) != shifted
    assert cron_next_after("30 2 * * *", NY, after, policy("gap=shift")) == shifted
    assert hash(policy("gap=skip")) == hash(policy("gap=skip"))


def test_the_wall_time_function_serves_any_schedule_with_local_times() -> None:
    zone = ZoneInfo(NY)
    skipped, repeated = datetime(2026, 3, 8, 2, 30), datetime(2026, 11, 1, 1, 30)
    assert instants_of_wall_time(skipped, zone, wall_time_rules(None, True)) == [utc("2026-03-08T07:00Z")]
    assert instants_of_wall_time(skipped, zone, wall_time_rules(policy("gap=skip"), True)) == []
    both = wall_time_rules(policy("overlap=both"), True)
    assert instants_of_wall_time(repeated, zone, both) == [utc("2026-11-01T05:30Z"), utc("2026-11-01T06:30Z")]
    assert instants_of_wall_time(datetime(2026, 7, 1, 9, 0), zone, both) == [utc("2026-07-01T13:00Z")]


# --- properties ---------------------------------------------------------------------------------------------

ZONES = [NY, BERLIN, LORD_HOWE, "Europe/London", "America/Santiago", "Australia/Sydney", "Asia/Tokyo", "UTC"]
# 2026's transitions of those zones, to start near
TRANSITIONS = [
    utc(t)
    for t in (
        "2026-03-08T07:00Z", "2026-11-01T06:00Z", "2026-03-29T01:00Z", "2026-10-25T01:00Z",
        "2026-04-04T15:00Z", "2026-10-03T15:30Z", "2026-04-05T03:00Z", "2026-09-06T04:00Z",
        "2026-04-04T16:00Z", "2026-10-03T16:00Z",
    )
]  # fmt: skip
HOURS = st.integers(0, 23).map(str)
MINUTES = st.integers(0, 59).map(str)
FIXED_CRONS = st.builds(
    lambda m, h, d: f"{m} {h} * * {d}", MINUTES, HOURS | st.just("1-3"), st.just("*") | st.just("0")
)
HOURLY_CRONS = st.builds(
    lambda m: f"{m} * * * *", MINUTES | st.sampled_from(["*/15", "*/20", "*/30", "10-40/10"])
)
CRONS = FIXED_CRONS | HOURLY_CRONS
POLICIES = st.none() | st.builds(
    DstPolicy, gap=st.none() | st.sampled_from(DstGap), overlap=st.none() | st.sampled_from(DstOverlap)
)
STARTS = st.builds(
    lambda t, minutes: t + timedelta(minutes=minutes), st.sampled_from(TRANSITIONS), st.integers(-1500, 300)
)


def walk(expr: str, zone: str, dst: DstPolicy | None, start: datetime, count: int = 8) -> list[datetime]:
    out, at = [], start
    for _ in range(count):
        at = cron_next_after(expr, zone, at, dst)
        out.append(at)
    return out


def wall(instant: datetime, zone: str) -> datetime:
    return instant.astimezone(ZoneInfo(zone)).replace(tzinfo=None)


def other_occurrence(instant: datetime, zone: str) -> datetime | None:
    """The other instant with the same wall time, if a fall-back repeats it."""
    naive, tz = wall(instant, zone), ZoneInfo(zone)
    both = {naive.replace(tzinfo=tz, fold=fold).astimezone(UTC) for fold in (0, 1)}
    others = both - {instant}
    return others.pop() if len(both) == 2 and others else None


@settings(max_examples=150, deadline=None)
@given(expr=CRONS, zone=st.sampled_from(ZONES), dst=POLICIES, start=STARTS)
def test_instants_strictly_increase_under_every_policy(
    expr: str, zone: str, dst: DstPolicy | None, start: datetime
) -> None:
    instants = walk(expr, zone, dst, start)
    assert all(a < b for a, b in zip([start, *instants], instants, strict=False))


@settings(max_examples=150, deadline=None)
@given(expr=CRONS, zone=st.sampled_from(ZONES), overlap=st.none() | st.sampled_from(DstOverlap), start=STARTS)
def test_skip_never_runs_at_a_time_whose_wall_clock_was_skipped(
    expr: str, zone: str, overlap: DstOverlap | None, start: datetime
) -> None:
    for instant in walk(expr, zone, DstPolicy(gap=DstGap.SKIP, overlap=overlap), start):
        assert croniter.match(expr, wall(instant, zone)), (
            instant
        )  # a wall time the cron names, not a shifted one


@settings(max_examples=150, deadline=None)
@given(expr=CRONS, zone=st.sampled_from(ZONES), gap=st.none() | st.sampled_from(DstGap), start=STARTS)
def test_both_runs_a_repeated_wall_time_at_both_occurrences(
    expr: str, zone: str, gap: DstGap | None, start: datetime
) -> None:
    instants = walk(expr, zone, DstPolicy(gap=gap, overlap=DstOverlap.BOTH), start, 12)
    for instant in instants:
        other = other_occurrence(instant, zone)
        if other is not None and start < other <= instants[-1]:
            assert other in instants, (instant, other)


@settings(max_examples=150, deadline=None)
@given(expr=CRONS, zone=st.sampled_from(ZONES), start=STARTS)
def test_first_and_last_run_a_repeated_wall_time_once_at_their_occurrence(
    expr: str, zone: str, start: datetime
) -> None:
    for overlap, earlier_kept in ((DstOverlap.FIRST, True), (DstOverlap.LAST, False)):
        for instant in walk(expr, zone, DstPolicy(overlap=overlap), start):
            other = other_occurrence(instant, zone)
            if other is not None and croniter.match(expr, wall(instant, zone)):
                assert (instant < other) is earlier_kept, (overlap, instant)


@settings(max_examples=300, deadline=None)
@given(
    expr=CRONS | st.sampled_from(["0 9 1,15 * 1", "30 2 */7 * 0", "0 */6 * * *", "@daily", "*/45 2 * 3 *"]),
    zone=st.sampled_from(ZONES),
    start=STARTS | st.datetimes(datetime(2025, 1, 1), datetime(2028, 12, 31), timezones=st.just(UTC)),
)
def test_a_job_without_a_policy_runs_exactly_as_before_policies(
    expr: str, zone: str, start: datetime
) -> None:
    expr = {"@daily": "0 0 * * *"}.get(expr, expr)
    expected, at = [], start
    for _ in range(6):
        at = vixie_cron_next_after(expr, zone, at)
        expected.append(at)
    assert walk(expr, zone, None, start, 6) == expected
    assert walk(expr, zone, DstPolicy(), start, 6) == expected  # a policy with both sides left out


# --- previews -----------------------------------------------------------------------------------------------


def preview(expr: str, zone: str, dst: dict[str, Any] | None, after: str, count: int) -> Any:
    spec = JobSpec.model_validate(
        {
            "name": "p",
            "schedule": {"cron": expr, "timezone": zone},
            "dst": dst,
            "target": {"url": "https://e.com"},
        }
    )
    return preview_of(spec, None, utc(after), utc(after), count)


def marks(shown: Any) -> list[tuple[str, str | None]]:
    return [(r.nominal_at.strftime("%m-%dT%H:%MZ"), r.dst_effect and r.dst_effect.value) for r in shown.runs]


def test_preview_marks_a_run_moved_out_of_the_gap_and_keeps_dst_shifted_for_it() -> None:
    shown = preview("30 2 * * *", NY, None, "2026-03-07T12:00Z", 2)
    assert marks(shown) == [("03-08T07:00Z", "moved"), ("03-09T06:30Z", None)]
    assert [r.dst_shifted for r in shown.runs] == [True, False] and shown.skipped == []


def test_preview_lists_a_wall_time_skipped_under_skip_apart_from_the_runs() -> None:
    shown = preview("30 2 * * *", NY, {"gap": "skip"}, "2026-03-07T12:00Z", 2)
    assert marks(shown) == [("03-09T06:30Z", None), ("03-10T06:30Z", None)]
    assert shown.skipped == [datetime(2026, 3, 8, 2, 30)]


def test_preview_of_an_hourly_cron_lists_the_hour_the_gap_took() -> None:
    shown = preview("*/30 * * * *", NY, None, "2026-03-08T06:10Z", 3)
    assert marks(shown) == [("03-08T06:30Z", None), ("03-08T07:00Z", None), ("03-08T07:30Z", None)]
    assert shown.skipped == [datetime(2026, 3, 8, 2, 0), datetime(2026, 3, 8, 2, 30)]


def test_preview_marks_each_run_of_a_doubled_wall_time_and_the_one_run_of_first_or_last() -> None:
    assert marks(preview("30 1 * * *", NY, {"overlap": "both"}, "2026-10-31T12:00Z", 3)) == [
        ("11-01T05:30Z", "doubled"),
        ("11-01T06:30Z", "doubled"),
        ("11-02T06:30Z", None),
    ]
    assert marks(preview("30 1 * * *", NY, None, "2026-10-31T12:00Z", 1)) == [("11-01T05:30Z", "first_only")]
    assert marks(preview("30 1 * * *", NY, {"overlap": "last"}, "2026-10-31T12:00Z", 1)) == [
        ("11-01T06:30Z", "last_only")
    ]


def test_preview_marks_an_hourly_run_that_also_stands_for_the_gaps_times_as_moved() -> None:
    shown = preview("*/15 * * * *", NY, {"gap": "shift"}, "2026-03-08T06:50Z", 2)
    assert marks(shown) == [("03-08T07:00Z", "moved"), ("03-08T07:15Z", None)] and shown.skipped == []


def test_preview_lists_no_skipped_time_beyond_its_last_run() -> None:
    shown = preview("30 * * * *", NY, None, "2026-03-08T05:00Z", 2)
    assert marks(shown) == [("03-08T05:30Z", None), ("03-08T06:30Z", None)] and shown.skipped == []


# --- a business-day schedule's wall time -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dst", "expected", "effect"),
    [
        (None, "2026-03-27T00:00:00Z", DstEffect.MOVED),  # 02:30 does not exist: 03:00 IDT
        ({"gap": "skip"}, "2026-04-27T23:30:00Z", None),  # no run in March; April's 20th business day
    ],
)
def test_a_business_day_time_in_a_spring_forward_gap_follows_the_dst_policy(
    dst: Any, expected: str, effect: DstEffect | None
) -> None:
    """Israel springs forward on a Friday (27 March 2026, 02:00 -> 03:00): the 20th business day of March."""
    spec = JobSpec.model_validate(
        {
            "name": "x",
            "schedule": {"business_day": 20, "at": "02:30", "timezone": "Asia/Jerusalem"},
            "dst": dst,
            "target": {"url": "https://example.com/x"},
        }
    )
    preview = preview_of(spec, None, utc("2026-01-01T00:00:00Z"), utc("2026-03-01T00:00:00Z"), 1)
    assert [(run.nominal_at, run.dst_effect) for run in preview.runs] == [(utc(expected), effect)]
