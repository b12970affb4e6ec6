"""Daylight saving time: which instants a local wall-clock time stands for, under a job's DST policy.

A spring-forward skips wall times (in New York on 2026-03-08 the clock jumps from 02:00 to 03:00: 02:30
does not exist); a fall-back repeats them (on 2026-11-01 01:30 happens at 05:30Z, then again at 06:30Z).
A policy says what a schedule naming such a wall time does:

* ``gap``: ``shift`` runs a skipped wall time once, at the first valid minute after the gap (the instant the
  clock jumped: 02:30 runs at 03:00 EDT); ``skip`` does not run it.
* ``overlap``: ``first`` runs a repeated wall time at its first occurrence, ``last`` at its second,
  ``both`` at both.

A side left out (or no policy at all) follows Vixie cron, by what the schedule is: a *fixed-time* schedule
(a cron whose hour field is not ``*``, a time of day) shifts and runs the first occurrence; one that runs
hourly or more often follows real elapsed time: skip, both. Every wall time is judged on its own, so a
policy means the same for an hourly cron: under ``shift`` the wall times a gap skipped become one run at
the first minute after it (with that minute's own, if the cron names it too); under ``first`` the repeated
hour runs once, on its first pass.

Pure: zones and times are passed in. Schedules with local times (cron, business-day times) share this.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import NamedTuple
from zoneinfo import ZoneInfo

from pydantic import ConfigDict, Field

from duetime.domain.stored_format import ReadsStoredTolerantly


class DstGap(StrEnum):
    """What a wall time skipped by spring-forward does."""

    SHIFT = "shift"  # runs once, at the first valid minute after the gap
    SKIP = "skip"  # does not run


class DstOverlap(StrEnum):
    """What a wall time repeated by fall-back does."""

    FIRST = "first"  # runs at its first occurrence
    LAST = "last"  # runs at its second occurrence
    BOTH = "both"  # runs at both


class DstPolicy(ReadsStoredTolerantly):
    """A job's DST policy: frozen, so hashable (schedule math caches on it). A side left out follows Vixie
    cron for that side (see the module)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gap: DstGap | None = Field(
        default=None,
        description="a wall time skipped by spring-forward: `shift` runs it once at the first valid minute "
        "after the gap, `skip` does not run it. Left out: `shift` for a fixed-time cron (hour field not "
        "`*`), `skip` for an hourly or more frequent one",
    )
    overlap: DstOverlap | None = Field(
        default=None,
        description="a wall time repeated by fall-back: runs at its `first` occurrence, its `last`, or "
        "`both`. Left out: `first` for a fixed-time cron, `both` for an hourly or more frequent one",
    )


class WallTimeRules(NamedTuple):
    """A policy resolved for one schedule: both sides decided."""

    gap: DstGap
    overlap: DstOverlap


FIXED_TIME_RULES = WallTimeRules(DstGap.SHIFT, DstOverlap.FIRST)  # Vixie cron, hour field not ``*``
ELAPSED_TIME_RULES = WallTimeRules(DstGap.SKIP, DstOverlap.BOTH)  # Vixie cron, hourly or more often


def wall_time_rules(policy: DstPolicy | None, fixed_time: bool) -> WallTimeRules:
    """``policy`` with each side left out filled in by Vixie cron's rule for a fixed-time schedule or an
    hourly-or-more-often one."""
    default = FIXED_TIME_RULES if fixed_time else ELAPSED_TIME_RULES
    if policy is None:
        return default
    return WallTimeRules(policy.gap or default.gap, policy.overlap or default.overlap)


def wall_time_exists(naive: datetime, zone: ZoneInfo) -> bool:
    """False for a wall time a spring-forward skipped."""
    aware = naive.replace(tzinfo=zone)
    return aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == naive


def gap_end(naive: datetime, zone: ZoneInfo) -> datetime:
    """The instant the clock jumped over the skipped wall time ``naive``: its first valid minute after."""
    later = naive
    while not wall_time_exists(later, zone):  # gaps are whole minutes, at most 2 hours long
        later += timedelta(minutes=1)
    return later.replace(tzinfo=zone).astimezone(UTC)


def instants_of_wall_time(naive: datetime, zone: ZoneInfo, rules: WallTimeRules) -> list[datetime]:
    """The UTC instants, in order, at which a schedule naming the local wall time ``naive`` runs: none
    (skipped), one, or two (a repeated wall time under ``both``)."""
    if not wall_time_exists(naive, zone):
        return [] if rules.gap is DstGap.SKIP else [gap_end(naive, zone)]
    first = naive.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = naive.replace(tzinfo=zone, fold=1).astimezone(UTC)
    if second == first or rules.overlap is DstOverlap.FIRST:
        return [first]
    return [second] if rules.overlap is DstOverlap.LAST else [first, second]


def is_repeated(naive: datetime, zone: ZoneInfo) -> bool:
    """True for a wall time a fall-back repeats (its two folds are two instants; a skipped one has none)."""
    first, second = (naive.replace(tzinfo=zone, fold=fold).utcoffset() for fold in (0, 1))
    return first != second and wall_time_exists(naive, zone)


def skipped_just_before(instant: datetime, zone: ZoneInfo) -> tuple[datetime, datetime] | None:
    """The wall times [start, end) a spring-forward skipped in the minute before ``instant``, or None: a
    run a gap shifted falls at the minute the clock jumped, so this names the wall times it may stand for."""
    before = instant - timedelta(minutes=1)
    jump = _offset(instant, zone) - _offset(before, zone)
    if jump <= timedelta(0):
        return None
    end = instant.astimezone(zone).replace(tzinfo=None)
    return end - jump, end


class DstEffect(StrEnum):
    """What daylight saving did to a run (previews mark it)."""

    MOVED = "moved"  # it stands for a wall time skipped by spring-forward, shifted to the gap's end
    DOUBLED = "doubled"  # its wall time repeats and runs at both occurrences (each of the two is marked)
    FIRST_ONLY = "first_only"  # its wall time repeats; this first occurrence is the only run
    LAST_ONLY = "last_only"  # its wall time repeats; this second occurrence is the only run


def repeated_effect(rules: WallTimeRules) -> DstEffect:
    """How a run at a repeated wall time is marked under ``rules``."""
    return {
        DstOverlap.FIRST: DstEffect.FIRST_ONLY,
        DstOverlap.LAST: DstEffect.LAST_ONLY,
        DstOverlap.BOTH: DstEffect.DOUBLED,
    }[rules.overlap]


def _offset(instant: datetime, zone: ZoneInfo) -> timedelta:
    offset = instant.astimezone(zone).utcoffset()
    assert offset is not None
    return offset
