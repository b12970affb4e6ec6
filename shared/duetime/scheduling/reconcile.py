"""The reconciler: once a minute, checks that what was due got claimed and what was claimed got started, from
the stores rather than from the pollers' and workers' own reports, so that their silence shows.

Per partition (64), bounded reads only:
- the due index from the partition's low-water mark (the oldest bucket that may hold rows), up to
  ``max_buckets`` buckets and ``row_limit`` rows, stopping at the first bucket with a row due before
  ``now - grace``: the oldest such row gives ``OldestUnclaimedDueSeconds``; each row read whose fire time is
  past its job's catch-up window counts in ``MissedFires`` (a due time no run was made for in time). A
  healthy poller keeps the mark at the current minute: one Query (Limit) a partition.
- the reap index's first ``queued_limit`` entries (``WaitingRuns``): the oldest run still ``queued`` gives
  ``OldestQueuedSeconds`` (claimed, no worker started it).
Each figure is the largest over the partitions (``MissedFires`` the sum), published every tick, zeros too
(the alarms read each minute's value), with ``Reconciliations`` = 1: the heartbeat. The report is also kept
(``ReconcilerRecord``) for ``duetime system alarms --local``.

``MissedFires`` is a lower bound when a partition holds more late rows than it reads (``row_limit``); the
alarm asks only whether it is above zero."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from duetime.domain.alarms import MISSED_FIRES, OLDEST_QUEUED, OLDEST_UNCLAIMED_DUE, RECONCILIATIONS
from duetime.domain.claim_plan import DEFAULT_MISFIRE_GRACE, catchup_window
from duetime.domain.clock import Clock
from duetime.domain.ids import PARTITIONS
from duetime.domain.timeutil import minute_bucket, parse_minute_bucket
from duetime.ports import DueReads, ReconcilerRecord, ReconcilerReport, WaitingRuns
from duetime.ports.metrics import MetricsSink

log = logging.getLogger(__name__)


class ReconcilerStore(DueReads, WaitingRuns, ReconcilerRecord, Protocol):
    """Every read and the one write the reconciler makes (``DynamoStore`` and ``MemoryStore`` keep it)."""


@dataclass(frozen=True)
class ReconcilerConfig:
    """``grace``: how long a due row may wait before it counts as unclaimed (the pollers sweep every second
    and the minute preload fires at the second, so a few seconds is late already; 30 s leaves room for a
    handover). ``misfire_grace``: the installation's catch-up window (a job's own overrides it)."""

    grace: timedelta = timedelta(seconds=30)
    misfire_grace: timedelta = DEFAULT_MISFIRE_GRACE
    partitions: Sequence[int] = range(PARTITIONS)
    max_buckets: int = 5  # buckets read a partition, from its low-water mark
    row_limit: int = 100  # rows read a partition (Query Limit)
    queued_limit: int = 25  # reap index entries read a partition (Query Limit)


@dataclass(frozen=True)
class Reconciliation:
    at: datetime
    missed_fires: int
    oldest_unclaimed_due_seconds: float
    oldest_queued_seconds: float
    due_queries: int

    def figures(self) -> dict[str, float]:
        return {
            MISSED_FIRES: self.missed_fires,
            OLDEST_UNCLAIMED_DUE: self.oldest_unclaimed_due_seconds,
            OLDEST_QUEUED: self.oldest_queued_seconds,
            RECONCILIATIONS: 1,
        }


_UNITS = {
    MISSED_FIRES: "Count",
    OLDEST_UNCLAIMED_DUE: "Seconds",
    OLDEST_QUEUED: "Seconds",
    RECONCILIATIONS: "Count",
}


class Reconciler:
    def __init__(self, store: ReconcilerStore, clock: Clock, config: ReconcilerConfig | None = None) -> None:
        self.store = store
        self.clock = clock
        self.config = config or ReconcilerConfig()

    def tick(self, metrics: MetricsSink | None = None) -> Reconciliation:
        """Reconcile every partition at the clock's now; publish the figures and keep the report."""
        now = self.clock.now()
        config = self.config
        marks = self.store.low_water_marks(list(config.partitions))
        missed, oldest_due, queries = 0, now, 0
        oldest_queued = now
        for partition in config.partitions:
            mark = marks.get(partition)
            if mark is not None:
                late, first, read = self._unclaimed(partition, mark, now)
                missed, oldest_due, queries = missed + late, min(oldest_due, first), queries + read
            fire = self.store.oldest_queued_fire(partition, config.queued_limit)
            if fire is not None:
                oldest_queued = min(oldest_queued, fire)
        result = Reconciliation(
            at=now,
            missed_fires=missed,
            oldest_unclaimed_due_seconds=_seconds(now - oldest_due),
            oldest_queued_seconds=_seconds(now - oldest_queued),
            due_queries=queries,
        )
        figures = result.figures()
        if metrics is not None:
            for name, value in figures.items():
                metrics.add_metric(name, _UNITS[name], value)
        self.store.record_reconciliation(ReconcilerReport(now, figures))
        return result

    def _unclaimed(self, partition: int, mark: str, now: datetime) -> tuple[int, datetime, int]:
        """(due times past their catch-up window, the oldest fire time before ``now - grace`` or ``now``,
        queries made) for ``partition``, reading from its low-water mark ``mark``."""
        config = self.config
        until = now - config.grace
        last = minute_bucket(until)
        bucket_start = parse_minute_bucket(mark)
        missed, oldest, queries, rows_left = 0, now, 0, config.row_limit
        for _ in range(config.max_buckets):
            bucket = minute_bucket(bucket_start)
            if bucket > last or rows_left <= 0:
                break
            rows = self.store.due_rows(partition, bucket, until, rows_left)
            queries += 1
            rows_left -= len(rows)
            for row in rows:
                fire_at = datetime.fromtimestamp(row.fire_at, tz=UTC)
                oldest = min(oldest, fire_at)
                if now - fire_at > catchup_window(row.job(), config.misfire_grace):
                    missed += 1
            if rows:
                break
            bucket_start += timedelta(minutes=1)
        return missed, oldest, queries


def _seconds(delta: timedelta) -> float:
    return max(0.0, round(delta.total_seconds(), 3))
