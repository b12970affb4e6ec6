"""Schedule math: pure functions of (schedule, instants). No clock is read here.

Rules (also in docs/guide/jobs-and-schedules.md):

* The next nominal time is computed from the last scheduled time, never from now: a late run does not
  push the schedule back.
* Day-of-month and day-of-week follow Vixie cron and cronie (with ``L``, ``W``, ``#``, ``?`` and EventBridge's
  form: ``duetime.domain.cron_dialect``): if either field starts with ``*`` (``*/8``
  too), a day must match both; otherwise it must match either. ``0 0 */8 * 0`` runs on Sundays that are
  the 1st, 9th, 17th or 25th; ``0 0 1,15 * 1`` runs on the 1st, the 15th and every Monday.
* Cron is evaluated on local wall-clock time in the job's IANA zone. Daylight saving follows the job's
  ``dst`` policy (``duetime.domain.dst``); a side it leaves out, or no policy, follows Vixie cron:
  - *fixed-time* jobs (hour field not ``*``): a local time skipped by spring-forward runs once at the
    first valid local time after the gap (02:30 in New York on 2026-03-08 runs at 03:00 EDT); a local time
    repeated by fall-back runs once, at its first occurrence;
  - *hourly or more often* (hour field ``*``): the job follows real elapsed time, firing at every instant
    whose local time matches (skipped times do not exist; repeated times run at both occurrences).
* Rates are anchored to ``start_at`` (or the job's creation): anchor + k * interval.
* ``at`` runs once. Nothing runs before ``start_at`` or after ``end_at``.
* Fire time = nominal + a stable per-job offset in [0, window), window = min(jitter_seconds, the gap to
  the following nominal time), so a frequent job is never pushed past its own next run. Exact jobs fire at
  the nominal second.
"""

from __future__ import annotations

import functools
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError

from duetime.domain.calendar_rules import (
    business_day_next_after,
    excluded_next_after,
    excluded_runs,
    no_days_off,
)
from duetime.domain.cron_dialect import (
    CronPattern,
    WallClockMatches,
    day_rule_patterns,
    wall_clock_matches,
)
from duetime.domain.dst import (
    DstEffect,
    DstGap,
    DstPolicy,
    WallTimeRules,
    gap_end,
    instants_of_wall_time,
    is_repeated,
    repeated_effect,
    skipped_just_before,
    wall_time_exists,
    wall_time_rules,
)
from duetime.domain.ids import jitter_offset_seconds
from duetime.domain.models import (
    AtSchedule,
    BusinessDaySchedule,
    CronSchedule,
    JobSpec,
    RateSchedule,
    Schedule,
)
from duetime.domain.timeutil import ceil_seconds, to_utc, whole_seconds

_ONE_SECOND = timedelta(seconds=1)
_FOLD_LOOKAHEAD = timedelta(hours=3)  # longer than any DST shift in tzdata (the largest is 2 h)


# --- cron ------------------------------------------------------------------------------------------------


def _day_rule_patterns(expr: str) -> tuple[CronPattern, ...]:
    """croniter patterns whose matches, together, are the cron's (Vixie cron's day-of-month/week rule:
    ``cron_dialect.day_rule_patterns``)."""
    return day_rule_patterns(expr)


def _wall_clock_matches(pattern: CronPattern, start: datetime) -> WallClockMatches:
    return wall_clock_matches(pattern, start)


def is_fixed_time(expr: str) -> bool:
    """Vixie cron's distinction, by the hour field: ``*`` means hourly or more often (real elapsed time)."""
    return expr.split()[1] != "*"


@functools.lru_cache(maxsize=8192)
def cron_next_after(expr: str, timezone: str, after: datetime, dst: DstPolicy | None = None) -> datetime:
    """The first instant strictly after ``after`` at which the cron job fires (see module rules), under
    the job's DST policy ``dst`` (None: Vixie cron's rule).

    A pure function of its arguments, so it is cached: at midnight a poller plans the claims of thousands
    of jobs sharing a few schedules and the same nominal time, and croniter costs ~80 µs a call."""
    zone = ZoneInfo(timezone)
    after = to_utc(after)
    rules = wall_time_rules(dst, is_fixed_time(expr))
    found = [
        instant
        for pattern in _day_rule_patterns(expr)
        if (instant := _pattern_next_after(pattern, zone, after, rules)) is not None
    ]
    if not found:
        raise CroniterBadDateError(f"cron {expr!r} never fires after {after.isoformat()}")
    return min(found)


def _pattern_next_after(
    pattern: CronPattern, zone: ZoneInfo, after: datetime, rules: WallTimeRules
) -> datetime | None:
    local_after = after.astimezone(zone).replace(tzinfo=None)
    # A fall-back just ahead makes local time run backwards: start early enough to see the repeated times.
    fold = _fold_ahead(after, zone)
    candidates = _wall_clock_matches(pattern, local_after - fold - _ONE_SECOND)
    best: datetime | None = None
    while True:
        try:
            naive = candidates.get_next(datetime)
        except CroniterBadDateError:
            return best  # no further wall-clock match within croniter's horizon (or none at all)
        if best is not None and naive > best.astimezone(zone).replace(tzinfo=None) + fold:
            return best  # later wall-clock matches can only be later instants
        for instant in instants_of_wall_time(naive, zone, rules):
            if instant > after and (best is None or instant < best):
                best = instant
        if best is not None and fold == timedelta(0):
            return best


def _offset(instant: datetime, zone: ZoneInfo) -> timedelta:
    offset = instant.astimezone(zone).utcoffset()
    assert offset is not None
    return offset


def _fold_ahead(instant: datetime, zone: ZoneInfo) -> timedelta:
    """How far local time runs back in the hours after ``instant`` (a fall-back ahead), else 0."""
    return max(timedelta(0), _offset(instant, zone) - _offset(instant + _FOLD_LOOKAHEAD, zone))


# --- what daylight saving did to a cron's times (previews) -------------------------------------------------


def is_dst_shifted(expr: str, timezone: str, nominal: datetime, dst: DstPolicy | None = None) -> bool:
    """True when the run at ``nominal`` stands for a wall time of the cron that spring-forward skipped and
    the policy shifted to the gap's end (it may be a time the cron names as well: ``0 2,3 * * *``)."""
    zone = ZoneInfo(timezone)
    gap = skipped_just_before(to_utc(nominal), zone)
    if gap is None or wall_time_rules(dst, is_fixed_time(expr)).gap is DstGap.SKIP:
        return False
    return _names_a_time_in(expr, *gap)


def _names_a_time_in(expr: str, start: datetime, end: datetime) -> bool:
    """True when the cron names a wall time in [start, end)."""
    for pattern in _day_rule_patterns(expr):
        match = _next_or_none(_wall_clock_matches(pattern, start - _ONE_SECOND))
        if match is not None and match < end:
            return True
    return False


def cron_wall_times_of(expr: str, timezone: str, nominal: datetime, dst: DstPolicy | None) -> list[time]:
    """The cron's wall times its run at ``nominal`` (a time ``cron_next_after`` gave) stands for: its local
    time; for a run a spring-forward shifted to the gap's end, the cron's times in the gap, and the gap's
    end if the cron names it too (what a calendar's roll carries to another day)."""
    zone = ZoneInfo(timezone)
    local = to_utc(nominal).astimezone(zone).replace(tzinfo=None)
    if not is_dst_shifted(expr, timezone, nominal, dst):
        return [local.time()]
    gap = skipped_just_before(to_utc(nominal), zone)
    assert gap is not None  # is_dst_shifted found it
    start, end = gap
    named: set[time] = set()
    for pattern in _day_rule_patterns(expr):
        candidates = _wall_clock_matches(pattern, start - _ONE_SECOND)
        while (naive := _next_or_none(candidates)) is not None and naive <= end:
            named.add(naive.time())
    return sorted(named)


def cron_dst_effect(expr: str, timezone: str, nominal: datetime, dst: DstPolicy | None) -> DstEffect | None:
    """What daylight saving did to the cron's run at ``nominal`` (a time ``cron_next_after`` gave), if
    anything: moved out of a gap, or at a repeated wall time (doubled, or its one occurrence)."""
    if is_dst_shifted(expr, timezone, nominal, dst):
        return DstEffect.MOVED
    zone = ZoneInfo(timezone)
    if is_repeated(to_utc(nominal).astimezone(zone).replace(tzinfo=None), zone):
        return repeated_effect(wall_time_rules(dst, is_fixed_time(expr)))
    return None


def cron_skipped_wall_times(
    expr: str, timezone: str, start: datetime, end: datetime, dst: DstPolicy | None
) -> list[datetime]:
    """The cron's wall times (naive, local) that spring-forward skipped and the policy does not run, whose
    gap ended in (start, end], in order."""
    if wall_time_rules(dst, is_fixed_time(expr)).gap is not DstGap.SKIP:
        return []
    zone = ZoneInfo(timezone)
    start, end = to_utc(start), to_utc(end)
    # Local time runs back at a fall-back: widen the walk by the fold near either end.
    low = start.astimezone(zone).replace(tzinfo=None) - _fold_ahead(start, zone)
    high = end.astimezone(zone).replace(tzinfo=None) + _fold_ahead(end - _FOLD_LOOKAHEAD, zone)
    skipped: set[datetime] = set()
    for pattern in _day_rule_patterns(expr):
        candidates = _wall_clock_matches(pattern, low)
        while (naive := _next_or_none(candidates)) is not None and naive <= high:
            if not wall_time_exists(naive, zone) and start < gap_end(naive, zone) <= end:
                skipped.add(naive)
    return sorted(skipped)


def _next_or_none(candidates: WallClockMatches) -> datetime | None:
    try:
        found: datetime = candidates.get_next(datetime)
    except CroniterBadDateError:
        return None
    return found


# --- all kinds -------------------------------------------------------------------------------------------


def _raw_next_after(
    schedule: Schedule, anchor: datetime, after: datetime, dst: DstPolicy | None = None
) -> datetime | None:
    if isinstance(schedule, CronSchedule):
        try:
            return cron_next_after(schedule.cron, schedule.timezone, after, dst)
        except CroniterBadDateError:
            return None  # no date matches any more (a stored `0 0 30 2 */7`, say): the schedule has ended
    if isinstance(schedule, RateSchedule):
        step = schedule.interval
        if after < anchor:
            return anchor
        periods = (after - anchor) // step + 1
        return anchor + periods * step
    assert isinstance(schedule, AtSchedule)
    return schedule.at if schedule.at > after else None


def _next_with_calendars(spec: JobSpec, after: datetime) -> datetime | None:
    """The next time of a job whose schedule reads calendars (``duetime.domain.calendar_rules``)."""
    schedule = spec.schedule
    if isinstance(schedule, BusinessDaySchedule):
        zone = ZoneInfo(schedule.timezone)
        days = spec.days_off() if schedule.calendars else no_days_off
        rules = wall_time_rules(spec.dst, fixed_time=True)
        return business_day_next_after(schedule.business_day, schedule.local_time, zone, days, rules, after)
    assert isinstance(schedule, CronSchedule) and spec.exclude is not None
    cron, timezone, dst = schedule.cron, schedule.timezone, spec.dst

    def cron_next(instant: datetime) -> datetime | None:
        try:
            return cron_next_after(cron, timezone, instant, dst)
        except CroniterBadDateError:
            return None

    def wall_times(nominal: datetime) -> list[time]:
        return cron_wall_times_of(cron, timezone, nominal, dst)

    exclusion = spec.exclude
    rules = wall_time_rules(dst, is_fixed_time(cron))
    days, on_excluded, rolled = spec.days_off(), exclusion.on_excluded, exclusion.rolled
    return excluded_next_after(
        cron_next, ZoneInfo(timezone), days, on_excluded, rolled, rules, after, wall_times
    )


def next_nominal_after(spec: JobSpec, anchor: datetime, after: datetime) -> datetime | None:
    """The job's first nominal time strictly after ``after`` within [start_at, end_at], or None if it ended.

    ``anchor`` is where rates count from: ``start_at`` if set, else the job's creation time. A job whose
    schedule reads calendars must have them resolved (``JobSpec.with_days_off``).
    """
    after = to_utc(after)
    if spec.start_at is not None and after < spec.start_at:
        after = spec.start_at - _ONE_SECOND  # a match exactly at start_at counts
    if spec.exclude is None and not isinstance(spec.schedule, BusinessDaySchedule):
        nominal = _raw_next_after(spec.schedule, anchor, whole_seconds(after), spec.dst)
    else:
        nominal = _next_with_calendars(spec, whole_seconds(after))
    if nominal is None or (spec.end_at is not None and nominal > spec.end_at):
        return None
    return whole_seconds(nominal)


def dst_effect(spec: JobSpec, nominal: datetime) -> DstEffect | None:
    """What daylight saving did to the job's run at ``nominal`` (None for rates and ``at``: instants)."""
    schedule = spec.schedule
    if isinstance(schedule, CronSchedule):
        return cron_dst_effect(schedule.cron, schedule.timezone, nominal, spec.dst)
    if isinstance(schedule, BusinessDaySchedule):
        zone = ZoneInfo(schedule.timezone)
        local = to_utc(nominal).astimezone(zone).replace(tzinfo=None)
        if local.time() != schedule.local_time:
            return DstEffect.MOVED  # its time did not exist that day: run at the gap's end
        if is_repeated(local, zone):
            return repeated_effect(wall_time_rules(spec.dst, fixed_time=True))
    return None


def skipped_wall_times(spec: JobSpec, start: datetime, end: datetime) -> list[datetime]:
    """The job's wall times (naive, local) that spring-forward skipped and its policy does not run, whose gap
    ended in (start, end] and within [start_at, end_at]."""
    schedule = spec.schedule
    if not isinstance(schedule, CronSchedule):
        return []
    if spec.start_at is not None:
        start = max(start, spec.start_at - _ONE_SECOND)
    if spec.end_at is not None:
        end = min(end, spec.end_at)
    return cron_skipped_wall_times(schedule.cron, schedule.timezone, start, end, spec.dst)


def nominals_between(
    spec: JobSpec, anchor: datetime, start: datetime, end: datetime, limit: int
) -> list[datetime]:
    """The job's nominal times in [start, end), in order, at most ``limit`` of them (the same times the
    scheduler gives runs: ``next_nominal_after`` from just before ``start``)."""
    found: list[datetime] = []
    nominal = next_nominal_after(spec, anchor, ceil_seconds(start) - _ONE_SECOND)
    while nominal is not None and nominal < end and len(found) < limit:
        found.append(nominal)
        nominal = next_nominal_after(spec, anchor, nominal)
    return found


def excluded_times_between(
    spec: JobSpec, start: datetime, end: datetime, limit: int
) -> dict[datetime, list[datetime]]:
    """The cron's own times in [start, end) that fall on dates its calendars exclude (at most ``limit`` own
    times examined), each with the runs it became (``calendar_rules.excluded_runs``: none when skipped;
    under ``each``, the second it was spread to); empty for a job without ``exclude``. ``start`` should lie
    before the run of days off that rolls into the times of interest."""
    schedule = spec.schedule
    if spec.exclude is None or not isinstance(schedule, CronSchedule):
        return {}
    own = nominals_between(spec.model_copy(update={"exclude": None}), start, start, end, limit)
    cron, timezone, dst = schedule.cron, schedule.timezone, spec.dst

    def wall_times(nominal: datetime) -> list[time]:
        return cron_wall_times_of(cron, timezone, nominal, dst)

    rule = spec.exclude
    rules = wall_time_rules(dst, is_fixed_time(cron))
    zone = ZoneInfo(timezone)
    return excluded_runs(own, zone, spec.days_off(), rule.on_excluded, rule.rolled, rules, wall_times)


def rate_anchor(spec: JobSpec, created_at: datetime) -> datetime:
    return whole_seconds(spec.start_at or created_at)


def first_nominal(spec: JobSpec, created_at: datetime, now: datetime) -> datetime | None:
    """The first nominal time of a new (or resumed) job: strictly after ``now``."""
    return next_nominal_after(spec, rate_anchor(spec, created_at), whole_seconds(now))


def fire_time(job_id: str, spec: JobSpec, nominal: datetime, following: datetime | None) -> datetime:
    """When the run for ``nominal`` should start: nominal plus the job's stable jitter offset."""
    if spec.fires_exactly:
        return nominal
    window = spec.jitter_seconds
    if following is not None:
        window = min(window, int((following - nominal).total_seconds()))
    return nominal + timedelta(seconds=jitter_offset_seconds(job_id, window))
