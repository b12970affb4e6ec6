"""Tables restored from a backup, started again without stopping a job (``duetime restore``; the procedure:
docs/guide/operations.md, "Restore").

A partition's low-water mark names the oldest minute bucket a sweep reads (``duetime.scheduling.low_water``)
and only moves forward. A jobs table restored to an earlier point holds the due rows of that point: beside
marks that moved on since (a control table kept current, or restored to a later moment than the jobs table),
those rows lie behind their marks, where no sweep reads them, and their jobs stop for good.

The rebuild lowers each partition's mark to the oldest bucket that holds one of its rows, or to the minute
before the current one if that is earlier, and never raises one (WATERMARK_AHEAD). A row written from then
on is filed no older than the minute it is written in (``codec.due_bucket``), so after the rebuild no due
row is behind its mark, whatever runs meanwhile. A poller's copy of a mark read before is refused when it
would raise the lowered mark (WATERMARK_BEHIND_AS_READ), so the rebuild is safe while pollers run.

What fires then, from the restored schedule: every due time at or after the restore point, under its own
run id (``make_run_id(job, nominal)``), including those that ran between the restore point and now; an
idempotent target drops those by run id. A runs table kept current already holds their rows: the claim
leaves such a row as it is (RUN_IS_NEW refuses it) and moves the schedule on all the same, so nothing stops;
they are then not run again. Times before the restore point are not lost: their rows are in the restored
runs table, and the reaper sends those not finished again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.domain.ids import PARTITIONS
from duetime.domain.timeutil import minute_bucket
from duetime.ports import MarkRebuild

# A row is filed in the minute its writer's clock says, which may trail the rebuild's by a little: the mark
# of a partition with no older row goes a minute further back (one more empty bucket read, once).
CLOCK_MARGIN = timedelta(minutes=1)
ALL_PARTITIONS = tuple(range(PARTITIONS))


@dataclass(frozen=True)
class MarkCheck:
    """The due index against the marks: ``behind`` counts, per partition, the due rows in buckets older
    than its mark (rows no sweep will read); none anywhere is the state the rebuild leaves."""

    rows: int  # due rows in the whole index
    marks: dict[int, str]  # partition -> its mark (partitions without one are left out)
    oldest: dict[int, str]  # partition -> the oldest bucket holding a due row of it
    behind: dict[int, int]  # partition -> due rows behind its mark (only partitions with some)

    @property
    def rows_behind(self) -> int:
        return sum(self.behind.values())


@dataclass(frozen=True)
class Rebuild:
    before: MarkCheck
    lowered: dict[int, str]  # partition -> the mark written
    after: MarkCheck


def check_marks(store: MarkRebuild, partitions: Sequence[int] = ALL_PARTITIONS) -> MarkCheck:
    """How the due rows of ``partitions`` stand against their marks (a scan of the due index's keys)."""
    counts = {key: count for key, count in store.due_rows_by_bucket().items() if key[0] in partitions}
    marks = store.low_water_marks(partitions)
    oldest: dict[int, str] = {}
    behind: dict[int, int] = {}
    for (partition, bucket), count in counts.items():
        oldest[partition] = min(bucket, oldest.get(partition, bucket))
        if partition in marks and bucket < marks[partition]:
            behind[partition] = behind.get(partition, 0) + count
    return MarkCheck(sum(counts.values()), marks, oldest, behind)


def rebuild_marks(store: MarkRebuild, now: datetime, partitions: Sequence[int] = ALL_PARTITIONS) -> Rebuild:
    """Lower each partition's mark to the oldest bucket holding one of its due rows, or to the minute before
    ``now`` (the store's clock) if that is earlier; a partition without rows or a mark is left without one
    (the API gives it one before its first job). Run again, it finds nothing to lower."""
    before = check_marks(store, partitions)
    floor = minute_bucket(now - CLOCK_MARGIN)
    targets: dict[int, str] = {}
    for partition in partitions:
        mark = before.marks.get(partition)
        target = min(before.oldest.get(partition, floor), floor)
        if (mark is None and partition in before.oldest) or (mark is not None and mark > target):
            targets[partition] = target
    lowered = store.lower_low_water_marks(targets)
    return Rebuild(before, lowered, check_marks(store, partitions))
