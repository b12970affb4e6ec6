"""A quiet partition group rests between ticks (``duetime.scheduling.quiet``) and a job write due soon wakes
it (``duetime.scheduling.wake``): on the in-memory twin with a manual clock, one invocation's shift as the
poller Lambda serves it (135 s runs, as EventBridge's rules send)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from duetime.adapters.memory import MemoryAlerts, MemoryQueue, MemoryStore
from duetime.domain.clock import ManualClock
from duetime.domain.ids import make_run_id, partition_of
from duetime.domain.models import Job, Team
from duetime.domain.partitions import group_label
from duetime.ports import DueRow
from duetime.scheduling.poller import Poller, PollerConfig
from duetime.scheduling.poller_lease import LeaseTimings, PollerShift, ShiftReport
from duetime.scheduling.quiet import QuietTimings
from duetime.scheduling.wake import GroupWaker, partition_groups

from ..twin_support import T0, a_job, at

GROUP = list(range(16))
QUIET = QuietTimings()
LABEL = group_label(GROUP)
RUN_SECONDS = 135


def one_off(fire_at: datetime) -> Job:
    """An exact one-time job due at ``fire_at`` in the group's partitions."""
    while True:
        job = a_job(fire_at, schedule={"at": fire_at.isoformat()})
        if partition_of(job.id) in GROUP:
            return job


class LaggingIndex:
    """The store, with the due index lagging its table for the jobs in ``hidden`` (as a GSI may for a moment
    after a write): the sweep and the quiet look do not see them until ``visible_at``."""

    def __init__(self, store: MemoryStore, clock: ManualClock) -> None:
        self.store = store
        self.clock = clock
        self.hidden: dict[str, datetime] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def _shown(self, job_id: str) -> bool:
        return job_id not in self.hidden or self.clock.now() >= self.hidden[job_id]

    def due_jobs(self, *args: Any, **kwargs: Any) -> list[Job]:
        return [job for job in self.store.due_jobs(*args, **kwargs) if self._shown(job.id)]

    def due_rows(self, *args: Any, **kwargs: Any) -> Sequence[DueRow]:
        return [row for row in self.store.due_rows(*args, **kwargs) if self._shown(row.job_id)]


@dataclass
class Group:
    clock: ManualClock
    store: MemoryStore
    queue: MemoryQueue
    index: LaggingIndex
    at_instants: list[tuple[datetime, Callable[[], None]]] = field(default_factory=list)

    def shift(self, quiet: QuietTimings | None = QUIET) -> PollerShift:
        config = PollerConfig(partitions=GROUP, preload_lead=timedelta(seconds=10))
        poller = Poller(self.index, self.store, self.queue, MemoryAlerts(), self.clock, config)  # type: ignore[arg-type]
        return PollerShift(poller, self.store, LeaseTimings(), quiet=quiet)

    def sleep(self, seconds: float) -> None:
        """The shift's waits move the clock; what the scene scheduled for an instant happens then."""
        self.clock.advance(seconds)
        due = [entry for entry in self.at_instants if entry[0] <= self.clock.now()]
        for entry in due:
            self.at_instants.remove(entry)
            entry[1]()

    def serve(self, name: str = "inv-1", wake: bool = False, **kwargs: Any) -> ShiftReport:
        return self.shift(**kwargs).serve(name, None, RUN_SECONDS, self.sleep, wake=wake)


@pytest.fixture
def group() -> Group:
    clock = ManualClock(T0)
    store = MemoryStore()
    store.put_team(Team(team_id="team-a", max_concurrency=5))
    return Group(clock, store, MemoryQueue(clock, visibility_timeout=90), LaggingIndex(store, clock))


def test_a_quiet_group_gives_its_lease_back_within_seconds_and_the_invocation_returns(group: Group) -> None:
    report = group.serve()
    assert report.rested and report.quiet_looks == 1
    assert group.clock.now() - T0 < timedelta(seconds=5)  # not the 135 s the run could have lasted
    assert group.store.read_poller_lease(LABEL).free_at(group.clock.now())  # the next tick takes it at once


def test_without_quiet_timings_the_holder_serves_its_whole_run(group: Group) -> None:
    report = group.serve(quiet=None)
    assert not report.rested and group.clock.now() - T0 >= timedelta(seconds=RUN_SECONDS - 3)


def test_a_job_due_within_the_horizon_keeps_the_holder_until_it_is_claimed_on_time(group: Group) -> None:
    job = one_off(at(80))
    group.store.put_job(job, T0)
    report = group.serve()
    assert report.rested
    run = group.store.get_run(make_run_id(job.id, at(80)))
    assert run is not None and run.created_at - at(80) < timedelta(seconds=1)  # fired in its second
    assert at(80) < group.clock.now() < at(80 + 20)  # then rested, long before the run's end


def test_a_job_due_beyond_the_horizon_lets_the_group_rest_and_is_the_next_ticks(group: Group) -> None:
    job = one_off(at(QuietTimings().horizon.total_seconds() + 30))
    group.store.put_job(job, T0)
    report = group.serve()
    assert report.rested and group.clock.now() < at(5)
    assert group.store.get_run(make_run_id(job.id, job.state.next_fire_at)) is None  # type: ignore[arg-type]


def test_a_run_whose_lease_expires_within_the_horizon_keeps_the_reaper_awake(group: Group) -> None:
    job = one_off(at(1))
    group.store.put_job(job, T0)
    run_id = make_run_id(job.id, at(1))

    def worker_takes_it_and_dies() -> None:
        assert group.store.acquire_lease(run_id, 1, "worker-a", at(3), at(63)) is not None

    group.at_instants.append((at(3), worker_takes_it_and_dies))
    report = group.serve()
    run = group.store.get_run(run_id)
    assert run is not None and run.attempt == 2  # the reaper took it back when its lease expired at 63 s
    assert report.rested and group.clock.now() > at(63)


def test_a_wake_while_the_holder_looks_keeps_it_for_a_job_the_index_does_not_show_yet(group: Group) -> None:
    """The job is written (and the group woken) after the holder read the wake count; the due index shows
    it a second later, after the holder's look. Without the wake count the holder would rest and the job
    would wait for the next tick; with it, the release is refused and the job fires in its second."""
    job = one_off(at(30))
    waker = GroupWaker(group.store, partition_groups([LABEL]), starter=Unused())

    def api_writes_the_job() -> None:
        group.store.put_job(job, group.clock.now())
        group.index.hidden[job.id] = group.clock.now() + timedelta(seconds=1)
        assert waker.job_written(job, group.clock.now()) is False  # the holder is there: no invocation

    group.at_instants.append((at(1.5), api_writes_the_job))
    report = group.serve()
    run = group.store.get_run(make_run_id(job.id, at(30)))
    assert run is not None and run.created_at - at(30) < timedelta(seconds=1)
    assert report.rested and group.clock.now() > at(30)


def test_a_woken_invocation_returns_at_once_when_the_group_has_a_holder(group: Group) -> None:
    assert group.store.acquire_poller_lease(LABEL, "holder", T0, at(6)) is not None
    report = group.serve("woken", wake=True)
    assert report.woken_while_held and report.sweeps == 0 and not report.reigns
    assert group.clock.now() == T0 and group.store.read_poller_lease(LABEL).holder == "holder"


def test_a_woken_invocation_serves_a_group_nobody_holds(group: Group) -> None:
    job = one_off(at(20))
    group.store.put_job(job, T0)
    report = group.serve("woken", wake=True)
    assert not report.woken_while_held and report.rested
    assert group.store.get_run(make_run_id(job.id, at(20))) is not None


@dataclass
class Starter:
    started: list[str] = field(default_factory=list)
    fails: bool = False

    def start(self, group: str) -> None:
        if self.fails:
            raise RuntimeError("Invoke throttled")
        self.started.append(group)


class Unused:
    def start(self, group: str) -> None:
        raise AssertionError("no invocation should be started")


def waker_for(store: MemoryStore, starter: Any) -> GroupWaker:
    return GroupWaker(store, partition_groups(["0-15", "16-31", "32-47", "48-63"]), starter)


def test_a_job_written_due_soon_in_a_resting_group_starts_its_poller() -> None:
    store, starter = MemoryStore(), Starter()
    job = one_off(at(60))
    assert waker_for(store, starter).job_written(job, T0)
    assert starter.started == [LABEL] and store.read_poller_lease(LABEL).wakes == 1


def test_a_job_written_due_soon_in_a_held_group_only_counts_the_wake() -> None:
    store = MemoryStore()
    assert store.acquire_poller_lease(LABEL, "holder", T0, at(6)) is not None
    assert not waker_for(store, Unused()).job_written(one_off(at(60)), T0)
    assert store.read_poller_lease(LABEL).wakes == 1


@pytest.mark.parametrize(
    "job",
    [
        one_off(T0 + QuietTimings().horizon + timedelta(seconds=1)),  # the next tick's to load
        one_off(at(10)).model_copy(update={"paused": True}),
    ],
    ids=["due-after-the-horizon", "paused"],
)
def test_a_job_not_due_soon_wakes_nobody(job: Job) -> None:
    store = MemoryStore()
    assert not waker_for(store, Unused()).job_written(job, T0)
    assert store.read_poller_lease(LABEL).wakes == 0


def test_a_wake_that_fails_is_logged_and_the_write_stands(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    assert not waker_for(store, Starter(fails=True)).job_written(one_off(at(10)), T0)
    assert "waking poller group 0-15 failed" in caplog.text


def test_partition_groups_name_each_partition_by_its_group_as_the_lease_does() -> None:
    groups = partition_groups(["0-15", "16-31", "32-47", "48-63"])
    assert groups[0] == groups[15] == "0-15" and groups[63] == "48-63" and len(groups) == 64
    assert partition_groups(["0-7,32-39"])[33] == "0-7,32-39"
