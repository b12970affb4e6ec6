"""The real ``Poller`` and ``Worker`` on the in-memory twin (``duetime.adapters.memory``) with a manual
clock: the logic of claiming, leasing, retrying, deferring and reaping, in milliseconds and without an
emulator. The twin keeps DynamoDB's conditions (``tests/integration/test_store_contract.py`` holds both to
one suite); what these tests cannot show (request counts, limits, latency) is left to the integration tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from duetime.adapters.http_target import HttpTargetCaller
from duetime.adapters.memory import MemoryAlerts, MemoryQueue, MemoryStore
from duetime.domain.clock import ManualClock
from duetime.domain.ids import PARTITIONS, make_run_id
from duetime.domain.models import RunResult, RunStatus, Team
from duetime.execution.worker import LeaseLapsedBeforeCall, Worker, WorkerConfig, WorkOutcome, WorkReport
from duetime.local.system import EventSourceMapping
from duetime.ports import RunMessage, TargetRequest, TargetResponse
from duetime.scheduling.poller import Poller, PollerConfig

from ..twin_support import T0, a_job, at
from .target_support import serve


@dataclass
class Target:
    """A target that answers ``status`` (after ``during(request)``, if given) and keeps what it was sent."""

    status: int = 200
    during: Callable[[TargetRequest], None] | None = None
    requests: list[TargetRequest] = field(default_factory=list)

    def call(self, request: TargetRequest) -> TargetResponse:
        self.requests.append(request)
        if self.during:
            self.during(request)
        return TargetResponse(self.status, "answer", None, duration_ms=4)


@dataclass
class World:
    clock: ManualClock
    store: MemoryStore
    queue: MemoryQueue
    target: Target
    alerts: MemoryAlerts
    poller: Poller

    def worker(self, owner: str = "worker-a") -> Worker:
        return Worker(self.store, self.store, self.queue, self.alerts, self.target, self.clock, owner=owner)

    def deliver(self, worker: Worker) -> list[WorkReport]:
        """One receive of the queue, worked by ``worker`` as the event source mapping would."""
        reports: list[WorkReport] = []
        mapping = EventSourceMapping(self.queue, worker, on_report=reports.append)  # type: ignore[arg-type]
        mapping.poll_once(wait_seconds=0)
        assert not mapping.errors, mapping.errors
        return reports

    def due_now(self, team: str = "team-a") -> str:
        """A job due at the clock's second, claimed by the poller; its run id."""
        job = a_job(self.clock.now(), team=team)
        self.store.put_job(job, self.clock.now())
        self.clock.advance(1)
        report = self.poller.claim()
        (run,) = report.runs
        return run.run_id


@pytest.fixture
def world() -> World:
    clock = ManualClock(T0)
    store = MemoryStore()
    store.put_team(Team(team_id="team-a", max_concurrency=5))
    queue = MemoryQueue(clock, visibility_timeout=90)
    alerts = MemoryAlerts()
    config = PollerConfig(partitions=list(range(PARTITIONS)), preload_lead=None)
    return World(
        clock, store, queue, Target(), alerts, Poller(store, store, queue, alerts, clock, config, store)
    )


def test_a_claimed_run_is_worked_once(world: World) -> None:
    run_id = world.due_now()

    (report,) = world.deliver(world.worker())

    assert (report.outcome, report.run_id, report.attempt) == (WorkOutcome.SUCCEEDED, run_id, 1)
    (request,) = world.target.requests
    assert request.headers["Idempotency-Key"] == run_id
    run = world.store.get_run(run_id)
    assert run is not None and run.status is RunStatus.SUCCEEDED and run.finished_at == at(1)
    assert world.queue.pending() == []  # the message was deleted
    assert world.deliver(world.worker("worker-b")) == []


def test_a_failed_attempt_comes_back_after_its_backoff_and_the_last_one_alerts(world: World) -> None:
    run_id = world.due_now()
    world.target.status = 503

    (first,) = world.deliver(world.worker())
    assert first.outcome is WorkOutcome.RETRY_SCHEDULED
    assert world.deliver(world.worker()) == []  # the retry's message waits for its backoff (5 s + jitter)
    world.clock.advance(7)
    (second,) = world.deliver(world.worker())

    assert (second.outcome, second.attempt) == (WorkOutcome.DEAD, 2)
    run = world.store.get_run(run_id)
    assert run is not None and run.status is RunStatus.DEAD
    assert [(a.kind, a.run_id, a.attempt) for a in world.alerts.published] == [("run_dead", run_id, 2)]


def test_a_stale_workers_result_is_refused(world: World) -> None:
    run_id = world.due_now()

    def stall(_: TargetRequest) -> None:
        """The call outlives the lease: the reaper gives the run to the next attempt meanwhile."""
        world.clock.advance(62)
        assert world.poller.recover().leases_expired == 1

    world.target.during = stall
    (report,) = world.deliver(world.worker("worker-a"))

    assert report.outcome is WorkOutcome.STALE
    run = world.store.get_run(run_id)
    assert run is not None and (run.status, run.attempt, run.result) == (RunStatus.QUEUED, 2, None)
    world.target.during = None
    (retried,) = world.deliver(world.worker("worker-b"))
    assert (retried.outcome, retried.attempt) == (WorkOutcome.SUCCEEDED, 2)


class PausedAfterTheSlot:
    """The worker's team store, with the worker process stopped (SIGSTOP) for ``seconds`` right after it
    takes its slots: the stretch between lease and call that a heartbeat does not cover."""

    def __init__(self, store: MemoryStore, clock: ManualClock, seconds: float) -> None:
        self.store, self.clock, self.seconds = store, clock, seconds

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def acquire_slots(self, *args: Any) -> dict[str, int]:
        slots: dict[str, int] = self.store.acquire_slots(*args)
        self.clock.advance(self.seconds)
        return slots


@pytest.mark.parametrize("paused", [61, 45])  # past the lease; into its last heartbeat
def test_a_worker_held_up_between_its_slot_and_its_call_does_not_call(world: World, paused: int) -> None:
    run_id = world.due_now()
    teams = PausedAfterTheSlot(world.store, world.clock, paused)
    held_up = Worker(world.store, teams, world.queue, world.alerts, world.target, world.clock, owner="a")

    (outcome,) = held_up.process_batch([RunMessage(run_id, 1)])

    assert isinstance(outcome, LeaseLapsedBeforeCall) and world.target.requests == []
    world.clock.advance(62 - paused)
    assert world.poller.recover().leases_expired == 1  # the reaper gives it to the next attempt
    reports = world.deliver(world.worker("worker-b"))  # attempt 1's message (not deleted): a duplicate now
    assert sorted((r.outcome, r.attempt) for r in reports) == [
        (WorkOutcome.DUPLICATE, 1),
        (WorkOutcome.SUCCEEDED, 2),
    ]
    assert [r.headers["X-Duetime-Attempt"] for r in world.target.requests] == ["2"]


def test_a_team_at_its_cap_defers_without_using_the_attempt(world: World) -> None:
    world.store.put_team(Team(team_id="team-b", max_concurrency=1))
    team = world.store.get_team("team-b")
    assert team is not None and world.store.acquire_slot(team, "another-run", T0, at(120)) == 0
    run_id = world.due_now(team="team-b")

    (report,) = world.deliver(world.worker())

    assert report.outcome is WorkOutcome.DEFERRED and world.target.requests == []
    run = world.store.get_run(run_id)
    assert run is not None and (run.status, run.attempt) == (RunStatus.QUEUED, 1)
    assert world.deliver(world.worker()) == []  # deferred 5 s
    world.store.release_slot("team-b", 0, "another-run")
    world.clock.advance(5)
    (worked,) = world.deliver(world.worker())
    assert (worked.outcome, worked.attempt) == (WorkOutcome.SUCCEEDED, 1)


def test_a_lost_message_is_sent_again_after_the_queue_deadline(world: World) -> None:
    run_id = world.due_now()
    world.queue.delete([m.receipt_handle for m in world.queue.receive()])  # lost

    world.clock.advance(599)
    assert world.poller.recover().messages_resent == 0
    world.clock.advance(2)
    assert world.poller.recover().messages_resent == 1

    (report,) = world.deliver(world.worker())
    assert (report.outcome, report.run_id) == (WorkOutcome.SUCCEEDED, run_id)


def test_a_queued_run_cancelled_is_never_called(world: World) -> None:
    run_id = world.due_now()

    cancelled = world.store.cancel_run(run_id, world.clock.now())

    assert cancelled is not None and cancelled.status is RunStatus.CANCELLED and cancelled.finished_at
    (report,) = world.deliver(world.worker())
    assert report.outcome is WorkOutcome.DUPLICATE and world.target.requests == []  # the lease is refused
    assert world.store.cancel_run(run_id, world.clock.now()) is None  # finished: nothing left to cancel
    assert world.poller.recover().leases_expired == 0 and world.queue.pending() == []


def test_a_run_cancelled_while_called_is_not_recorded_and_frees_its_slot(world: World) -> None:
    world.store.put_team(Team(team_id="team-b", max_concurrency=1))
    run_id = world.due_now(team="team-b")
    world.target.during = lambda _: world.store.cancel_run(run_id, world.clock.now())

    (report,) = world.deliver(world.worker())

    assert report.outcome is WorkOutcome.CANCELLED and len(world.target.requests) == 1
    run = world.store.get_run(run_id)
    assert run is not None and (run.status, run.result) == (RunStatus.CANCELLED, None)
    team = world.store.get_team("team-b")
    assert team is not None and world.store.acquire_slots(team, ["next-run"], world.clock.now(), at(60))
    assert world.alerts.published == []


def test_a_long_call_cancelled_is_given_up_at_the_next_heartbeat_which_frees_its_slot(world: World) -> None:
    """The heartbeat finds the lease gone, sees the run cancelled and frees its slot while the call still
    runs: the team's next run need not wait for a call whose answer will be discarded."""
    world.store.put_team(Team(team_id="team-b", max_concurrency=1))
    run_id = world.due_now(team="team-b")
    beat, beaten = threading.Event(), threading.Event()
    slot_free_during_the_call: list[bool] = []

    def wait(done: threading.Event, _seconds: float) -> bool:
        if not beat.is_set():
            beat.wait(5)  # the first heartbeat comes once the run is cancelled
            return done.is_set()
        beaten.set()
        return done.wait(5)

    def cancelled_while_called(_: TargetRequest) -> None:
        assert world.store.cancel_run(run_id, world.clock.now()) is not None
        beat.set()
        assert beaten.wait(5)
        team = world.store.get_team("team-b")
        assert team is not None
        taken = world.store.acquire_slots(team, ["next-run"], world.clock.now(), at(60))
        slot_free_during_the_call.append(bool(taken))

    world.target.during = cancelled_while_called
    worker = Worker(world.store, world.store, world.queue, world.alerts, world.target, world.clock, wait=wait)
    (report,) = world.deliver(worker)

    assert slot_free_during_the_call == [True]
    assert report.outcome is WorkOutcome.CANCELLED
    run = world.store.get_run(run_id)
    assert run is not None and (run.status, run.result) == (RunStatus.CANCELLED, None)


def test_a_target_trickling_its_answer_holds_the_worker_no_longer_than_the_runs_timeout(world: World) -> None:
    """Heartbeats keep a lease while its call runs, so a call must end: a target sending a header line
    every 0.3 s (40 of them) to a run with a 1 s timeout held a worker for 12 s. The real caller ends the
    call at the run's timeout, the heartbeats with it, and the attempt is retried as a timeout."""
    caller = HttpTargetCaller(allow_private=True, resolve=lambda host: ["127.0.0.1"])
    config = WorkerConfig(heartbeat=timedelta(seconds=0.2))
    worker = Worker(world.store, world.store, world.queue, world.alerts, caller, world.clock, config)
    with serve("127.0.0.1") as target:
        url = f"http://target.example:{target.port}/trickle?part=headers&every=0.3"
        job = a_job(world.clock.now(), target={"url": url}, timeout_seconds=1)
        world.store.put_job(job, world.clock.now())
        world.clock.advance(1)
        (run,) = world.poller.claim().runs
        started = time.monotonic()
        (report,) = world.deliver(worker)
        held = time.monotonic() - started

    assert held < 2.5
    assert (report.outcome, report.heartbeats >= 1) == (WorkOutcome.RETRY_SCHEDULED, True)
    recorded = world.store.get_run(run.run_id)
    assert recorded is not None and recorded.status is RunStatus.RETRY_WAIT and recorded.result is not None
    assert (recorded.result.error, recorded.result.retryable) == ("timeout after 1s", True)


def test_a_buffered_run_waits_for_the_previous_one_to_end_then_runs(world: World) -> None:
    job = a_job(world.clock.now(), overlap="buffer_one")
    world.store.put_job(job, world.clock.now())
    world.clock.advance(1)
    (first,) = world.poller.claim().runs
    world.queue.delete([m.receipt_handle for m in world.queue.receive()])  # a worker has it...
    held = world.store.acquire_lease(first.run_id, 1, "slow-worker", world.clock.now(), at(60))
    assert held is not None  # ...and is still calling its target a minute later
    world.clock.advance(59)
    (second,) = world.poller.claim().runs
    assert second.waits_for == first.run_id

    (report,) = world.deliver(world.worker())
    assert report.outcome is WorkOutcome.DEFERRED and world.target.requests == []
    world.clock.advance(60)
    third = world.poller.claim()  # the second one still waits: this time is skipped
    assert third.runs == [] and third.runs_skipped == 1
    assert world.store.record_result(
        held, "slow-worker", RunStatus.SUCCEEDED, RunResult(duration_ms=9), world.clock.now()
    )
    world.clock.advance(5)
    (started,) = world.deliver(world.worker())

    assert (started.outcome, started.run_id, started.attempt) == (WorkOutcome.SUCCEEDED, second.run_id, 1)
    assert [r.headers["Idempotency-Key"] for r in world.target.requests] == [second.run_id]


def test_with_skip_a_time_whose_previous_run_is_unfinished_is_recorded_skipped_and_never_sent(
    world: World,
) -> None:
    job = a_job(world.clock.now(), overlap="skip")
    world.store.put_job(job, world.clock.now())
    world.clock.advance(1)
    (first,) = world.poller.claim().runs
    world.clock.advance(60)  # its message waits in the queue: the run is still queued

    report = world.poller.claim()

    assert report.runs == [] and report.runs_skipped == 1
    skipped = world.store.get_run(make_run_id(job.id, at(60)))
    assert skipped is not None and skipped.status is RunStatus.SKIPPED
    assert (
        skipped.result is not None and skipped.result.error == f"overlap skip: run {first.run_id} is queued"
    )
    assert [r.run_id for r in world.deliver(world.worker())] == [first.run_id]  # only the first was sent
    world.clock.advance(60)
    (next_run,) = world.poller.claim().runs  # the first one finished: the next time runs
    assert next_run.nominal_at == at(120)
