"""Restoring the jobs table to an earlier point (``duetime restore``, ``duetime.scheduling.restore``), on the
in-memory twin: the jobs table goes back while the control table (its low-water marks) and the runs table
stay current, the case the issue describes. Without the rebuild the restored rows lie behind the marks and
their jobs stop; with it every job goes on, whatever the pollers' copies of the marks say."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from duetime.adapters.memory import MemoryAlerts, MemoryQueue, MemoryStore
from duetime.domain.clock import ManualClock
from duetime.domain.ids import make_run_id, partition_of
from duetime.domain.models import Job
from duetime.domain.timeutil import minute_bucket
from duetime.scheduling.poller import Poller, PollerConfig
from duetime.scheduling.restore import check_marks, rebuild_marks

from ..twin_support import T0, a_job

RESTORE_POINT = T0 + timedelta(minutes=2)
RESTORED_AT = T0 + timedelta(minutes=7)


def running(jobs: int = 3, **spec: Any) -> tuple[ManualClock, MemoryStore, list[Job], Poller]:
    """``jobs`` 1-minute jobs due from T0 + 1 min, and a poller of their partitions, at T0."""
    clock, store = ManualClock(T0), MemoryStore()
    made = [a_job(T0 + timedelta(minutes=1), **spec) for _ in range(jobs)]
    for job in made:
        store.put_job(job, T0)
    partitions = sorted({partition_of(job.id) for job in made})
    poller = Poller(
        store, store, MemoryQueue(clock), MemoryAlerts(), clock, PollerConfig(partitions, preload_lead=None)
    )
    return clock, store, made, poller


def new_reign(clock: ManualClock, store: MemoryStore, poller: Poller) -> Poller:
    """A poller of the same partitions with no copy of the marks yet (the next reign's holder)."""
    return Poller(store, store, MemoryQueue(clock), MemoryAlerts(), clock, poller.config)


def sweep_until(clock: ManualClock, poller: Poller, until: datetime) -> None:
    while clock.now() < until:
        poller.claim()
        clock.advance(1)


def restore_jobs_table(store: MemoryStore, snapshot: list[Job]) -> None:
    """The jobs table as it was at the restore point (each row as written then); marks and runs current."""
    for job in snapshot:
        store.put_job(job, RESTORE_POINT)


def minutes_without_a_run(store: MemoryStore, job: Job, until: datetime) -> list[datetime]:
    runs = store.all_runs()
    nominal, missing = T0 + timedelta(minutes=1), []
    while nominal <= until:
        if make_run_id(job.id, nominal) not in runs:
            missing.append(nominal)
        nominal += timedelta(minutes=1)
    return missing


def test_without_the_rebuild_the_restored_rows_are_behind_the_marks_and_their_jobs_stop() -> None:
    clock, store, jobs, poller = running()
    sweep_until(clock, poller, RESTORE_POINT)
    snapshot = [store.get_job(job.id) for job in jobs]
    sweep_until(clock, poller, RESTORED_AT)
    restore_jobs_table(store, [job for job in snapshot if job is not None])

    assert check_marks(store).rows_behind == len(jobs)  # every restored due row, unread from now on
    sweep_until(clock, poller, RESTORED_AT + timedelta(minutes=5))
    for job, before in zip(jobs, snapshot, strict=True):
        stored = store.get_job(job.id)
        assert stored is not None and before is not None
        assert stored.state.next_nominal_at == before.state.next_nominal_at  # stopped at the restore point
    assert check_marks(store).rows_behind == len(jobs)


def test_the_rebuild_puts_every_mark_at_or_before_its_oldest_row_and_every_job_goes_on() -> None:
    clock, store, jobs, poller = running()
    sweep_until(clock, poller, RESTORE_POINT)
    snapshot = [job for job in (store.get_job(job.id) for job in jobs) if job is not None]
    sweep_until(clock, poller, RESTORED_AT)
    restore_jobs_table(store, snapshot)

    rebuild = rebuild_marks(store, clock.now())
    assert rebuild.before.rows_behind == len(jobs) and rebuild.after.rows_behind == 0
    for partition, mark in rebuild.after.marks.items():
        assert mark <= rebuild.after.oldest[partition]
    assert rebuild_marks(store, clock.now()).lowered == {}  # run again: nothing left to lower

    end = RESTORED_AT + timedelta(minutes=3)
    sweep_until(clock, poller, end)  # the same poller, whose copy of the marks was read before the rebuild
    for job in jobs:
        stored = store.get_job(job.id)
        assert stored is not None and stored.state.next_nominal_at is not None
        assert stored.state.next_nominal_at >= end - timedelta(minutes=1)  # caught up, going on
        assert minutes_without_a_run(store, job, end - timedelta(minutes=1)) == []
    assert check_marks(store).rows_behind == 0


def test_a_claim_that_meets_the_run_row_of_a_time_that_ran_after_the_restore_point_moves_on() -> None:
    # The runs table kept current holds the rows of the times claimed between the restore point and the
    # restore: the restored job's claim of each finds its run id taken (RUN_IS_NEW), leaves the row as it is
    # and moves the schedule all the same: the job never stops on it, and no time gets a second row. (A
    # catch-up window of an hour: every late time is claimed, none skipped as a misfire.)
    clock, store, (job,), poller = running(1, catchup_window_seconds=3600)
    sweep_until(clock, poller, RESTORE_POINT)
    snapshot = store.get_job(job.id)
    assert snapshot is not None and snapshot.state.next_nominal_at is not None
    sweep_until(clock, poller, RESTORED_AT)
    taken = make_run_id(job.id, snapshot.state.next_nominal_at)
    row_before = store.get_run(taken)
    assert row_before is not None
    rows_before = set(store.all_runs())
    restore_jobs_table(store, [snapshot])
    rebuild_marks(store, clock.now())

    report = new_reign(clock, store, poller).claim()  # reads the rebuilt marks
    assert report.claimed_jobs == 1 and report.existing_runs >= 1, report
    assert not {run.run_id for run in report.runs} & rows_before  # no time claimed twice
    assert store.get_run(taken) == row_before  # the row in the way is left as it was
    restored = store.get_job(job.id)
    assert restored is not None and restored.state.next_nominal_at is not None
    assert restored.state.next_nominal_at > snapshot.state.next_nominal_at
    sweep_until(clock, poller, RESTORED_AT + timedelta(minutes=2))
    assert minutes_without_a_run(store, job, RESTORED_AT + timedelta(minutes=1)) == []


def test_a_partition_with_no_row_keeps_a_mark_no_later_than_the_minute_before_the_rebuild() -> None:
    clock, store = ManualClock(T0), MemoryStore()
    store.ensure_low_water_mark(5, minute_bucket(T0 + timedelta(minutes=30)))  # a clock that ran ahead
    store.ensure_low_water_mark(6, minute_bucket(T0 - timedelta(minutes=30)))
    rebuild = rebuild_marks(store, clock.now())
    assert rebuild.lowered == {5: minute_bucket(T0 - timedelta(minutes=1))}
    assert store.low_water_marks([5, 6, 7]) == {
        5: minute_bucket(T0 - timedelta(minutes=1)),
        6: minute_bucket(T0 - timedelta(minutes=30)),  # behind is never raised: it costs empty reads only
    }
