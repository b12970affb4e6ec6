"""A worker's batch on the in-memory twin: its runs are called at the same time, its leases taken in one
call to the store and its results recorded in few, and a failure that belongs to one team's runs stays
theirs (their messages come back; the other runs of the batch go on)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from duetime.adapters.memory import MemoryAlerts, MemoryQueue, MemoryStore
from duetime.domain.clock import ManualClock
from duetime.domain.ids import PARTITIONS
from duetime.domain.models import RunStatus, Team
from duetime.execution.worker import Worker, WorkOutcome, WorkReport
from duetime.ports import ResultWrite, RunMessage, TargetRequest, TargetResponse
from duetime.ports.queue import decode
from duetime.scheduling.poller import Poller, PollerConfig

from ..twin_support import T0, a_job


class Counting:
    """The twin, counting the batched calls the worker makes; ``slots_fail_for``: a team whose slots
    cannot be taken (the store refuses the request)."""

    def __init__(self, store: MemoryStore, slots_fail_for: str = "") -> None:
        self.store = store
        self.slots_fail_for = slots_fail_for
        self.lease_calls: list[int] = []
        self.result_calls: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def acquire_leases(self, attempts: Sequence[tuple[str, int]], *args: Any, **kwargs: Any) -> Any:
        self.lease_calls.append(len(attempts))
        return self.store.acquire_leases(attempts, *args, **kwargs)

    def record_results_and_free_slots(
        self,
        results: Sequence[ResultWrite],
        owner: str,
        now: datetime,
        slots: Mapping[str, Mapping[str, int]],
    ) -> set[str]:
        self.result_calls.append(len(results))
        return self.store.record_results_and_free_slots(results, owner, now, slots)

    def acquire_slots(self, team: Team, *args: Any) -> dict[str, int]:
        if team.team_id == self.slots_fail_for:
            raise ConnectionResetError("connection reset by peer")
        return self.store.acquire_slots(team, *args)


class AllAtOnce:
    """A target that answers only once ``expected`` calls are in flight together (else the barrier breaks)."""

    def __init__(self, expected: int) -> None:
        self.barrier = threading.Barrier(expected, timeout=5)

    def call(self, request: TargetRequest) -> TargetResponse:
        self.barrier.wait()
        return TargetResponse(200, "ok", None, duration_ms=1)


def claimed(store: MemoryStore, clock: ManualClock, teams: list[str]) -> list[RunMessage]:
    for team in teams:
        store.put_job(a_job(clock.now(), team=team), clock.now())
    clock.advance(1)
    queue = MemoryQueue(clock, visibility_timeout=90)
    config = PollerConfig(partitions=list(range(PARTITIONS)), preload_lead=None)
    Poller(store, store, queue, MemoryAlerts(), clock, config).claim()
    return [decode(m.body) for m in queue.receive(10, 0)]


def world(*teams: str) -> tuple[MemoryStore, ManualClock]:
    store, clock = MemoryStore(), ManualClock(T0)
    for team in teams:
        store.put_team(Team(team_id=team, max_concurrency=50))
    return store, clock


def test_a_batch_of_ten_is_called_at_once_leased_in_one_call_and_recorded_in_few() -> None:
    store, clock = world("team-a")
    messages = claimed(store, clock, ["team-a"] * 10)
    counting = Counting(store)
    worker = Worker(counting, counting, MemoryQueue(clock), MemoryAlerts(), AllAtOnce(10), clock)  # type: ignore[arg-type]

    reports = worker.process_batch(messages)

    assert [r.outcome for r in reports if isinstance(r, WorkReport)] == [WorkOutcome.SUCCEEDED] * 10
    assert counting.lease_calls == [10]
    assert sum(counting.result_calls) == 10 and len(counting.result_calls) <= 2  # the calls ended together
    assert all(store.get_run(m.run_id).status is RunStatus.SUCCEEDED for m in messages)  # type: ignore[union-attr]


def test_a_team_whose_slots_cannot_be_taken_fails_alone_and_the_rest_of_the_batch_goes_on() -> None:
    store, clock = world("team-a", "team-b")
    messages = claimed(store, clock, ["team-a", "team-b", "team-a"])
    counting = Counting(store, slots_fail_for="team-b")
    target = AllAtOnce(1)
    worker = Worker(counting, counting, MemoryQueue(clock), MemoryAlerts(), target, clock)  # type: ignore[arg-type]

    reports = dict(zip([m.run_id for m in messages], worker.process_batch(messages), strict=True))

    by_team = {m.run_id: store.get_run(m.run_id) for m in messages}
    for run_id, run in by_team.items():
        assert run is not None
        if run.team == "team-b":
            assert isinstance(reports[run_id], ConnectionResetError)  # its message comes back
            assert run.status is RunStatus.RUNNING  # leased, never called: the reaper takes it back
        else:
            report = reports[run_id]
            assert isinstance(report, WorkReport) and report.outcome is WorkOutcome.SUCCEEDED
            assert run.status is RunStatus.SUCCEEDED


class CallingThreads(AllAtOnce):
    """``AllAtOnce``, noting the thread each call ran on."""

    def __init__(self, expected: int) -> None:
        super().__init__(expected)
        self.threads: set[threading.Thread] = set()  # the objects, not their idents (which are reused)
        self.lock = threading.Lock()

    def call(self, request: TargetRequest) -> TargetResponse:
        with self.lock:
            self.threads.add(threading.current_thread())
        return super().call(request)


def test_a_worker_calls_its_batches_targets_on_threads_it_keeps_from_batch_to_batch() -> None:
    store, clock = world("team-a")
    target = CallingThreads(10)  # each batch's ten calls in flight together: ten threads a batch
    worker = Worker(store, store, MemoryQueue(clock), MemoryAlerts(), target, clock)  # type: ignore[arg-type]

    reports = [worker.process_batch(claimed(store, clock, ["team-a"] * 10)) for _ in range(4)]

    outcomes = [r.outcome for batch in reports for r in batch if isinstance(r, WorkReport)]
    assert outcomes == [WorkOutcome.SUCCEEDED] * 40
    assert threading.current_thread() not in target.threads  # called off the batch's thread, as before
    assert len(target.threads) == worker.config.parallel_calls  # four batches, one set of ten threads


def test_batches_worked_at_once_on_two_threads_do_not_share_their_calling_threads() -> None:
    store, clock = world("team-a")
    batches = [claimed(store, clock, ["team-a"] * 10) for _ in range(2)]
    target = AllAtOnce(20)  # both batches' twenty calls must be in flight together
    worker = Worker(store, store, MemoryQueue(clock), MemoryAlerts(), target, clock)  # type: ignore[arg-type]
    reports: list[list[WorkReport | Exception]] = []
    threads = [threading.Thread(target=lambda b=b: reports.append(worker.process_batch(b))) for b in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    outcomes = [r.outcome for batch in reports for r in batch if isinstance(r, WorkReport)]
    assert outcomes == [WorkOutcome.SUCCEEDED] * 20
