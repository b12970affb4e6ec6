"""A quiet partition group stops between ticks: the poller's half of resting (``duetime.scheduling.wake`` is
the API's).

Most minutes of a small installation have nothing due in a group. Its holder still lived through each
minute (about 55 s of Lambda a minute a group) only to sweep empty indexes. Now, once a holder has seen its
group quiet, it gives the lease back and its invocation returns; EventBridge's next tick (at most a minute
later) starts the next one, which looks again.

**Quiet** means, looking ``horizon`` ahead (the next tick, the next invocation's start and its preload's
lead): the last sweeps found nothing due, the preload holds no row due before the horizon, no partition of
the group has a row in the due index before it (one Query per partition and minute bucket), and no run of
the group may need the reaper before it (``RunStore.has_reap_work_before``). Anything already written that
falls due before the horizon keeps the holder; the next invocation's own look covers the minute after.

**Wakes.** What is written after the look, due before the next tick could load it, wakes the group
(``duetime.scheduling.wake``). The holder reads the group's wake count first, looks ``settle`` seconds later
(so that a job written before the count was read shows in the due index, which lags its table by well under a
second on DynamoDB), and gives the lease back only if the count is unchanged (POLLER_QUIET_UNWOKEN). A wake
after the release finds the lease free and starts an invocation.

A holder that is handing over, or that claims a busy minute, does not rest. ``duetime local`` rests too: it
runs the deployed pattern."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from duetime.domain.timeutil import minute_bucket
from duetime.ports import JobStore, PollerLeaseStore, RunStore
from duetime.scheduling.poller import MINUTE, ClaimReport, Poller
from duetime.scheduling.preload import FireReport
from duetime.scheduling.wake import QUIET_HORIZON


@dataclass(frozen=True)
class QuietTimings:
    horizon: timedelta = QUIET_HORIZON  # how far ahead a quiet group must be empty
    settle: timedelta = timedelta(seconds=2)  # from reading the wake count to the look it guards
    recheck: timedelta = timedelta(seconds=10)  # after a look found work ahead: the next look at the soonest


def group_is_quiet(
    jobs: JobStore, runs: RunStore, partitions: list[int], now: datetime, until: datetime
) -> bool:
    """No row of ``partitions`` in the due index due before ``until`` (from the current minute's bucket
    on; earlier buckets are the sweep's, which found them empty), and no run that may need the reaper
    before it. Stops at the first sign of work."""
    buckets = []
    start = now.replace(second=0, microsecond=0)
    while start <= until:
        buckets.append(minute_bucket(start))
        start += MINUTE
    for partition in partitions:
        if runs.has_reap_work_before(partition, until):
            return False
        for bucket in buckets:
            if jobs.due_rows(partition, bucket, until, 1):
                return False
    return True


@dataclass
class QuietWatch:
    """Asked after each tick of a holder (``PollerShift.serve``): may it give the lease back and return?"""

    poller: Poller
    leases: PollerLeaseStore
    group: str
    me: str
    timings: QuietTimings = field(default_factory=QuietTimings)
    looks: int = 0  # looks at the indexes (each a Query per partition and bucket, at most)
    _seen: tuple[int, datetime] | None = None  # the wake count read, and when
    _not_before: datetime | None = None
    _busy: bool = False
    _swept: bool = False

    def saw_sweep(self, report: ClaimReport) -> None:
        self._swept = True
        if report.due_rows or report.runs_created:
            self._busy = True

    def saw_fire(self, report: FireReport) -> None:
        if report.fired:
            self._busy = True

    def woken(self, now: datetime) -> None:
        """The release was refused: something was written due soon. Look again only after ``recheck``
        (more time for the due index to show it)."""
        self._not_before = now + self.timings.recheck

    def wakes_to_keep(self, now: datetime) -> int | None:
        """The wake count the lease may be given back under, once the group has been seen quiet; None
        while it may not (yet)."""
        if not self._swept:
            return None  # not one sweep of its own yet: the holder before may have left rows due
        if self._busy:
            self._busy = False
            self._seen = None
            self._not_before = now + self.timings.recheck
            return None
        if self._not_before is not None and now < self._not_before:
            return None
        until = now + self.timings.horizon
        upcoming = self.poller.preload.next_fire_at() if self.poller.preload is not None else None
        if upcoming is not None and upcoming <= until:
            self._not_before = now + self.timings.recheck
            return None
        if self._seen is None:
            lease = self.leases.read_poller_lease(self.group)
            if lease.holder != self.me:
                return None
            self._seen = (lease.wakes, now)
            return None
        wakes, read_at = self._seen
        if now - read_at < self.timings.settle:
            return None
        self._seen = None
        self.looks += 1
        partitions = list(self.poller.config.partitions)
        if not group_is_quiet(self.poller.jobs, self.poller.runs, partitions, now, until):
            self._not_before = now + self.timings.recheck
            return None
        return wakes
