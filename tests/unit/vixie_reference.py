"""schedule.py's daylight-saving handling as it was before jobs had a DST policy, kept verbatim: the reference
a job without a policy must still agree with (``test_dst_policy``). Only the DST code is copied; the day
rule and croniter's matching are schedule.py's own, so this reference follows changes to them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError

from duetime.domain.schedule import _day_rule_patterns, _wall_clock_matches, is_fixed_time
from duetime.domain.timeutil import to_utc

_ONE_SECOND = timedelta(seconds=1)
_FOLD_LOOKAHEAD = timedelta(hours=3)


def _exists(naive: datetime, zone: ZoneInfo) -> bool:
    aware = naive.replace(tzinfo=zone)
    return aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == naive


def _local_instants(naive: datetime, zone: ZoneInfo, fixed: bool) -> list[datetime]:
    if not _exists(naive, zone):
        if not fixed:
            return []
        later = naive
        while not _exists(later, zone):
            later += timedelta(minutes=1)
        return [later.replace(tzinfo=zone).astimezone(UTC)]
    first = naive.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = naive.replace(tzinfo=zone, fold=1).astimezone(UTC)
    if second != first and not fixed:
        return [first, second]
    return [first]


def vixie_cron_next_after(expr: str, timezone: str, after: datetime) -> datetime:
    zone = ZoneInfo(timezone)
    after = to_utc(after)
    fixed = is_fixed_time(expr)
    found = [
        instant
        for pattern in _day_rule_patterns(expr)
        if (instant := _pattern_next_after(pattern, zone, after, fixed)) is not None
    ]
    if not found:
        raise CroniterBadDateError(f"cron {expr!r} never fires after {after.isoformat()}")
    return min(found)


def _pattern_next_after(pattern: str, zone: ZoneInfo, after: datetime, fixed: bool) -> datetime | None:
    local_after = after.astimezone(zone).replace(tzinfo=None)
    fold = max(timedelta(0), _offset(after, zone) - _offset(after + _FOLD_LOOKAHEAD, zone))
    candidates = _wall_clock_matches(pattern, local_after - fold - _ONE_SECOND)
    best: datetime | None = None
    while True:
        try:
            naive = candidates.get_next(datetime)
        except CroniterBadDateError:
            return best
        if best is not None and naive > best.astimezone(zone).replace(tzinfo=None) + fold:
            return best
        for instant in _local_instants(naive, zone, fixed):
            if instant > after and (best is None or instant < best):
                best = instant
        if best is not None and fold == timedelta(0):
            return best


def _offset(instant: datetime, zone: ZoneInfo) -> timedelta:
    offset = instant.astimezone(zone).utcoffset()
    assert offset is not None
    return offset
