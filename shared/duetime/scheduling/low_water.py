"""A poller's copy of its partitions' low-water marks, read once a reign instead of every sweep.

A partition's mark names the oldest minute bucket of the due index that may still hold rows; the sweep
reads from there to the current minute (``poller.find_due_jobs``). The group's lease holder is the only
one that moves its partitions' marks, and a mark only moves forward. So the holder reads the marks once
when its reign begins, then keeps them as it moves them, instead of a BatchGetItem every second.

Why a stale copy is safe: it can only be behind the stored mark (a mark never goes back; another poller
that moved it since the read made the stored one newer), and a mark behind only makes the sweep read a few
buckets that are empty for good. A partition with no mark yet is read again at every sweep until it has
one (the API writes it before the partition's first job).

The one way a mark goes back: ``duetime restore`` lowers the marks to the rows of a restored jobs table
(``duetime.scheduling.restore``). A copy read before is then ahead of the stored mark. The poller sweeps
from it until its next move, which the store refuses (WATERMARK_BEHIND_AS_READ: a mark is raised only from
at least where its mover read it), or until its reign ends (``forget``); either way it then reads the
lowered mark, which nothing raised over the rows behind the copy.
"""

from __future__ import annotations

from collections.abc import Sequence

from duetime.ports import JobStore


class LowWaterMarks:
    def __init__(self) -> None:
        self._known: dict[int, str] = {}

    def read(self, store: JobStore, partitions: Sequence[int]) -> tuple[dict[int, str], bool]:
        """The marks known for ``partitions`` (reading the store only for those not known yet), and
        whether the store was read."""
        unknown = [partition for partition in partitions if partition not in self._known]
        if unknown:
            self._known.update(store.low_water_marks(unknown))
        return {p: self._known[p] for p in partitions if p in self._known}, bool(unknown)

    def moved(self, partition: int, mark: str) -> None:
        """This poller moved ``partition``'s mark to ``mark``."""
        if mark > self._known.get(partition, ""):
            self._known[partition] = mark

    def forget(self) -> None:
        """A new reign: read the marks again (the poller before may have moved them)."""
        self._known.clear()
