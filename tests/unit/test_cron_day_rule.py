"""Cron's day-of-month / day-of-week rule (Vixie cron and cronie), checked against an independent cron.

If either day field starts with ``*`` (``*/8`` too) a day must match both fields; otherwise either.
The differential test compares duetime with ``cronsim``, which follows Debian's cron, on random
expressions. Where the two deliberately differ it narrows the comparison, and says why:

* **DST class.** duetime calls a job hourly-or-more-often only when its hour field is exactly ``*``
  (docs/guide/jobs-and-schedules.md, "Daylight saving time"); cronsim, like Vixie cron's code, when the
  minute or the hour field starts with ``*``. ``*/15 2 * * *`` and ``0 */2 * * *`` are fixed-time in
  duetime and not in cronsim.
  For those expressions, in zones with DST, fire times within three hours of a transition are left out
  and everything else is compared; for all other expressions the transitions are compared too (both
  run a skipped fixed time once at the first valid time after the gap and a repeated one once, at its
  first occurrence; hourly jobs fire at every real instant whose local time matches).
* **Starting inside a repeated hour.** cronsim drops the fold of its start time for fixed-time jobs and
  can answer with an instant before the start; starts are therefore drawn outside repeated local hours.
  The fire times that follow are chained by each implementation from its own previous answer.
* **Syntax neither Vixie cron nor cronie accepts** is not generated: ``5/2`` in day-of-week (croniter
  steps to 6, cronsim to 7 = Sunday), reversed ranges (``6-1``), ``W``, ``#``. Both spell "last
  Friday" differently (croniter ``L5``, cronsim ``5L``); the generator writes each its own spelling.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim, CronSimError

from duetime.domain.cron_dialect import cron_never_fires
from duetime.domain.models import CronSchedule
from duetime.domain.schedule import cron_next_after, is_dst_shifted

SEED = 20261004
EXPRESSIONS = 300
FIRES = 20
DST_ZONES = ("Europe/Berlin", "America/New_York", "Australia/Lord_Howe")
NEAR_TRANSITION = timedelta(hours=3)
MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def fires(expr: str, zone: str, after: datetime, count: int) -> list[datetime]:
    out = []
    for _ in range(count):
        after = cron_next_after(expr, zone, after)
        out.append(after)
    return out


# --- the rule, by example ---------------------------------------------------------------------------------


def test_a_star_day_field_makes_both_day_fields_required() -> None:
    # Monday 1 June 2026. Under "either", the 1st matches and it fires within the minute; under Vixie
    # cron's rule (*/8 starts with '*') only Sundays on the 1st, 9th, 17th or 25th count: 9 August.
    first = fires("* 1-13 */8 * 0", "UTC", utc("2026-06-01T10:00Z"), 1)[0]
    assert first == utc("2026-08-09T01:00Z")
    sundays = [t.date().isoformat() for t in fires("0 0 */8 * SUN", "UTC", utc("2026-06-01T10:00Z"), 4)]
    assert sundays == ["2026-08-09", "2026-10-25", "2026-11-01", "2027-01-17"]


def test_restricted_day_fields_without_a_star_mean_either() -> None:
    days = [t.strftime("%a %d") for t in fires("0 0 1,15 * 1", "UTC", utc("2026-06-01T10:00Z"), 6)]
    assert days == ["Mon 08", "Mon 15", "Mon 22", "Mon 29", "Wed 01", "Mon 06"]


@pytest.mark.parametrize(
    ("expr", "first_days"),
    [
        # '1-31' does not start with '*': either field, so every day (croniter's own union read it as
        # '*' next to a '*' inside the other field, and kept only Sun, Mon, Wed and Sat).
        ("0 0 1-31 * 1,*/3", ["02", "03", "04", "05"]),
        ("0 0 5,*/10 * 0-6", ["02", "03", "04", "05"]),
        # '*/6' starts with '*': both, so the 1st and 15th that fall on a weekend (1 and 15 August).
        ("0 0 1,15 * */6", ["01", "15"]),
        # croniter's last-weekday L5 next to a day of month: the 1st or the last Friday (croniter's own
        # union intersected them and found no date at all).
        ("0 12 1 * L5", ["01", "26", "01", "31"]),
        ("0 0 L * 1", ["08", "15", "22", "29"]),
    ],
)
def test_the_rule_holds_for_lists_and_last_days(expr: str, first_days: list[str]) -> None:
    assert cron_never_fires(expr) is None
    got = [t.strftime("%d") for t in fires(expr, "UTC", utc("2026-06-01T00:00Z"), len(first_days))]
    assert got == first_days


def test_validation_and_dst_marking_use_the_same_rule() -> None:
    # Under "either" this fired on every Sunday of February; under "both" it needs a 30 February.
    with pytest.raises(ValueError, match="never fires"):
        CronSchedule(cron="0 0 30 2 */7")
    assert cron_never_fires("0 0 31 2 1") is None  # 31 February never comes, but Mondays in it do
    # 02:30 on Sundays that are the 1st, 8th, 15th, ...: New York skips 02:30 on Sunday 8 March 2026.
    ny = "America/New_York"
    assert fires("30 2 */7 * 0", ny, utc("2026-03-02T00:00Z"), 2) == [
        utc("2026-03-08T07:00Z"),
        utc("2026-03-15T06:30Z"),
    ]
    assert is_dst_shifted("30 2 */7 * 0", ny, utc("2026-03-08T07:00Z"))
    assert not is_dst_shifted("30 2 */7 * 0", ny, utc("2026-03-15T06:30Z"))
    # The 1st or the last Friday: Wednesday 1 April at 02:30 is what the wall clock says.
    assert not is_dst_shifted("30 2 1 * L5", ny, utc("2026-04-01T06:30Z"))


# --- differential test against cronsim ---------------------------------------------------------------------


def _pick(rng: random.Random, low: int, high: int, names: list[str] | None) -> str:
    value = rng.randint(low, high)
    if names and rng.random() < 0.3:
        return names[value % len(names) if len(names) == 7 else value - 1]
    return str(value)


def _term(rng: random.Random, low: int, high: int, names: list[str] | None, steps_from_a_value: bool) -> str:
    kind = rng.choice(["value", "value", "range", "range_step", "star_step", "from_step"])
    if kind == "from_step" and not steps_from_a_value:
        kind = "range_step"
    if kind == "value":
        return _pick(rng, low, high, names)
    if kind == "star_step":
        return f"*/{rng.randint(1, max(2, (high - low) // 2))}"
    if kind == "from_step":
        return f"{rng.randint(low, high)}/{rng.randint(2, max(2, (high - low) // 3))}"
    a, b = sorted(rng.sample(range(low, high + 1), 2))
    step = f"/{rng.randint(2, max(2, (b - a)))}" if kind == "range_step" else ""
    if names and rng.random() < 0.3 and step == "":
        first = names[a % 7] if len(names) == 7 else names[a - 1]
        last = names[b % 7] if len(names) == 7 else names[b - 1]
        if len(names) != 7 or b < 7:
            return f"{first}-{last}"
    return f"{a}-{b}{step}"


def _field(
    rng: random.Random, low: int, high: int, names: list[str] | None = None, steps_from_a_value: bool = True
) -> str:
    roll = rng.random()
    if roll < 0.2:
        return "*"
    if roll < 0.3:
        return f"*/{rng.randint(2, max(2, (high - low) // 2))}"
    terms = [_term(rng, low, high, names, steps_from_a_value) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
    return ",".join(terms)


def _day_fields(rng: random.Random) -> tuple[str, str, str]:
    """(day of month, duetime's day of week, cronsim's day of week): mostly both restricted."""
    dom = "L" if rng.random() < 0.08 else _field(rng, 1, 31)
    if rng.random() < 0.1:
        dom = f"{dom},*/{rng.randint(2, 10)}"  # a '*' after the start of the field does not count
    if rng.random() < 0.08:
        last = rng.randint(0, 6)
        return dom, f"L{last}", f"{last}L"
    dow = _field(rng, 0, 7, DAYS, steps_from_a_value=False)
    if rng.random() < 0.1:
        dow = rng.choice(["0-6", "1,*/3", "*,2", "SUN-SAT"])
    return dom, dow, dow


def random_expressions(seed: int, count: int) -> Iterator[tuple[str, str]]:
    """(duetime expression, the same schedule as cronsim spells it), each one duetime accepts."""
    rng = random.Random(seed)
    made = 0
    while made < count:
        minute = _field(rng, 0, 59) if rng.random() < 0.7 else str(rng.randint(0, 59))
        hour = _field(rng, 0, 23) if rng.random() < 0.8 else "*"
        month = _field(rng, 1, 12, MONTHS) if rng.random() < 0.5 else "*"
        dom, dow, cronsim_dow = _day_fields(rng)
        expr = f"{minute} {hour} {dom} {month} {dow}"
        if cron_never_fires(expr) is not None:
            continue  # (checked against cronsim separately below)
        made += 1
        yield expr, f"{minute} {hour} {dom} {month} {cronsim_dow}"


def _ambiguous(instant: datetime, zone: ZoneInfo) -> bool:
    local = instant.astimezone(zone).replace(tzinfo=None)
    return local.replace(tzinfo=zone, fold=0).utcoffset() != local.replace(tzinfo=zone, fold=1).utcoffset()


def random_start(rng: random.Random, zone: str) -> datetime:
    """A whole-second instant in 2024-2031; in DST zones often a day or two before a transition."""
    tz = ZoneInfo(zone)
    while True:
        start = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(8 * 365 * 86400))
        if zone != "UTC" and rng.random() < 0.5:
            window = rng.choice([3 * 3600, 2 * 86400])
            start = _transition_after(start, tz) - timedelta(seconds=rng.randrange(window))
        start = start.replace(microsecond=0)
        if not _ambiguous(start, tz):
            return start


def _transition_after(instant: datetime, zone: ZoneInfo) -> datetime:
    """The first UTC offset change after ``instant`` (to the minute; DST zones change twice a year)."""
    step = timedelta(days=1)
    while instant.astimezone(zone).utcoffset() == (instant + step).astimezone(zone).utcoffset():
        instant += step
    low, high = instant, instant + step
    while high - low > timedelta(minutes=1):
        mid = low + (high - low) / 2
        if mid.astimezone(zone).utcoffset() == low.astimezone(zone).utcoffset():
            low = mid
        else:
            high = mid
    return high


def _near_transition(instant: datetime, zone: ZoneInfo) -> bool:
    before = (instant - NEAR_TRANSITION).astimezone(zone).utcoffset()
    return before != (instant + NEAR_TRANSITION).astimezone(zone).utcoffset()


def cronsim_fixed_time(expr: str) -> bool:
    minute, hour = expr.split()[:2]
    return not minute.startswith("*") and not hour.startswith("*")


def same_dst_class(expr: str) -> bool:
    """duetime and cronsim agree whether this is a fixed-time job (see the module docstring)."""
    return (expr.split()[1] != "*") == cronsim_fixed_time(expr)


def _away_from_transitions(ours: list[datetime], theirs: list[datetime], zone: ZoneInfo) -> bool:
    """Whether the two agree on every fire time that both cover and that is not near a DST transition."""
    horizon = min(ours[-1], theirs[-1])
    return [t for t in ours if t <= horizon and not _near_transition(t, zone)] == [
        t for t in theirs if t <= horizon and not _near_transition(t, zone)
    ]


def cronsim_fires(expr: str, zone: str, after: datetime, count: int) -> list[datetime]:
    it = CronSim(expr, after.astimezone(ZoneInfo(zone)) if zone != "UTC" else after)
    return [next(it).astimezone(UTC) for _ in range(count)]


def cronsim_real_minutes(expr: str, zone: str, after: datetime, count: int) -> list[datetime]:
    """Every real minute whose local time matches cronsim's reading of ``expr`` (fields and day rule)."""
    tz, parsed = ZoneInfo(zone), CronSim(expr, datetime(2000, 1, 1))
    out: list[datetime] = []
    day = after.astimezone(tz).date()
    while len(out) < count:
        if day.month in parsed.months and parsed.match_day(day):
            minute = datetime.combine(day, time(), tzinfo=tz).astimezone(UTC)
            midnight = datetime.combine(day + timedelta(days=1), time(), tzinfo=tz).astimezone(UTC)
            while minute < midnight and len(out) < count:
                local = minute.astimezone(tz)
                if minute > after and local.hour in parsed.hours and local.minute in parsed.minutes:
                    out.append(minute)
                minute += timedelta(minutes=1)
        day += timedelta(days=1)
    return out


def reference_fires(cronsim_expr: str, zone: str, after: datetime, count: int) -> list[datetime]:
    """cronsim's fire times; in Lord Howe, for jobs cronsim runs on real time, its real-minute reading.

    cronsim's real-time mode jumps in whole hours of UTC, so across Lord Howe's 30-minute shift it skips
    matching minutes: ``35 * * * 0`` from 00:43 on Sunday 1 October 2028 skips 02:35 (which exists), and
    ``* 7 * * *`` from 23:00 on 3 April 2032 runs at 07:30-07:59 on the 4th, not from 07:00. The scan
    applies cronsim's own parse and day rule to every real minute; duetime agrees with it there.
    """
    if zone == "Australia/Lord_Howe" and not cronsim_fixed_time(cronsim_expr):
        return cronsim_real_minutes(cronsim_expr, zone, after, count)
    return cronsim_fires(cronsim_expr, zone, after, count)


def compare(expr: str, cronsim_expr: str, zone: str, start: datetime) -> str | None:
    """None when duetime and cronsim agree on the fire times after ``start``, else what differs."""
    ours = fires(expr, zone, start, FIRES)
    theirs = reference_fires(cronsim_expr, zone, start, FIRES)
    if zone == "UTC" or same_dst_class(expr):
        if ours == theirs:
            return None
    elif _away_from_transitions(ours, theirs, ZoneInfo(zone)):
        return None
    shown = [(a.isoformat(), b.isoformat()) for a, b in zip(ours, theirs, strict=True) if a != b][:3]
    return f"{expr!r} in {zone} from {start.isoformat()}: duetime vs cronsim {shown}"


def test_the_generator_exercises_both_halves_of_the_rule() -> None:
    pairs = list(random_expressions(SEED, EXPRESSIONS))
    day_fields = [e.split()[2:5:2] for e, _ in pairs]
    restricted = [(dom, dow) for dom, dow in day_fields if "*" not in (dom, dow)]
    both = sum(1 for dom, dow in restricted if dom.startswith("*") or dow.startswith("*"))
    assert both > EXPRESSIONS // 5 and len(restricted) - both > EXPRESSIONS // 5  # the rest: "either"
    assert any("*" in dom[1:] for dom, _ in day_fields) and any(dow.startswith("L") for _, dow in day_fields)
    assert sum(1 for e, _ in pairs if not same_dst_class(e)) > 20


@pytest.mark.parametrize("zone", ["UTC", *DST_ZONES])
def test_duetime_matches_cronsim_on_random_expressions(zone: str) -> None:
    rng = random.Random(f"{SEED}:{zone}")
    failures = []
    for expr, cronsim_expr in random_expressions(SEED, EXPRESSIONS):
        start = random_start(rng, zone)
        if (diff := compare(expr, cronsim_expr, zone, start)) is not None:
            failures.append(diff)
    assert not failures, f"{len(failures)} of {EXPRESSIONS} differ, e.g.\n" + "\n".join(failures[:10])


@pytest.mark.parametrize("dom", ["30", "31", "*/30", "29-31", "30,31", "*/15", "L"])
@pytest.mark.parametrize("month", ["2", "FEB", "4", "2,4", "*"])
def test_duetime_refuses_the_day_combinations_cronsim_never_fires(dom: str, month: str) -> None:
    for dow in ["*", "*/2", "0", "1-5", "*/7", "SAT"]:
        expr = f"0 0 {dom} {month} {dow}"
        try:
            cronsim_fires_at_all = bool(cronsim_fires(expr, "UTC", utc("2026-01-01T00:00Z"), 1))
        except (CronSimError, StopIteration):
            cronsim_fires_at_all = False
        assert (cron_never_fires(expr) is None) == cronsim_fires_at_all, expr
