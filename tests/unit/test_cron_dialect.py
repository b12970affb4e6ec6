"""The cron dialect (``duetime.domain.cron_dialect``): Quartz's day tokens in the 5-field form, EventBridge's
``cron(...)``, the 422s for what they cannot say, and a differential test against cronsim.

cronsim (2.9) reads ``L``, ``LW``, ``nL`` and ``n#k`` but not ``nW`` or ``?``, and knows no year field. The
test translates on its own: ``?`` becomes ``*``; ``nW`` is a small brute-force rule here (the weekday of the
month nearest day n: no date arithmetic shared with duetime); an EventBridge expression becomes 5 fields
(day-of-week 1-7 -> 0-6, ``L`` alone -> Saturday) and its years filter cronsim's times. Times are compared
on the local wall clock, leaving out the days of DST transitions (the DST rules are today's, tested in
test_schedule_dst.py and test_cron_day_rule.py).
"""

from __future__ import annotations

import calendar
import contextlib
import functools
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from croniter import CroniterBadDateError
from cronsim import CronSim
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from duetime.adapters.memory import InMemoryCatalog, MemoryQueue, MemoryStore
from duetime.api.service import JobService
from duetime.cli import main
from duetime.domain.clock import ManualClock
from duetime.domain.cron_dialect import cron_never_fires, day_rule_patterns
from duetime.domain.errors import InvalidInput
from duetime.domain.models import CronSchedule
from duetime.domain.schedule import cron_next_after, is_dst_shifted

from ..twin_support import T0

ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe")
FIRES = 12


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def days(expr: str, count: int, after: str = "2026-01-01T00:00Z", zone: str = "UTC") -> list[str]:
    at, out = utc(after), []
    for _ in range(count):
        at = cron_next_after(CronSchedule(cron=expr).cron, zone, at)
        out.append(at.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %a"))
    return out


# --- the tokens, by example --------------------------------------------------------------------------------


def test_a_cron_with_LW_fires_on_the_last_weekday_of_each_month() -> None:
    # January 2026 ends on a Saturday, May on a Sunday, March on a Tuesday.
    assert days("0 9 LW * *", 5) == [
        "2026-01-30 Fri",
        "2026-02-27 Fri",
        "2026-03-31 Tue",
        "2026-04-30 Thu",
        "2026-05-29 Fri",
    ]


def test_nW_is_the_nearest_weekday_and_never_leaves_the_month() -> None:
    assert days("0 9 1W * *", 1, after="2026-08-01T00:00Z") == ["2026-08-03 Mon"]  # the 1st is a Saturday
    assert days("0 9 15W * *", 2, after="2026-02-01T00:00Z") == ["2026-02-16 Mon", "2026-03-16 Mon"]
    assert days("0 9 31W * *", 1, after="2026-05-01T00:00Z") == ["2026-05-29 Fri"]  # the 31st is a Sunday
    assert days("0 9 30W * *", 1, after="2026-05-01T00:00Z") == ["2026-05-29 Fri"]  # the 30th is a Saturday


def test_a_month_without_day_n_has_no_nW_day_as_in_Quartz() -> None:
    assert days("0 9 31W * *", 4) == ["2026-01-30 Fri", "2026-03-31 Tue", "2026-05-29 Fri", "2026-07-31 Fri"]
    assert days("0 9 29W 2 *", 2) == ["2028-02-29 Tue", "2032-02-27 Fri"]  # leap years only


def test_nL_is_the_last_weekday_n_and_n_hash_k_the_kth() -> None:
    assert days("0 9 * * 5L", 2) == ["2026-01-30 Fri", "2026-02-27 Fri"]
    assert days("0 9 * * 5L", 2) == days("0 9 * * L5", 2)  # croniter's spelling reads the same
    assert days("0 9 * * 1#2", 2) == ["2026-01-12 Mon", "2026-02-09 Mon"]
    assert days("0 9 * * mon#2", 2) == days("0 9 * * 1#2", 2)
    assert days("0 9 * * 1#5", 2) == ["2026-03-30 Mon", "2026-06-29 Mon"]  # months with five Mondays only
    assert days("0 9 * * 0#1", 1) == days("0 9 * * 7#1", 1) == ["2026-01-04 Sun"]


def test_lists_mix_plain_days_with_L_and_hash_days() -> None:
    # croniter refuses "1#1,5L,3" as one field; the pattern is split and the union is the same schedule.
    assert days("0 9 * * 1#1,5L,3", 6) == [
        "2026-01-05 Mon",
        "2026-01-07 Wed",
        "2026-01-14 Wed",
        "2026-01-21 Wed",
        "2026-01-28 Wed",
        "2026-01-30 Fri",
    ]
    assert len(day_rule_patterns("0 9 * * 1#1,5L,3")) == 2


def test_question_mark_and_names_in_any_case_read_as_cron_reads_them() -> None:
    assert days("0 9 ? * mon-FRI", 3) == days("0 9 * * 1-5", 3)
    assert days("0 9 ? Jan-mar ?", 3) == days("0 9 * 1-3 *", 3)
    assert days("0 9 lw * *", 2) == days("0 9 LW * *", 2)


@pytest.mark.parametrize(
    ("expr", "first_days"),
    [
        # both restricted: either. The last weekday (Friday 30 January) or any Monday.
        (
            "0 9 LW * 1",
            ["2026-01-05 Mon", "2026-01-12 Mon", "2026-01-19 Mon", "2026-01-26 Mon", "2026-01-30 Fri"],
        ),
        # the weekday nearest the 15th or the last Friday
        ("0 9 15W * 5L", ["2026-01-15 Thu", "2026-01-30 Fri", "2026-02-16 Mon", "2026-02-27 Fri"]),
        # day-of-week starts with '*': both. Last weekdays that are Sunday, Tuesday, Thursday or Saturday.
        ("0 9 LW * */2", ["2026-03-31 Tue", "2026-04-30 Thu", "2026-06-30 Tue"]),
        # '?' leaves the day to the other field
        ("0 9 ? * 1#2", ["2026-01-12 Mon", "2026-02-09 Mon"]),
        ("0 9 LW * ?", ["2026-01-30 Fri", "2026-02-27 Fri"]),
    ],
)
def test_the_day_rule_holds_for_the_new_tokens(expr: str, first_days: list[str]) -> None:
    assert days(expr, len(first_days)) == first_days


# --- EventBridge's form ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("eventbridge", "five_fields"),
    [
        ("cron(0 9 ? * MON-FRI *)", "0 9 * * 1-5"),
        ("cron(0 9 ? * 2-6 *)", "0 9 * * 1-5"),  # 1-7 = SUN-SAT
        ("cron(15 10 ? * 6L *)", "15 10 * * 5L"),  # 6L: the last Friday
        ("cron(0 9 ? * 2#1 *)", "0 9 * * 1#1"),
        ("cron(0 9 ? * L *)", "0 9 * * 6"),  # L alone: Saturday, the last day of the week
        ("cron(0/15 8-17 LW * ? *)", "0/15 8-17 LW * *"),
        ("cron(0 9 3W * ? *)", "0 9 3W * *"),
        ("cron(0 12 1 JAN-MAR ? *)", "0 12 1 1-3 *"),
    ],
)
def test_an_eventbridge_expression_fires_as_its_5_field_reading(eventbridge: str, five_fields: str) -> None:
    assert days(eventbridge, 8, zone="Europe/Berlin") == days(five_fields, 8, zone="Europe/Berlin")


def test_an_eventbridge_expression_is_kept_as_written_with_whitespace_normalised() -> None:
    assert CronSchedule(cron="  cron( 0\t9 ? *  MON-FRI * ) ").cron == "cron(0 9 ? * MON-FRI *)"
    assert CronSchedule(cron="0 9 lw * 5l").cron == "0 9 lw * 5l"


def test_the_year_field_bounds_an_eventbridge_schedule() -> None:
    assert days("cron(0 9 1 JAN ? 2027,2029-2030)", 3) == [
        "2027-01-01 Fri",
        "2029-01-01 Mon",
        "2030-01-01 Tue",
    ]
    with pytest.raises(CroniterBadDateError):
        days("cron(0 9 1 JAN ? 2027,2029-2030)", 4)
    assert days("cron(0 9 1 JAN ? 2150)", 1) == ["2150-01-01 Thu"]  # further away than croniter's 30 years


# --- refusals ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cron", "says"),
    [
        ("0 9 32W * *", "day-of-month '32W'"),
        ("0 9 0W * *", "W needs a day 1-31"),
        ("0 9 W * *", "W stands alone"),
        ("0 9 1W,15 * *", "W stands alone"),
        ("0 9 L-3 * *", "L stands for the last day"),
        ("0 9 * * 8#1", "day-of-week '8#1': 8 is out of range"),
        ("0 9 * * 1#6", "# counts 1-5"),
        ("0 9 * * 1#0", "# counts 1-5"),
        ("0 9 * * 8L", "8 is out of range"),
        ("L 9 * * *", "minute 'L'"),
        ("0 5W * * *", "hour '5W'"),
        ("0 9 * L *", "month 'L'"),
        ("0 9 * ? *", "month '?'"),
        ("0 9 15#2 * *", "'#' is for day-of-week"),
        ("0 9 ?,1 * *", "'?' (any) stands alone"),
        ("cron(0 9 ? * 2#6 *)", "day-of-week '2#6': # counts 1-5"),
        ("0 9 * * LW", "day-of-week 'LW'"),
        ("0 9 * * L", "day-of-week 'L'"),
        ("cron(0 9 ? * ? *)", "both are '?'"),
        ("cron(0 9 * * MON *)", "neither is '?'"),
        ("cron(0 9 ? * 0 *)", "EventBridge's 1-7"),
        ("cron(0 9 ? * 8#1 *)", "EventBridge's 1-7"),
        ("cron(0 9 ? * FRI-MON *)", "a range runs from its lower value"),
        ("cron(0 9 ? * MON 1969)", "year '1969': 1969 is out of range (1970-2199)"),
        ("cron(0 9 ? * MON 2200)", "out of range (1970-2199)"),
        ("cron(0 9 ? * MON 2030/0)", "a step is a whole number from 1"),
        ("cron(0 9 ? * MON 2020-2025)", "never fires again"),
        ("cron(0 9 ? * MON)", "EventBridge's 6 fields"),
        ("0 9 ? * MON-FRI *", "got 6; EventBridge's 6 are written inside cron(...)"),
        ("0 0 30 2 ?", "never fires"),
        ("0 0 LW 2 */7", "never fires"),  # the last weekday is never a Sunday
    ],
)
def test_bad_input_is_a_422_naming_schedule_cron_and_the_mistake(cron: str, says: str) -> None:
    service = JobService(
        InMemoryCatalog(store := MemoryStore()), store, MemoryQueue(clock := ManualClock(T0)), clock
    )
    team, _ = service.create_team("alpha")
    body = {"name": "n", "schedule": {"cron": cron}, "target": {"url": "https://example.com/hook"}}
    with pytest.raises(InvalidInput) as refused:
        service.create_job(team, body)
    assert refused.value.field == "schedule.cron"
    assert says in refused.value.message, refused.value.message


def test_the_api_keeps_what_was_sent_and_previews_its_times() -> None:
    service = JobService(
        InMemoryCatalog(store := MemoryStore()), store, MemoryQueue(clock := ManualClock(T0)), clock
    )
    team, _ = service.create_team("alpha")
    body: dict[str, Any] = {
        "name": "last friday",
        "schedule": {"cron": " cron(30 2 ? * 6L *)", "timezone": "America/New_York"},
        "target": {"url": "https://example.com/hook"},
    }
    job = service.create_job(team, body)
    assert service.get_job(team, job.id).schedule == CronSchedule(
        cron="cron(30 2 ? * 6L *)", timezone="America/New_York"
    )
    times = [run.nominal_at for run in service.preview(team, job.id, 3).runs]
    assert times == [utc("2026-12-25T07:30Z"), utc("2027-01-29T07:30Z"), utc("2027-02-26T07:30Z")]


def test_dst_marks_read_the_new_tokens() -> None:
    # 8 March 2026 is New York's spring-forward and the second Sunday: 02:30 does not exist that day.
    ny = "America/New_York"
    assert cron_next_after("30 2 * * 0#2", ny, utc("2026-03-01T00:00Z")) == utc("2026-03-08T07:00Z")
    assert is_dst_shifted("30 2 * * 0#2", ny, utc("2026-03-08T07:00Z"))
    assert not is_dst_shifted("cron(30 2 ? * 1#2 *)", ny, utc("2026-04-12T06:30Z"))


# --- differential test against cronsim ---------------------------------------------------------------------

MINUTES = st.sampled_from(["0", "30", "*/20", "5,45", "0-10/5", "*"])
HOURS = st.sampled_from(["9", "2", "1-3", "*/6", "0,12", "*", "23"])
MONTHS = st.sampled_from(["*", "*", "JAN-MAR", "feb", "2,4", "*/2", "Nov", "3-10"])
WEEKDAY_NAMES = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


@st.composite
def day_of_month(draw: st.DrawFn) -> str:
    return draw(
        st.one_of(
            st.sampled_from(["*", "?", "L", "LW", "lw", "1,15", "*/10", "13", "L,15", "28-31"]),
            st.integers(1, 31).map(lambda n: f"{n}W"),
        )
    )


@st.composite
def vixie_day_of_week(draw: st.DrawFn) -> str:
    day = st.integers(0, 7)
    term = st.one_of(
        day.map(str),
        day.map(lambda d: f"{d}L"),
        st.tuples(day, st.integers(1, 5)).map(lambda t: f"{t[0]}#{t[1]}"),
        st.tuples(st.sampled_from(WEEKDAY_NAMES), st.integers(1, 5)).map(lambda t: f"{t[0].lower()}#{t[1]}"),
        st.sampled_from(["MON-FRI", "mon", "1-3", "Sat,sun"]),
    )
    whole = st.sampled_from(["*", "?", "*/2", "*/3"])
    return draw(st.one_of(whole, st.lists(term, min_size=1, max_size=3).map(",".join)))


@st.composite
def eventbridge_day_fields(draw: st.DrawFn) -> tuple[str, str]:
    weekday = st.one_of(
        st.sampled_from(["*", "MON-FRI", "2-6", "L", "1,7", "sun"]),
        st.integers(1, 7).map(lambda d: f"{d}L"),
        st.tuples(st.integers(1, 7), st.integers(1, 5)).map(lambda t: f"{t[0]}#{t[1]}"),
    )
    if draw(st.booleans()):
        return draw(day_of_month().filter(lambda d: d != "?")), "?"
    return "?", draw(weekday)


def nearest_weekday_by_search(day: date, n: int) -> bool:
    """Whether ``day`` is the weekday of its month nearest day n (brute force over the month's weekdays)."""
    length = calendar.monthrange(day.year, day.month)[1]
    if n > length:
        return False
    weekdays = [d for d in range(1, length + 1) if date(day.year, day.month, d).weekday() < 5]
    return day.day == min(weekdays, key=lambda d: abs(d - n))


class Reference(CronSim):
    """cronsim, plus day-of-month ``nW`` (which cronsim lacks) by the brute-force rule above."""

    def __init__(self, expr: str, start: datetime) -> None:
        fields = expr.split()
        match = re.fullmatch(r"([0-9]+)W", fields[2].upper())
        self.nearest = int(match[1]) if match else None
        if match:
            fields[2] = (
                "1"  # a restricted stand-in, so cronsim's either/both rule reads the field as restricted
            )
        super().__init__(" ".join(fields), start)

    def match_dom(self, d: date) -> bool:
        if self.nearest is not None:
            return nearest_weekday_by_search(d, self.nearest)
        return bool(super().match_dom(d))


def cronsim_spelling(expr: str) -> str:
    return " ".join("*" if field == "?" else field for field in expr.split())


def eventbridge_as_5_fields(expr: str) -> tuple[str, set[int] | None]:
    """The test's own reading of ``cron(...)``: 5 Vixie fields, and the years (None: every year)."""
    minute, hour, dom, month, dow, year = expr[len("cron(") : -1].split()

    def vixie(value: str) -> str:
        return (
            str(WEEKDAY_NAMES.index(value.upper())) if value.upper() in WEEKDAY_NAMES else str(int(value) - 1)
        )

    terms = []
    for term in dow.split(","):
        if term == "L":
            terms.append("6")
        elif term.endswith("L"):
            terms.append(vixie(term[:-1]) + "L")
        elif "#" in term:
            day, nth = term.split("#")
            terms.append(f"{vixie(day)}#{nth}")
        elif "-" in term:
            first, last = term.split("-")
            terms.append(f"{vixie(first)}-{vixie(last)}")
        else:
            terms.append(term if term in ("*", "?") else vixie(term))
    years = None if year == "*" else {int(y) for y in year.split(",")}
    return f"{minute} {hour} {dom} {month} {','.join(terms)}", years


@functools.cache
def transition_days(zone: str, year: int) -> frozenset[date]:
    """The local dates around each change of the zone's UTC offset in ``year`` (the day before to the day
    after: a change near midnight UTC falls on either local date)."""
    tz, found = ZoneInfo(zone), set()
    at = datetime(year, 1, 1, tzinfo=UTC)
    while at.year == year:
        if at.astimezone(tz).utcoffset() != (at + timedelta(days=1)).astimezone(tz).utcoffset():
            local = at.astimezone(tz).date()
            found |= {local + timedelta(days=k) for k in range(-1, 3)}
        at += timedelta(days=1)
    return frozenset(found)


def on_a_transition_day(local: datetime, zone: str) -> bool:
    return local.date() in transition_days(zone, local.year)


def ours(expr: str, zone: str, start: datetime) -> list[datetime]:
    out: list[datetime] = []
    at = start
    for _ in range(FIRES):
        try:
            at = cron_next_after(expr, zone, at)
        except CroniterBadDateError:
            break
        out.append(at.astimezone(ZoneInfo(zone)).replace(tzinfo=None))
    return out


def theirs(expr: str, years: set[int] | None, start: datetime, until: datetime) -> Iterator[datetime]:
    for local in Reference(expr, start):
        if local > until:
            return
        if years is None or local.year in years:
            yield local


def compare(expr: str, reference: str, years: set[int] | None, zone: str, start: datetime) -> None:
    local_start = start.astimezone(ZoneInfo(zone)).replace(tzinfo=None)
    got = ours(expr, zone, start)
    until = got[-1] if got else local_start + timedelta(days=366 * 30)  # ours ended: past a year bound
    expected = [t for t in theirs(reference, years, local_start, until) if not on_a_transition_day(t, zone)]
    assert [t for t in got if not on_a_transition_day(t, zone)] == expected, (expr, zone, start)


STARTS = st.integers(0, 2 * 365 * 24 * 60).map(
    lambda m: datetime(2026, 1, 15, tzinfo=UTC) + timedelta(minutes=m)
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    minute=MINUTES,
    hour=HOURS,
    dom=day_of_month(),
    month=MONTHS,
    dow=vixie_day_of_week(),
    zone=st.sampled_from(ZONES),
    start=STARTS,
)
def test_5_field_crons_with_the_new_tokens_match_cronsim(
    minute: str, hour: str, dom: str, month: str, dow: str, zone: str, start: datetime
) -> None:
    expr = f"{minute} {hour} {dom} {month} {dow}"
    assume(cron_never_fires(expr) is None)
    compare(expr, cronsim_spelling(expr), None, zone, start)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    minute=MINUTES,
    hour=HOURS,
    days_=eventbridge_day_fields(),
    month=MONTHS,
    year=st.sampled_from(["*", "*", "2026,2027", "2027"]),
    zone=st.sampled_from(ZONES),
    start=STARTS,
)
def test_eventbridge_crons_match_cronsim_on_the_tests_own_translation(
    minute: str, hour: str, days_: tuple[str, str], month: str, year: str, zone: str, start: datetime
) -> None:
    expr = f"cron({minute} {hour} {days_[0]} {month} {days_[1]} {year})"
    assume(cron_never_fires(expr) is None)
    five, years = eventbridge_as_5_fields(expr)
    compare(expr, cronsim_spelling(five), years, zone, start)


def test_the_transition_days_left_out_are_few() -> None:
    assert all(len(transition_days(zone, 2026)) == 2 * 4 for zone in ZONES if zone != "UTC")
    assert not transition_days("UTC", 2026)
    assert on_a_transition_day(datetime(2026, 3, 29, 12), "Europe/Berlin")
    assert not on_a_transition_day(datetime(2026, 3, 25, 12), "Europe/Berlin")


def test_a_stored_cron_is_read_as_it_was_sent() -> None:
    for cron in ("0 9 LW * 5L", "cron(0 9 ? * MON-FRI 2027)"):
        stored = CronSchedule.model_validate({"cron": cron}, context={"stored": True})
        assert stored == CronSchedule(cron=cron)


@given(st.text(alphabet="0123456789 *?/,#-LWlwMONFRIcron()", max_size=30))
def test_no_text_makes_the_reader_fail_other_than_with_a_validation_error(text: str) -> None:
    with contextlib.suppress(ValidationError):  # accepted, or refused as a 422: never a 500
        CronSchedule.model_validate({"cron": text}, context={"now": T0})


def test_a_wall_clock_start_inside_a_never_firing_year_set_is_an_error_not_a_hang() -> None:
    with pytest.raises(ValidationError, match="never fires"):
        CronSchedule(cron="cron(0 9 30 2 ? 2026-2030)")
    assert cron_never_fires("cron(0 9 29 2 ? 2028)") is None


# --- the plain route and the previews -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("cron", "patterns"),
    [
        ("0 9 * * *", ["0 9 * * *"]),
        ("0 0 */8 * 0", ["0 0 */8 * 0"]),
        ("0 12 1 * L5", ["0 12 1 * *", "0 12 * * L5"]),
        ("0 0 1,15 * MON", ["0 0 1,15 * *", "0 0 * * MON"]),
    ],
)
def test_a_plain_cron_is_croniters_alone_with_todays_patterns(cron: str, patterns: list[str]) -> None:
    read = day_rule_patterns(cron)
    assert [pattern.text for pattern in read] == patterns
    assert all(pattern.croniter_alone for pattern in read)


def test_duetime_preview_shows_the_new_forms_times(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["preview", "--cron", "cron(0 9 ? * 6L *)", "--tz", "Europe/Berlin"]
    assert main([*args, "--after", "2026-12-01T00:00:00Z", "--count", "2"]) == 0
    assert capsys.readouterr().out.split() == ["2026-12-25T09:00:00+01:00", "2027-01-29T09:00:00+01:00"]
    assert main(["preview", "--cron", "0 9 LW * *", "--after", "2026-01-01T00:00:00Z", "--count", "1"]) == 0
    assert capsys.readouterr().out.split() == ["2026-01-30T09:00:00+00:00"]


def test_an_eventbridge_hourly_cron_follows_real_time_like_its_5_field_reading() -> None:
    # New York's fall-back, 1 November 2026: 01:00 local happens twice; hour '*' runs at both.
    ny, after = "America/New_York", utc("2026-11-01T04:30Z")
    assert ours("cron(0 * ? * SUN *)", ny, after)[:3] == ours("0 * * * 0", ny, after)[:3]
    assert [
        cron_next_after("cron(0 * ? * SUN *)", ny, utc(t)) for t in ("2026-11-01T04:30Z", "2026-11-01T05:30Z")
    ] == [
        utc("2026-11-01T05:00Z"),
        utc("2026-11-01T06:00Z"),
    ]
