"""The holder reads its partitions' low-water marks once a reign, not at every sweep
(``duetime.scheduling.low_water``), and a copy that another poller has overtaken costs reads, never a row: on
the in-memory twin."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from duetime.adapters.memory import MemoryAlerts, MemoryQueue, MemoryStore
from duetime.domain.clock import ManualClock
from duetime.domain.ids import partition_of
from duetime.domain.timeutil import minute_bucket
from duetime.scheduling.poller import ClaimWindow, Poller, PollerConfig

from ..twin_support import T0, a_job


class MarkReads:
    """The twin, counting the reads of low-water marks."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.reads: list[list[int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def low_water_marks(self, partitions: Sequence[int]) -> dict[int, str]:
        self.reads.append(list(partitions))
        return self.store.low_water_marks(partitions)


def poller_on(store: Any, clock: ManualClock, partitions: list[int]) -> Poller:
    config = PollerConfig(partitions=partitions, preload_lead=None)
    return Poller(store, store, MemoryQueue(clock), MemoryAlerts(), clock, config)


def test_the_marks_are_read_once_and_then_kept_as_the_poller_moves_them() -> None:
    clock, store = ManualClock(T0), MemoryStore()
    job = a_job(T0 + timedelta(minutes=5))
    store.put_job(job, T0)  # writes its partition's mark
    reads = MarkReads(store)
    poller = poller_on(reads, clock, [partition_of(job.id)])
    for _ in range(180):  # three minutes of sweeps: the mark moves twice meanwhile
        poller.claim()
        clock.advance(1)
    assert len(reads.reads) == 1
    stored = store.low_water_marks([partition_of(job.id)])[partition_of(job.id)]
    assert stored > minute_bucket(T0)  # it moved, and the copy followed without reading
    assert poller.claim().runs_created == 0 and len(reads.reads) == 1


def test_a_partition_without_a_mark_is_read_again_until_it_has_one() -> None:
    clock, store = ManualClock(T0), MemoryStore()
    reads = MarkReads(store)
    poller = poller_on(reads, clock, [7])
    poller.claim()
    poller.claim()
    assert len(reads.reads) == 2  # nothing to keep yet


def test_a_copy_overtaken_by_another_poller_still_finds_every_due_row() -> None:
    clock, store = ManualClock(T0), MemoryStore()
    late = a_job(T0 + timedelta(minutes=3))
    store.put_job(late, T0)
    partition = partition_of(late.id)
    mine = poller_on(store, clock, [partition])
    mine.claim()  # reads the mark: the minute of T0
    # another poller's move
    store.advance_low_water_marks({partition: minute_bucket(T0 + timedelta(minutes=3))})
    clock.set(T0 + timedelta(minutes=3, seconds=1))
    report = mine.claim()  # from the older copy: more buckets read, the row found all the same
    assert report.runs_created == 1 and report.queries >= 4


def test_a_new_reign_reads_the_marks_again() -> None:
    clock, store = ManualClock(T0), MemoryStore()
    job = a_job(T0 + timedelta(hours=1))
    store.put_job(job, T0)
    reads = MarkReads(store)
    poller = poller_on(reads, clock, [partition_of(job.id)])

    class TwoReigns:  # a gate whose window starts again after 5 s (another holder's term came between)
        done = False

        def step(self, now: Any) -> None:
            self.done = clock.now() >= T0 + timedelta(seconds=10)

        def window(self) -> ClaimWindow:
            start = T0 if clock.now() < T0 + timedelta(seconds=5) else T0 + timedelta(seconds=5)
            return ClaimWindow(start, T0 + timedelta(seconds=10))

        def next_step_at(self) -> Any:
            return clock.now() + timedelta(seconds=1)

    poller.run_until(stop=lambda: False, sleep=clock.advance, gate=TwoReigns())  # type: ignore[arg-type]
    assert len(reads.reads) == 2  # once at each reign's start, not once a sweep (10 sweeps)
